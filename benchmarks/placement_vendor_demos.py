"""Automatic placement on the vendor's demo networks, from a checkout of ai8x-synthesis.

The corpus in ../shared holds five of the vendor's demo networks; its `gen-demos-max78000.sh` and
`gen-demos-max78002.sh` name the rest (UNets, SSD detectors, FaceID, CIFAR-100, ...). For every
command line there whose checkpoint the checkout holds (or `--zoo`: a checkpoint of the same
architecture from edgesynth's model zoo, random weights, for the ones it lacks), this
- synthesizes the network with the vendor's hand placement and runs its writes on the virtual
  device (known answer, no hazard);
- removes `processors`, `output_processors`, `in_offset`, `out_offset` (and `output_map`) from
  every layer, lets edgesynth place it, and requires the same known-answer output as the hand
  placement, the project's writes on the virtual device reproducing it with no hazard, and
  reports both latency estimates (MAX78000).

    python benchmarks/placement_vendor_demos.py AI8X_SYNTHESIS_DIR [--zoo | --tests |
        --script scripts/gen_x.sh ...] [--filter TEXT]

`--tests`: the checkout's `tests/test-*.yaml` (synthetic weights) on both devices instead.

The checkout is only read: the stripped YAMLs, zoo checkpoints and projects go to a temporary
folder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# demo prefix -> (zoo model, classes, input shape) for checkpoints a checkout may lack
ZOO = {
    "cifar-100-mixed": ("ai85simplenet", 100, (3, 32, 32)),
    "cifar-100-residual": ("ai85ressimplenet", 100, (3, 32, 32)),
    "faceid": ("ai85faceidnet", 512, (3, 160, 120)),
}


@dataclass
class Demo:
    device: str
    prefix: str
    args: list[str]  # the izer arguments, without --test-dir/--prefix


def demos(root: Path, scripts: list[Path] | None = None) -> list[Demo]:
    """The command lines of the checkout's `gen-demos-*.sh` (or of `scripts`, such as its
    `scripts/gen_*.sh`), each script's device from its DEVICE= line."""
    paths = scripts or [root / f"gen-demos-{d.lower()}.sh" for d in ("MAX78000", "MAX78002")]
    result = []
    for script in paths:
        text = script.read_text()
        found = re.search(r'^DEVICE="?(\w+)"?', text, flags=re.M)
        if found is None:
            continue
        device = found.group(1)
        for line in text.splitlines():
            if not line.startswith("python ai8xize.py"):
                continue
            line = line.split(" #")[0].replace('"$@"', "")
            line = line.replace("$COMMON_ARGS", f"--device {device} --timer 0")
            words = shlex.split(line.replace("$TARGET", "x").replace("$DEVICE", device))[2:]
            prefix = words[words.index("--prefix") + 1]
            for option in ("--test-dir", "--prefix"):
                at = words.index(option)
                del words[at : at + 2]
            result.append(Demo(device, prefix, words))
    return result


def zoo_checkpoint(prefix: str, device: str, folder: Path) -> Path | None:
    """A quantized checkpoint of the demo's architecture with random weights."""
    if prefix not in ZOO:
        return None
    import torch

    import edgesynth.nn as enn
    from edgesynth.nn.qat import QatPolicy, enable_qat
    from edgesynth.quant.checkpoint import model_state, write_checkpoint
    from edgesynth.quant.files import quantize_file
    from edgesynth.quant.ptq import QuantizeOptions
    from edgesynth.train.models import create_model

    name, classes, shape = ZOO[prefix]
    torch.manual_seed(0)
    with enn.use(device):
        model = create_model(name, num_classes=classes, num_channels=shape[0], dimensions=shape[1:])
    enable_qat(model, QatPolicy(start_epoch=0, weight_bits=8))
    with enn.use(device, simulate=False):
        model(torch.randn(2, *shape) * 0.3)  # the QAT statistics
    float_file = write_checkpoint(
        folder / f"{name}-{device}.pth.tar", arch=name, state_dict=model_state(model)
    )
    quantized = folder / f"{name}-{device}-q.pth.tar"
    quantize_file(float_file, quantized, QuantizeOptions())
    return quantized


def vendor_tests(root: Path) -> list[Demo]:
    """Every tests/test-*.yaml of the checkout on both devices, with the vendor's defaults
    (plus --fifo for the FIFO and streaming tests, which need it)."""
    result = []
    for path in sorted((root / "tests").glob("test-*.yaml")):
        extra = ["--fifo"] if "fifo" in path.stem or "stream" in path.stem else []
        for device in ("MAX78000", "MAX78002"):
            args = ["--device", device, "--config-file", f"tests/{path.name}", *extra]
            result.append(Demo(device, path.stem, args))
    return result


def with_checkpoint(demo: Demo, root: Path, folder: Path, zoo: bool) -> list[str] | None:
    """The demo's arguments; for a checkpoint the checkout lacks, a zoo checkpoint of the same
    architecture written to `folder` (with `zoo`), else None."""
    args = list(demo.args)
    if "--checkpoint-file" not in args:
        return args
    at = args.index("--checkpoint-file") + 1
    if (root / args[at]).is_file() and (root / args[at]).stat().st_size >= 1024:
        return args  # (smaller: a Git LFS pointer, not the checkpoint)
    substitute = zoo_checkpoint(demo.prefix, demo.device, folder) if zoo else None
    if substitute is None:
        return None
    args[at] = str(substitute)
    return args


def add_selection(parser: argparse.ArgumentParser) -> None:
    """The options that choose which of the checkout's command lines run."""
    parser.add_argument("checkout", type=Path, help="a checkout of ai8x-synthesis")
    parser.add_argument("--zoo", action="store_true", help="zoo checkpoints for missing ones")
    parser.add_argument("--filter", default="", help="only cases whose prefix contains TEXT")
    parser.add_argument(
        "--tests", action="store_true", help="the checkout's tests/test-*.yaml instead of demos"
    )
    parser.add_argument(
        "--script", type=Path, action="append", default=[], help="another gen-*.sh to run"
    )


def selected(o: argparse.Namespace) -> list[Demo]:
    root = o.checkout.resolve()
    cases = vendor_tests(root) if o.tests else demos(root, [root / p for p in o.script] or None)
    return [c for c in cases if o.filter in c.prefix]


def synthesize(args: list[str], folder: Path):  # type: ignore[no-untyped-def]
    from edgesynth.targets.max7800x.commands.izer import plan_izer

    with contextlib.redirect_stdout(io.StringIO()):
        return plan_izer([*args, "--test-dir", str(folder), "--prefix", "p"])


def stripped(args: list[str], root: Path, folder: Path) -> list[str]:
    from edgesynth.targets.max7800x.placement.yamltext import without_placement

    args = list(args)
    at = args.index("--config-file") + 1
    path = folder / "stripped.yaml"
    path.write_text(without_placement((root / args[at]).read_text()))
    args[at] = str(path)
    return args


def proven(plan, device: str, expected: np.ndarray) -> str | None:  # type: ignore[no-untyped-def]
    """None when the plan's writes reproduce `expected` on the virtual device with no hazard."""
    from edgesynth.targets.max7800x.placement.verify import device_check

    check = device_check(plan, device)
    if not check.kat_ok:
        return "known answer differs: " + "; ".join(check.details[:2])
    if check.hazards:
        return "hazard: " + check.hazards[0]
    if not np.array_equal(check.output, expected):
        return "output read back differs"
    return None


def run_demo(demo: Demo, root: Path, zoo: bool) -> str:
    from edgesynth.errors import EdgesynthError, MultipleErrors
    from edgesynth.targets.max7800x.placement import Unplaceable

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        args = with_checkpoint(demo, root, folder, zoo)
        if args is None:
            return f"{demo.device} {demo.prefix}: skipped (checkpoint not in the checkout)"
        name = demo.prefix + (" (zoo checkpoint)" if args != demo.args else "")
        started = time.perf_counter()
        try:
            hand, hand_plan = synthesize(args, folder / "hand")
        except (EdgesynthError, MultipleErrors) as err:
            return f"{demo.device} {name}: hand placement refused: {err}"
        hand_check = proven(hand_plan, demo.device, hand.output)
        hand_note = "" if hand_check is None else f" (hand placement: {hand_check})"
        try:
            auto, auto_plan = synthesize(stripped(args, root, folder), folder / "auto")
        except Unplaceable as err:
            return f"{demo.device} {name}: refused: {err.message}"
        except (EdgesynthError, MultipleErrors) as err:
            return f"{demo.device} {name}: not placed: {err}"
        seconds = time.perf_counter() - started
        if not np.array_equal(auto.output, hand.output):
            return f"{demo.device} {name}: FAILED: the known answer differs from the hand one"
        why = proven(auto_plan, demo.device, hand.output)
        if why:
            return f"{demo.device} {name}: FAILED on the virtual device: {why}{hand_note}"
        latency = ""
        if hand_plan.latency and auto_plan.latency:
            h, a = hand_plan.latency.total, auto_plan.latency.total
            latency = f"; latency {a:,} cycles (hand {h:,}, ratio {a / h:.4f})"
        return f"{demo.device} {name}: placed and proven{latency}; {seconds:.1f} s{hand_note}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_selection(parser)
    o = parser.parse_args()
    root = o.checkout.resolve()
    os.chdir(root)  # the vendor's relative paths (networks/, trained/, tests/)
    lines = []
    for case in selected(o):
        lines.append(run_demo(case, root, o.zoo))
        print(lines[-1], flush=True)
    placed = sum("placed and proven" in line for line in lines)
    tried = sum("skipped" not in line and "hand placement refused" not in line for line in lines)
    print(f"placed and proven: {placed} of {tried} demo networks")
    return 0 if all("FAILED" not in line for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
