"""Gati target on MNIST: top-1 agreement with ONNX Runtime, accuracy, speed, estimated cycles.

Trains the test suite's MNIST CNNs (LeNet-style, VGG-style with batchnorm, PyTorch-example
shape) on the first 8,000 images of the MNIST test set, exports each with torch.onnx,
compiles it for Gati with --calibration on 300 training images, runs the functional model on
the held-out images and compares it with ONNX Runtime and with edgesynth's integer reference.

    python benchmarks/gati_mnist.py [--images 2000] [--epochs 4]

One line per network: `<net> agree=<percent> gati_top1=<percent> ort_top1=<percent>
exact=<bool> compile_s=<s> run_img_per_s=<n> cycles=<estimated cycles per image>`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "gati"))

import gati_mnist_models as mm  # noqa: E402

from edgesynth.targets.gati.host import host_contract, run_program  # noqa: E402
from edgesynth.targets.gati.plan import compile_onnx  # noqa: E402
from edgesynth.targets.gati.quantize import quantize_input  # noqa: E402
from edgesynth.targets.gati.reference import reference_forward  # noqa: E402
from edgesynth.targets.gati.report import build_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000, help="held-out images (<= 2000)")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    x, y = mm.load_mnist()
    held_x, held_y = x[mm.N_TRAIN :][: args.images], y[mm.N_TRAIN :][: args.images]
    calib = x[:300]
    nets = {"lenet": mm.lenet, "vgg": mm.vgg, "example": mm.example_net}
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in nets.items():
            model = mm.train(build(), x[: mm.N_TRAIN], y[: mm.N_TRAIN], args.epochs, batch=64)
            path = mm.export(model, Path(tmp) / f"{name}.onnx", 13, True, fold=name != "vgg")
            t0 = time.perf_counter()
            prog = compile_onnx(path, calib)
            t1 = time.perf_counter()
            host = host_contract(prog)
            out, ints = run_program(prog.stream, host, held_x)
            t2 = time.perf_counter()
            ref = reference_forward(prog.model, quantize_input(held_x, host["input"]["scale"]))
            ort = mm.ort_run(path, held_x)
            cycles = build_report(prog)["total_cycles"]
            print(
                f"{name} agree={100 * (out.argmax(1) == ort.argmax(1)).mean():.2f}"
                f" gati_top1={100 * (out.argmax(1) == held_y).mean():.2f}"
                f" ort_top1={100 * (ort.argmax(1) == held_y).mean():.2f}"
                f" exact={np.array_equal(ints[len(prog.layers) - 1], ref)}"
                f" compile_s={t1 - t0:.2f} run_img_per_s={len(held_x) / (t2 - t1):.0f}"
                f" cycles={cycles}",
                flush=True,
            )


if __name__ == "__main__":
    main()
