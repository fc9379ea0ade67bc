"""gap8 post-training quantization on real MNIST: top-1 agreement with ONNX Runtime.

Trains (or loads from the test cache) the float CNN of tests/pulp/mnist_float.py and the test
suite's LeNet, exports them (torch.onnx; the LeNet as a third-party opset-8 file), calibrates on
200 images, compiles with `edgesynth compile -t gap8` under each quantizer option, and compares
with ONNX Runtime's float top-1 on 1,000 other images through the simulator (`edgesynth run`)
and the generated C built for the host (`edgesynth pulp run`).

    python benchmarks/gap8_ptq_mnist.py [--options "" weights=layer weight_bits=4 ...]

One line per network and option: `<net> <option> sim=<percent> host_c=<percent>
host==sim=<bool> top1=<percent> ort_top1=<percent> compile_s=<s>`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "pulp")]

import mnist_float as mf  # noqa: E402

from cli_helpers import run_cli  # noqa: E402
from mnist_lenet import lenet, third_party_onnx, trained  # noqa: E402

DEFAULT = ["", "activations=percentile", "weights=layer", "weight_bits=4", "output_bits=8"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", nargs="*", default=DEFAULT, help="KEY=VALUE ('' = none)")
    args = parser.parse_args()
    mnist = mf.load_mnist()
    x, y = mnist
    xe, ye = x[mf.EVAL], y[mf.EVAL]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cal = work / "cal.npy"
        np.save(cal, x[mf.CALIBRATION])
        nets = {"cnn": mf.export(mf.model(mnist), work / "cnn.onnx")}
        nets["lenet_opset8"] = work / "lenet_opset8.onnx"
        third_party_onnx(trained("lenet", lenet, mnist), nets["lenet_opset8"])
        for name, path in nets.items():
            ort = mf.ort_logits(path, xe).argmax(1)
            for option in args.options:
                out = work / f"{name}-{option or 'default'}"
                extra = ["--option", option] if option else []
                t0 = time.perf_counter()
                r = run_cli("compile", path, "-t", "gap8", "-c", cal, "-o", out, *extra)
                seconds = time.perf_counter() - t0
                if r.exit_code:
                    print(f"{name} {option or 'default'} refused: {r.stderr.strip()}")
                    continue
                res = mf.agreement(out, xe, ort)
                top1 = mf.agreement(out, xe, ye)["simulator"]
                print(
                    f"{name} {option or 'default'} sim={100 * res['simulator']:.1f}"
                    f" host_c={100 * res['host_c']:.1f}"
                    f" host==sim={res['host_equals_simulator']}"
                    f" top1={100 * top1:.1f} ort_top1={100 * (ort == ye).mean():.1f}"
                    f" compile_s={seconds:.1f}"
                )


if __name__ == "__main__":
    main()
