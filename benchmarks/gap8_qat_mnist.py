"""gap8 quantization-aware training on real MNIST: float vs QAT integer top-1 on 1,000 images.

The CNNs of tests/pulp/test_qat_gap8_mnist.py (SmallCNN, and ResCNN with two skip additions;
written with `edgesynth.quant.qat_gap8` layers) are trained on the 8,000 first t10k images of
../shared/data/mnist (`--dataset mnist-test-split`):

- float: `--epochs` epochs in float (the baseline), then post-training quantization of that
  network (`quant.requant_onnx`, calibrated on 200 training images) at each weight width;
- QAT: `edgesynth train --target gap8` with the same number of epochs, QAT for the last
  `--qat-epochs`, at each weight width; its integer network (`network.onnx`) is run by
  edgesynth's integer front end and simulator and compared with the 8-bit mode.

Top-1 on images 9,000-9,999 (never trained on). One line per network and weight width:

    python benchmarks/gap8_qat_mnist.py [--epochs 5] [--qat-epochs 2] [--bits 8 4 2]
        [--models SmallCNN ResCNN]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "pulp")]

from test_qat_gap8_mnist import MODEL  # noqa: E402

from cli_helpers import run_cli  # noqa: E402
from edgesynth.train import gap8  # noqa: E402
from edgesynth.train.datasets import load_dataset  # noqa: E402
from mnist_lenet import MNIST  # noqa: E402

EVAL = slice(1000, 2000)  # of the test split (t10k images 8,000-9,999): images 9,000-9,999
SEED = 1


def float_network(model: str, data, epochs: int):  # type: ignore[no-untyped-def]
    """The baseline: the same network and schedule, float throughout."""
    torch.manual_seed(SEED)
    net = gap8.build(model, None, data.input_shape, data.num_classes, 8)
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = gap8.lr_at(3e-3, epoch, epochs)
        gap8.train_epoch(net, gap8.batches(data.train, 64, gen), opt, torch.device("cpu"), None)
    return net.eval()


def ptq_top1(net, data, bits: int) -> float:  # type: ignore[no-untyped-def]
    """Post-training quantization of the float network at `bits`-wide weights: top-1."""
    from edgesynth.quant.calibrate import tensor_ranges
    from edgesynth.quant.qat_graph import float_graph
    from edgesynth.quant.requant_onnx import quantize_graph
    from edgesynth.quant.requant_shift import PtqOptions

    with torch.no_grad():
        graph, _, _ = float_graph(net.body, net.fx, net.sample_shape(data.input_shape), (0, 1))
    cal = data.train.x[:200].double().numpy()
    ranges = tensor_ranges(graph, cal)
    quantized = quantize_graph(graph, ranges, PtqOptions(weight_bits=bits), "ptq")
    out = simulated(quantized.onnx, data, quantized.tensors["input"].scale)
    return float((out.argmax(1) == data.test.y[EVAL].numpy()).mean())


def simulated(onnx: bytes, data, scale: float) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The integer network's output codes on the evaluation images (edgesynth's simulator)."""
    from edgesynth.frontends.onnx_int import load_integer_onnx
    from edgesynth.sim.graph import run

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "n.onnx").write_bytes(onnx)
        graph = load_integer_onnx(Path(tmp) / "n.onnx").graph
    q = graph.tensors[graph.inputs[0]].qtype
    x = data.test.x[EVAL].double().numpy()
    codes = np.clip(np.floor(x / scale + 0.5), q.lo, q.hi).astype(np.int64)
    return run(graph, codes)[graph.outputs[0]].reshape(len(x), -1)


def qat(model: str, work: Path, bits: int, epochs: int, qat_epochs: int) -> dict:
    name = f"{model.rpartition(':')[2]}-w{bits}"
    policy = work / f"policy{bits}.yaml"
    policy.write_text(f"start_epoch: {epochs - qat_epochs}\nweight_bits: {bits}\n")
    t0 = time.perf_counter()
    r = run_cli(
        "train", "--target", "gap8", "--model-file", model, "--dataset",
        "mnist-test-split", "--data", MNIST, "--epochs", epochs, "--qat-policy", policy,
        "--seed", SEED, "--threads", 1, "--out-dir", work, "--name", name,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    return {"run": work / name, "seconds": time.perf_counter() - t0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--qat-epochs", type=int, default=2)
    parser.add_argument("--bits", type=int, nargs="*", default=[8, 4, 2])
    parser.add_argument("--models", nargs="*", default=["SmallCNN", "ResCNN"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_dataset("mnist-test-split", MNIST)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "cnn.py").write_text(MODEL)
        for name in args.models:
            run_model(f"{work / 'cnn.py'}:{name}", work, data, args)


def run_model(model: str, work: Path, data, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    base = float_network(model, data, args.epochs)
    float_top1 = gap8.top1(base, _eval(data), torch.device("cpu"))
    for bits in args.bits:
        ptq = ptq_top1(base, data, bits)
        res = qat(model, work, bits, args.epochs, args.qat_epochs)
        onnx_path = res["run"] / "again.onnx"
        _, net, _ = gap8.export_gap8(res["run"] / gap8.CHECKPOINT, onnx_path, None, None, False)
        with torch.no_grad():
            codes = net.input(data.test.x[EVAL])
            eight = net.body(codes).numpy()
        onnx = (res["run"] / gap8.ONNX).read_bytes()
        sim = simulated(onnx, data, net.input.qtensor().scale)
        sim_top1 = float((sim.argmax(1) == data.test.y[EVAL].numpy()).mean())
        name = model.rpartition(":")[2]
        print(
            f"{name} w{bits}: float={100 * float_top1:.1f} ptq_int={100 * ptq:.1f}"
            f" qat_int={100 * sim_top1:.1f} int==8bit_mode={np.array_equal(sim, eight)}"
            f" train_s={res['seconds']:.0f}"
        )


def _eval(data):  # type: ignore[no-untyped-def]
    from edgesynth.train.datasets import Split

    return Split(data.test.x[EVAL], data.test.y[EVAL])


if __name__ == "__main__":
    main()
