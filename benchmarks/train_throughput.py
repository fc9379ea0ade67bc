"""Training throughput: images per second of `edgesynth train`'s own epoch loop.

For the MNIST model (ai85net5, 1x28x28) and the CIFAR-10 model (ai85nascifarnet, 3x32x32),
on every PyTorch device this machine has (the CPU, CUDA GPUs, Apple's MPS), in the float phase
and in quantization-aware training: random images of the right shape go through
`edgesynth.train.loop.train_epoch` (data loader, forward, loss, backward, optimizer step),
after one warm-up epoch.

    python benchmarks/train_throughput.py [--images 2048] [--batch-size 64] [--amp] [--compile]

Each line reads `device=<d> model=<m> phase=<float|qat> images_per_s=<n>`.
"""

from __future__ import annotations

import argparse
import time

import torch

from edgesynth.nn.qat import QatPolicy, enable_qat
from edgesynth.train import accel
from edgesynth.train.datasets import Dataset, Split
from edgesynth.train.loop import TrainConfig, build_model, make_optimizer, train_epoch

MODELS = (("ai85net5", (1, 28, 28)), ("ai85nascifarnet", (3, 32, 32)))


def devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def random_dataset(shape: tuple[int, ...], images: int) -> Dataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (images, *shape), generator=gen).float() / 128
    y = torch.randint(0, 10, (images,), generator=gen)
    split = Split(x, y)
    return Dataset("random", split, split, 10, [str(i) for i in range(10)])


def measure(model_name: str, shape: tuple[int, ...], device: str, phase: str, args) -> float:
    cfg = TrainConfig(
        model=model_name,
        dataset=random_dataset(shape, args.images),
        batch_size=args.batch_size,
        augment=False,
        progress=False,
        seed=1,
        torch_device=accel.resolve(device),
        amp=args.amp,
        compile=args.compile,
        workers=args.workers,
    )
    model = build_model(cfg)
    if phase == "qat":
        enable_qat(model, QatPolicy(start_epoch=0, weight_bits=8))
    model = model.to(cfg.torch_device)
    if len(shape) == 3:
        model = model.to(memory_format=torch.channels_last)
    step_model = torch.compile(model) if cfg.compile else model
    optimizer = make_optimizer(cfg, model, 1e-3)
    scaler = accel.Precision(cfg.torch_device.type, cfg.amp).scaler()

    def epoch() -> None:
        train_epoch(
            step_model,
            cfg.dataset.train,
            optimizer,
            cfg,
            None,
            phase,
            10,
            qat=phase == "qat",
            scaler=scaler,
        )
        if cfg.torch_device.type == "cuda":
            torch.cuda.synchronize()

    epoch()  # warm-up (and compilation)
    start = time.perf_counter()
    epoch()
    return args.images / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048, help="images per timed epoch")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.add_argument("--workers", type=int, default=0, help="data-loader workers")
    parser.add_argument("--amp", action="store_true", help="mixed precision (float phase)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--device", action="append", help="only these devices (repeatable)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    for device in args.device or devices():
        for name, shape in MODELS:
            for phase in ("float", "qat"):
                rate = measure(name, shape, device, phase, args)
                print(f"device={device} model={name} phase={phase} images_per_s={rate:.0f}")


if __name__ == "__main__":
    main()
