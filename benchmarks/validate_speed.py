"""How long `edgesynth validate` takes: the third-party ONNX LeNet of tests/mnist_lenet.py
(trained on the first 8,000 t10k images, cached) on 1,000 held-out MNIST images, for each
target, without and with --per-layer. The time is the whole command in one process, model
reading, quantization and compilation included (Python's start and imports excluded).

    python benchmarks/validate_speed.py [--images 1000] [--targets max78000,gati,xdnn]

One line per run: `<target> per_layer=<bool> images=<n> seconds=<wall s> cpu_seconds=<s>
agreement=<percent>` (on a shared machine the CPU seconds say more than the wall clock).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from edgesynth.cli import main as edgesynth  # noqa: E402
from mnist_lenet import EVAL, lenet, load_mnist, third_party_onnx, trained  # noqa: E402


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one in-process `edgesynth` run."""
    start, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        status = edgesynth(argv)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if status != 0:
        raise SystemExit(f"edgesynth {' '.join(argv)} exited {status}")
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000, help="held-out images (<= 1000)")
    parser.add_argument("--targets", default="max78000,gati,xdnn")
    args = parser.parse_args()
    x, y = load_mnist()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        third_party_onnx(trained("lenet", lenet, (x, y)), root / "lenet.onnx", opset=11)
        np.save(root / "calibration.npy", x[:300])
        np.save(root / "x.npy", x[EVAL][: args.images])
        np.save(root / "y.npy", y[EVAL][: args.images])
        timed(["targets"])  # the command modules' imports, once
        for target in args.targets.split(","):
            for per_layer in (False, True):
                report = root / f"{target}-{per_layer}.json"
                argv = [
                    "validate", str(root / "lenet.onnx"), "-t", target,
                    "-c", str(root / "calibration.npy"), "-d", str(root / "x.npy"),
                    "--labels", str(root / "y.npy"), "--json", str(report),
                ] + (["--per-layer"] if per_layer else [])  # fmt: skip
                seconds, cpu = timed(argv)
                agreement = json.loads(report.read_text())["outputs"][0]["top1_agreement"]
                print(
                    f"{target} per_layer={per_layer} images={args.images} "
                    f"seconds={seconds:.2f} cpu_seconds={cpu:.2f} "
                    f"agreement={100 * agreement:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
