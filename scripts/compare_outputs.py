"""Every command's output, byte for byte, before and after a change.

    .venv/bin/python scripts/compare_outputs.py [--ref main] [--keep DIR]

Checks out REF (default `main`) into a temporary git worktree, then runs a sample of every
command that writes files or prints results (izer on both chips, synth, plan, simulate,
compile for each target, the pulp/gati/xdnn sub-commands, run, quantize, fuse-bn) once with
REF's code and once with the working tree's, each in its own folder, and compares the
folders' files and the commands' standard output byte for byte. Inputs are the corpora in
../shared and a float LeNet made here from a fixed seed. Prints one line per command and
exits 1 when any output differs (the differing files listed).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CASES = SHARED / "corpus" / "cases"
MNIST_CASE = CASES / "MAX78000" / "mnist"


def float_lenet(path: Path) -> None:
    """A float LeNet-style ONNX model with fixed random weights (no training needed: only
    the outputs' sameness matters here)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) or 1
        value = rng.normal(0, 1 / np.sqrt(fan_in), shape).astype(np.float32)
        return numpy_helper.from_array(value, name)

    inits = [
        init("w1", 8, 1, 3, 3),
        init("b1", 8),
        init("w2", 16, 8, 3, 3),
        init("b2", 16),
        init("w3", 10, 16 * 7 * 7),
        init("b3", 10),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "lenet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.save(model, path)


def mnist_images(count: int) -> np.ndarray:
    import gzip

    with gzip.open(SHARED / "data" / "mnist" / "t10k-images-idx3-ubyte.gz") as stream:
        raw = stream.read()
    x = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 1, 28, 28)[:count]
    return ((x.astype(np.float32) / 255.0 - 0.1307) / 0.3081).astype(np.float32)


def unplaced_yaml(path: Path) -> None:
    """The MNIST description without its placement keys (edgesynth places it)."""
    keys = ("processors:", "output_processors:", "out_offset:", "in_offset:")
    text = (MNIST_CASE / "networks" / "mnist-chw-ai85.yaml").read_text()
    kept = [line for line in text.splitlines() if not line.strip().startswith(keys)]
    path.write_text("\n".join(kept) + "\n")


def commands(inputs: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) per command; `{out}` is the command's output folder."""
    onnx_model, cal = str(inputs / "lenet.onnx"), str(inputs / "cal.npy")
    pulp = SHARED / "pulp" / "cases" / "dscnn_test" / "network.onnx"
    yaml = str(MNIST_CASE / "networks" / "mnist-chw-ai85.yaml")
    ckpt = str(MNIST_CASE / "trained" / "ai85-mnist-qat8-q.pth.tar")
    sample = str(MNIST_CASE / "tests" / "sample_mnist.npy")
    izer = [
        "izer",
        "--config-file",
        yaml,
        "--checkpoint-file",
        ckpt,
        "--sample-input",
        sample,
        "--device",
        "MAX78000",
        "--softmax",
        "--test-dir",
        "{out}",
        "--prefix",
        "mnist",
    ]
    run_in = str(inputs / "one.npy")
    m2 = CASES / "MAX78002" / "mnist"
    izer2 = [
        "izer",
        "--config-file",
        str(m2 / "networks" / "mnist-chw-ai85.yaml"),
        "--checkpoint-file",
        str(m2 / "trained" / "ai85-mnist-qat8-q.pth.tar"),
        "--sample-input",
        str(m2 / "tests" / "sample_mnist.npy"),
        "--device",
        "MAX78002",
        "--test-dir",
        "{out}",
        "--prefix",
        "mnist",
    ]
    out = [
        ("izer max78000", izer),
        ("izer max78002", izer2),
        ("synth", ["synth", yaml, ckpt, "--sample-input", sample, "-o", "{out}/p"]),
        ("plan", ["plan", yaml, ckpt, "--sample-input", sample, "-o", "{out}/planned.yaml"]),
        ("simulate", ["simulate", yaml, ckpt, "--sample-input", sample]),
        ("fuse-bn", ["fuse-bn", ckpt, "{out}/fused.pth.tar"]),
        ("pulp compile", ["pulp", "compile", str(pulp), "-o", "{out}/p"]),
        (
            "gati compile",
            ["gati", "compile", onnx_model, "--calibration", cal, "--output", "{out}/p"],
        ),
        (
            "xdnn compile",
            ["xdnn", "compile", onnx_model, "--calibration", cal, "--output", "{out}/p"],
        ),
    ]
    for target in ("max78000", "max78002", "gati", "xdnn"):
        out.append(
            (
                f"compile -t {target}",
                ["compile", onnx_model, "-t", target, "--calibration", cal, "--output", "{out}/p"],
            )
        )
        out.append(
            (
                f"run {target}",
                [
                    "compile",
                    onnx_model,
                    "-t",
                    target,
                    "--calibration",
                    cal,
                    "--output",
                    "{out}/p",
                    "&&",
                    "run",
                    "{out}/p",
                    "--input",
                    run_in,
                    "--output",
                    "{out}/y.npy",
                ],
            )
        )
    out.append(("compile -t gap8", ["compile", str(pulp), "-t", "gap8", "--output", "{out}/p"]))
    for name, description in (("placed", yaml), ("unplaced", str(inputs / "unplaced.yaml"))):
        out.append(
            (
                f"compile {name} YAML",
                [
                    *("compile", description, "--checkpoint", ckpt),
                    *("--sample-input", sample, "-t", "max78000", "--output", "{out}/p"),
                ],
            )
        )
    return out


def run_one(src: Path, argv: list[str], folder: Path) -> str:
    """Run the command(s) with the code in `src`; their stdout and exit status as text."""
    folder.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(src), "EDGESYNTH_NO_PROGRESS": "1"}
    text = ""
    steps: list[list[str]] = [[]]
    for arg in argv:
        steps.append([]) if arg == "&&" else steps[-1].append(arg.replace("{out}", str(folder)))
    for step in steps:
        done = subprocess.run(
            [sys.executable, "-m", "edgesynth", *step],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
        )
        text += done.stdout.replace(str(folder), "{out}") + f"[exit {done.returncode}]\n"
        text += done.stderr.replace(str(folder), "{out}")
    return text


def differing(a: Path, b: Path) -> list[str]:
    """Relative paths whose bytes differ or that exist on one side only."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    names |= {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    return sorted(
        str(n)
        for n in names
        if not ((a / n).is_file() and (b / n).is_file() and filecmp.cmp(a / n, b / n, False))
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", default="main", help="git ref to compare with (default main)")
    parser.add_argument("--keep", type=Path, help="keep the outputs in this folder")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="compare-outputs-"))
    ref_tree = work / "ref-tree"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(ref_tree), args.ref], cwd=ROOT, check=True
    )
    try:
        inputs = work / "inputs"
        inputs.mkdir()
        float_lenet(inputs / "lenet.onnx")
        images = mnist_images(201)
        np.save(inputs / "cal.npy", images[:200])
        np.save(inputs / "one.npy", images[200:])
        unplaced_yaml(inputs / "unplaced.yaml")
        failed = 0
        for index, (name, argv) in enumerate(commands(inputs)):
            sides = {}
            for side, src in (("ref", ref_tree / "src"), ("new", ROOT / "src")):
                folder = work / side / f"{index:02d}"
                sides[side] = (run_one(src, argv, folder), folder)
                folder.with_suffix(".log").write_text(sides[side][0])
            bad = differing(sides["ref"][1], sides["new"][1])
            if sides["ref"][0] != sides["new"][0]:
                bad.insert(0, "(standard output or exit status)")
            failed += bool(bad)
            print(f"{'SAME' if not bad else 'DIFF'}  {name}" + (f": {bad[:6]}" if bad else ""))
        print(f"{failed} of {index + 1} commands differ from {args.ref}")
        return 1 if failed else 0
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(ref_tree)], cwd=ROOT)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
