"""`edgesynth demo`: the whole flow on the built-in default, end to end.

1. train the MNIST-style `ai85net5` on scikit-learn's bundled digits, with quantization-aware
   training, and quantize it (`edgesynth train`);
2. synthesize the quantized checkpoint with the YAML description training wrote, through the
   vendor-compatible front end (`edgesynth izer`): device rules + known-answer output;
3. run the same sample through the training-side model in 8-bit mode (`edgesynth evaluate`)
   and prove the two agree value for value.

`--synthetic` instead synthesizes the bundled example network (package data:
edgesynth/examples/demo/network.yaml) with generated weights (no PyTorch needed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.device import device_name

EXAMPLE = Path(__file__).resolve().parent / "examples" / "demo"  # package data
WEIGHT_SHAPES = [(16, 1, 3, 3), (32, 16, 3, 3), (32, 32, 3, 3), (10, 32)]


@contextlib.contextmanager
def _working_directory(folder: Path) -> Iterator[None]:
    """The vendor resolves `tests/...` against the working directory."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def _run(argv: list[str]) -> None:
    """One step, as `edgesynth ARGV` would run it; its errors propagate (printed once)."""
    from edgesynth.cli import run

    status = run(argv)
    if status != 0:
        raise EdgesynthError(f"demo step `edgesynth {argv[0]}` failed (exit status {status}).")


def _izer_verbosity(verbose: bool) -> list[str]:
    """`--verbose` adds the vendor's per-layer table and register dump (about 250 lines)."""
    return ["--verbose"] if verbose else []


def run_trained_demo(folder: Path, device: str = "MAX78000", verbose: bool = False) -> Path:
    """Train, synthesize and compare inside `folder` (the staging folder of --out); returns
    the known answer's path relative to it."""
    folder = folder.resolve()
    # Every step runs inside the (staging) folder with relative paths, so what the steps
    # print names the files as they will be once the folder is in place.
    with _working_directory(folder):
        print("== 1/3 train + QAT + quantize on the built-in digits ==", flush=True)
        _run([
            "train", "--dataset", "digits", "--device", device, "--deterministic", "--seed", "1",
            "--out-dir", ".", "--name", "run", "--simulate", "297", "--save-sample", "0",
            "--no-progress",
        ])  # fmt: skip
    run = folder / "run"
    yaml = next(run.glob("*.yaml"))
    checkpoint = next(run.glob("*-q.pth.tar"))
    sample = next(run.glob("sample_*.npy"))

    with _working_directory(run):
        print("== 2/3 synthesize: device rules + known-answer output ==", flush=True)
        _run([
            "izer", "--device", device, "--config-file", yaml.name,
            "--checkpoint-file", checkpoint.name, "--sample-input", sample.name,
            "--test-dir", ".", "--prefix", "kat", "--sample-numpy-filename", "output",
            "--softmax", *_izer_verbosity(verbose),
        ])  # fmt: skip
        print("== 3/3 the same sample through the 8-bit training model ==", flush=True)
        _run([
            "evaluate", "--device", device, "--checkpoint", checkpoint.name,
            "--sample-input", sample.name, "--8-bit", "--output", "evaluate.npy",
        ])  # fmt: skip
    import numpy as np

    kat = run / "kat" / "output.npy"
    synthesized, trained = np.load(kat), np.load(run / "evaluate.npy")
    if not np.array_equal(synthesized, trained):
        raise EdgesynthError(
            "the synthesizer's known answer (run/kat/output.npy) differs from the 8-bit "
            "model's output."
        )
    print(
        "Known answer run/kat/output.npy equals the 8-bit training model's output value for "
        f"value (class {int(synthesized.reshape(-1).argmax())})."
    )
    return Path("run") / "kat" / "output.npy"


def write_synthetic_inputs(folder: Path, seed: int = 0) -> None:
    """The files the vendor flow expects for `arch: test`, under `folder`."""
    if not EXAMPLE.is_dir():
        raise EdgesynthError(f"the example network is missing: {EXAMPLE}")
    import numpy as np

    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(EXAMPLE / "network.yaml", tests / "demo.yaml")
    shutil.copyfile(EXAMPLE / "sample_digit7.npy", tests / "sample_demo.npy")
    rng = np.random.default_rng(seed)
    with open(tests / "weights_demo.npy", "wb") as handle:
        for shape in WEIGHT_SHAPES:
            np.save(handle, rng.integers(-128, 128, size=shape, dtype=np.int64))


def run_synthetic_demo(folder: Path, device: str = "MAX78000", verbose: bool = False) -> Path:
    """Synthesize the bundled example network with generated weights inside `folder`; returns
    the known answer's path relative to it."""
    folder = folder.resolve()
    write_synthetic_inputs(folder)
    with _working_directory(folder):
        _run([
            "izer", "--device", device, "--config-file", "tests/demo.yaml",
            "--test-dir", ".", "--prefix", "kat", "--sample-numpy-filename", "output",
            *_izer_verbosity(verbose),
        ])  # fmt: skip
    return Path("kat") / "output.npy"


def demo(args: argparse.Namespace) -> int:
    """Every step runs in the staging folder of --out; the files move into place at the end,
    so a failed or interrupted demo leaves --out as it was."""
    from edgesynth.outputs import output_folder

    folder = output_folder(args.out, overwrite=args.overwrite, option="--out")
    with folder as out:
        step = run_synthetic_demo if args.synthetic else run_trained_demo
        written = folder.path / step(out.staging, args.device, args.verbose)
    print(f"Demo finished: known-answer output in {written}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="train, quantize, synthesize and prove the built-in example end to end",
        description="Train ai85net5 on scikit-learn's digits with quantization-aware training, "
        "quantize it, synthesize it for the device and prove the known answer equals the "
        "8-bit training model's output (--synthetic: the bundled example network with generated "
        "weights).",
    )
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="folder for the demo's files")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the demo's files in a non-empty --out folder (nothing else)",
    )
    p.add_argument("--device", type=device_name, default="MAX78000", help="MAX78000 or MAX78002")
    p.add_argument(
        "--synthetic",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="synthesize the bundled example network with generated weights instead (no PyTorch)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also print the synthesizer's per-layer configuration and register dump",
    )
    p.set_defaults(handler=demo)
