"""MNIST with quantization-aware training, checked three ways on 2,000 held-out images.

`edgesynth train` trains the vendor's MNIST network (ai85net5) on the first 8,000 images of
the MNIST test set (t10k files in --data) and holds out the last 2,000: float epochs, then QAT.
The last QAT checkpoint is quantized; the held-out images are then classified by
- the float model (last epoch before QAT): float_top1,
- the last QAT epoch, quantized, in 8-bit mode (edgesynth.nn computing the chip's integers):
  quant_top1,
- the synthesizer's simulator running the generated YAML + quantized checkpoint: sim_agree is
  the share of images where it predicts the same class as the 8-bit model.

    python benchmarks/mnist_qat.py --data ../shared/data/mnist [--epochs 12] [--qat-start 7]
        [--nproc-per-node 2]   (data-parallel: the same training in 2 processes)

The last line reads `float_top1=<percent> quant_top1=<percent> sim_agree=<percent>`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from edgesynth.nn.qat import QatPolicy
from edgesynth.quant.files import quantize_file
from edgesynth.quant.ptq import QuantizeOptions
from edgesynth.train import deploy
from edgesynth.train.command import TrainArgs, train_main
from edgesynth.train.datasets import load_dataset
from edgesynth.train.loop import evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder with the t10k IDX files")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--qat-start", type=int, default=7, help="first QAT epoch")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="MAX78000", help="the MAX chip")
    parser.add_argument("--torch-device", default="auto", help="auto, cpu, cuda, mps")
    parser.add_argument(
        "--nproc-per-node", type=int, default=None, help="data-parallel processes (Gloo/NCCL)"
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="keep the run folder here")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    parser.add_argument(
        "--train-limit", type=int, default=None, help="train on fewer images (smoke tests)"
    )
    args = parser.parse_args()
    if not 1 <= args.qat_start < args.epochs:
        parser.error("--qat-start must leave at least one float and one QAT epoch")
    if args.nproc_per_node is None:
        torch.set_num_threads(args.threads)

    started = time.time()
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="mnist-qat-"))
    policy_file = out_dir / "qat_policy.yaml"
    out_dir.mkdir(parents=True, exist_ok=True)
    policy = QatPolicy(start_epoch=args.qat_start, weight_bits=8)
    policy_file.write_text(
        f"start_epoch: {policy.start_epoch}\nweight_bits: {policy.weight_bits}\n"
    )
    run_dir = train_main(
        TrainArgs(
            model="ai85net5",
            dataset="mnist-test-split",
            data=args.data,
            chip=args.device,
            device=args.torch_device,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            qat_policy=str(policy_file),
            out_dir=out_dir,
            name="run",
            seed=args.seed,
            nproc_per_node=args.nproc_per_node,
            threads=None if args.nproc_per_node is None else args.threads // args.nproc_per_node,
            progress=args.progress,
            train_limit=args.train_limit,
        )
    )
    run_dir = run_dir or out_dir / "run"  # a data-parallel run's rank 0 made it
    torch.set_num_threads(args.threads)
    trained = time.time()

    # The last epoch of each phase, not the best one: nothing is selected on held-out images.
    dataset = load_dataset("mnist-test-split", args.data)
    float_net = deploy.load_model(run_dir / "checkpoint.pth.tar", "ai85net5", dataset, args.device)
    float_m = evaluate(float_net, dataset.test, num_classes=10, device=args.device)
    quantized = run_dir / "qat_last-q.pth.tar"
    quantize_file(run_dir / "qat_checkpoint.pth.tar", quantized, QuantizeOptions())
    net = deploy.load_model(quantized, "ai85net5", dataset, args.device)
    quant_m = deploy.eight_bit_metrics(net, dataset, args.device)
    check = deploy.simulator_check(
        run_dir / "ai85net5.yaml",
        quantized,
        dataset,
        args.device,
        quant_m.predictions,
        len(dataset.test),
        net,
    )
    done = time.time()
    print(
        f"held-out images: {len(dataset.test)}; training {trained - started:.0f} s, "
        f"checks {done - trained:.0f} s; run folder {run_dir}"
    )
    print(f"simulator top1 {check.sim_top1:.2f}%, identical output vectors {check.exact:.2f}%")
    print(
        f"float_top1={float_m.top1:.2f} quant_top1={quant_m.top1:.2f} sim_agree={check.agree:.2f}"
    )


if __name__ == "__main__":
    main()
