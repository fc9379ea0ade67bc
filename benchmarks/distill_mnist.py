"""Distillation on MNIST: a small student trained alone against the same student distilled.

The network and the loader are benchmarks/byo_network's (`MyNet`, the MNIST t10k IDX files in
--data, the first 8,000 images to train, the last 2,000 to test). The teacher is `MyNet` width
16 on all 8,000 training images (given with --teacher, or trained first: six epochs, QAT in the
last two, as in docs/training.md; with --teacher-limit N, on the first N images with the
students' schedule, so that it knows no more images than they do). Each student is `MyNet` of
--width on the first --train-limit images, with the same seed, epochs, learning rate and QAT
policy for both runs; the distilled one adds the teacher at --temperature with the
distillation/student weights (and the T^2 factor unless --no-t2). Every run goes through the
`edgesynth train` command line.

Two 8-bit test top-1 figures per run: the last QAT epoch's checkpoint, quantized and evaluated
in 8-bit mode (nothing chosen on the test images), and the one `edgesynth train` prints (its
best QAT epoch, chosen on the test images).

    python benchmarks/distill_mnist.py --data ../shared/data/mnist [--teacher CK]
        [--seeds 1,2,3,4,5] [--width 8] [--train-limit 500] [--epochs 40]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "byo_network"
MODEL = f"{HERE / 'my_models.py'}:MyNet"
DATA = f"{HERE / 'my_data.py'}:make_datasets"
TEACHER_WIDTH = 16


def edgesynth(args: list[str], log: Path) -> str:
    """Run `edgesynth ARGS`, keep its output in LOG, return it (exit on failure)."""
    cmd = [sys.executable, "-m", "edgesynth", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}), see {log}: {' '.join(cmd)}")
    return done.stdout


def top1(pattern: str, text: str) -> float:
    found = re.findall(pattern + r"\s*([0-9.]+)%", text)
    if not found:
        sys.exit(f"no `{pattern}` in the output")
    return float(found[-1])


def train(opts: argparse.Namespace, name: str, width: int, extra: list[str]) -> str:
    args = ["train", "--model-file", MODEL, "--model-args", json.dumps({"width": width})]
    args += ["--dataset-file", DATA, "--data", str(opts.data), "--deterministic"]
    args += ["--no-progress", "--threads", str(opts.threads), "--out-dir", str(opts.out_dir)]
    return edgesynth([*args, "--name", name, *extra], opts.out_dir / f"{name}.log")


def last_epoch_8bit(opts: argparse.Namespace, name: str, width: int) -> float:
    run = opts.out_dir / name
    quantized = run / "qat_last-q.pth.tar"
    edgesynth(["quantize", str(run / "qat_checkpoint.pth.tar"), str(quantized)], run / "q.log")
    args = ["train", "--evaluate", "-8", "--checkpoint", str(quantized), "--model-file", MODEL]
    args += ["--model-args", json.dumps({"width": width}), "--dataset-file", DATA]
    args += ["--data", str(opts.data), "--threads", str(opts.threads)]
    return top1(r"8-bit\): top1", edgesynth(args, run / "eval.log"))


def teacher(opts: argparse.Namespace) -> Path:
    if opts.teacher is not None:
        return opts.teacher
    extra = ["--epochs", "6", "--batch-size", "64", "--lr", "3e-3", "--seed", "1"]
    images = "all 8000 images"
    if opts.teacher_limit is not None:  # the student's images and schedule
        extra = ["--train-limit", str(opts.teacher_limit), "--epochs", str(opts.epochs)]
        extra += ["--batch-size", str(opts.batch_size), "--lr", str(opts.lr), "--seed", "1"]
        images = f"the first {opts.teacher_limit} images"
    out = train(opts, "teacher", TEACHER_WIDTH, extra)
    got = top1("8-bit \\(quantized\\) test top1", out)
    print(f"teacher: MyNet width 16 on {images}, 8-bit test top1 {got:.2f}%", flush=True)
    return opts.out_dir / "teacher" / "qat_best.pth.tar"


def student(opts: argparse.Namespace, seed: int, kd: list[str]) -> tuple[float, float]:
    name = f"w{opts.width}-n{opts.train_limit}-s{seed}-{'kd' if kd else 'alone'}"
    extra = ["--train-limit", str(opts.train_limit), "--epochs", str(opts.epochs)]
    extra += ["--batch-size", str(opts.batch_size), "--lr", str(opts.lr), "--seed", str(seed)]
    out = train(opts, name, opts.width, extra + kd)
    return last_epoch_8bit(opts, name, opts.width), top1("8-bit \\(quantized\\) test top1", out)


def kd_args(opts: argparse.Namespace, checkpoint: Path) -> list[str]:
    args = ["--teacher", str(checkpoint), "--teacher-model-file", MODEL]
    args += ["--teacher-model-args", json.dumps({"width": TEACHER_WIDTH})]
    args += ["--kd-temperature", str(opts.temperature)]
    args += ["--kd-distill-weight", str(opts.distill_weight)]
    args += ["--kd-student-weight", str(opts.student_weight)]
    return args + ([] if opts.no_t2 else ["--kd-t2"])


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="folder with the t10k IDX files")
    p.add_argument("--teacher", type=Path, help="a MyNet width 16 checkpoint (default: train one)")
    p.add_argument(
        "--teacher-limit",
        type=int,
        help="train the teacher on the first N images with the students' schedule instead",
    )
    p.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated (1,2,3,4,5)")
    p.add_argument("--width", type=int, default=8, help="the student's width (8)")
    p.add_argument("--train-limit", type=int, default=500, help="the student's images (500)")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--distill-weight", type=float, default=0.7)
    p.add_argument("--student-weight", type=float, default=0.3)
    p.add_argument("--no-t2", action="store_true", help="the vendor's loss (no T^2 factor)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-dir", type=Path, help="keep the runs here (default: a new temp folder)")
    opts = p.parse_args()
    opts.out_dir = opts.out_dir or Path(tempfile.mkdtemp(prefix="distill-mnist-"))
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    return opts


def main() -> None:
    opts = parse()
    started = time.time()
    kd = kd_args(opts, teacher(opts))
    t2 = "" if opts.no_t2 else " x T^2"
    print(f"student MyNet width {opts.width}, {opts.train_limit} images, {opts.epochs} epochs")
    print(f"distilled: T {opts.temperature:g}, {opts.distill_weight:g} KL{t2} + ", end="")
    print(f"{opts.student_weight:g} CE; runs in {opts.out_dir}")
    print("| seed | alone, last | distilled, last | gain | alone, best | distilled, best |")
    print("| --- | --- | --- | --- | --- | --- |")
    alones, taughts = [], []
    for seed in (int(s) for s in opts.seeds.split(",")):
        alone, alone_best = student(opts, seed, [])
        taught, taught_best = student(opts, seed, kd)
        alones.append(alone)
        taughts.append(taught)
        print(
            f"| {seed} | {alone:.2f}% | {taught:.2f}% | {taught - alone:+.2f} | "
            f"{alone_best:.2f}% | {taught_best:.2f}% |",
            flush=True,
        )
    mean_alone, mean_taught = statistics.mean(alones), statistics.mean(taughts)
    better = sum(t > a for a, t in zip(alones, taughts, strict=True))
    summary = f"alone {mean_alone:.2f}%, distilled {mean_taught:.2f}%"
    summary += f", gain {mean_taught - mean_alone:+.2f} points"
    summary += f", better in {better} of {len(alones)} seeds"
    print(f"mean (last epoch, 8-bit): {summary}; {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
