"""edgesynth's C projects against the vendor's, on the vendor's demo networks and tests.

Runs every command line of a checkout's `gen-demos-max78000.sh` and `gen-demos-max78002.sh`
whose checkpoint the checkout holds (or, with `--tests`, every `tests/test-*.yaml` on both
devices) through both the vendor's `ai8xize.py` and `edgesynth izer`; both must refuse the same
configurations, and for the rest it compares what the two projects do (not how the C is
written):
- cnn.c: every register and memory write statement, in order;
- weights.h, sampledata.h, sampleoutput.h: every `#define NAME {...}` array, by name;
- the functions cnn.c defines.

    python benchmarks/codegen_vendor_demos.py AI8X_SYNTHESIS_DIR [--vendor-python PY]
        [--zoo | --tests | --script scripts/gen_x.sh ...] [--filter TEXT]

`--zoo`: for a checkpoint the checkout lacks, one of the same architecture from edgesynth's
model zoo (random weights), where the zoo has it.

The vendor's tool needs its own requirements (numpy < 2, PyYAML, GitPython, xxhash, ...):
`--vendor-python` names an interpreter that has them; PYTHONPATH is passed on to it only. The
checkout is only read; both projects go to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from placement_vendor_demos import add_selection, selected, with_checkpoint

WRITE = re.compile(r"\*\(\(volatile uint32_t \*\) (0x[0-9a-f]+)\) (=|\|=|&=) (0x[0-9a-f]+)")
FUNCTION = re.compile(r"^(?:\w+ )+\**(\w+)\([^;]*\)\s*$", re.M)


def _text(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def _arrays(text: str | None) -> dict[str, list[int]] | None:
    if text is None:
        return None
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"//.*", "", text), flags=re.S)
    blocks = re.findall(r"#define (\w+) \{(.*?)\}", text, flags=re.S)
    return {
        name: [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\b\d+\b", body)]
        for name, body in blocks
    }


def compare(vendor: Path, ours: Path) -> list[str]:
    """What differs between two project folders (empty: the same)."""
    found = []
    v, o = _text(vendor / "cnn.c"), _text(ours / "cnn.c")
    if v is None or o is None:
        return ["cnn.c missing"]
    if WRITE.findall(v) != WRITE.findall(o):
        found.append("cnn.c writes")
    if set(FUNCTION.findall(v)) - {"main"} != set(FUNCTION.findall(o)) - {"main"}:
        found.append(
            f"cnn.c functions {sorted(set(FUNCTION.findall(v)) ^ set(FUNCTION.findall(o)))}"
        )
    for name in ("weights.h", "sampledata.h", "sampleoutput.h"):
        if _arrays(_text(vendor / name)) != _arrays(_text(ours / name)):
            found.append(name)
    return found


def run_both(root: Path, args: list[str], out: Path, vendor_python: str) -> str:
    """'same', 'DIFFERENT: ...', 'both refuse', or which one refused (with its last line)."""
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    vendor = subprocess.run(
        [vendor_python, "ai8xize.py", *args, "--test-dir", str(out / "v")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    ours = subprocess.run(
        [sys.executable, "-m", "edgesynth", "izer", *args, "--test-dir", str(out / "o")],
        cwd=root,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
    )
    last_vendor = ((vendor.stdout + vendor.stderr).strip().splitlines() or [""])[-1]
    last_ours = (ours.stderr.strip().splitlines() or [""])[-1]
    if vendor.returncode and ours.returncode:
        return f"both refuse (vendor: {last_vendor[:100]} | edgesynth: {last_ours[:160]})"
    if vendor.returncode:
        return f"ONLY THE VENDOR REFUSES: {last_vendor[:200]}"
    if ours.returncode:
        return f"ONLY EDGESYNTH REFUSES: {last_ours[:200]}"
    prefix = args[args.index("--prefix") + 1]
    diff = compare(out / "v" / prefix, out / "o" / prefix)
    return "same" if not diff else "DIFFERENT: " + ", ".join(diff)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_selection(parser)
    parser.add_argument("--vendor-python", default=sys.executable)
    args = parser.parse_args()
    root = args.checkout.resolve()
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number, demo in enumerate(selected(args)):
            name = f"{demo.device} {demo.prefix}"
            out = Path(tmp) / f"{number:03d}" / demo.device  # scripts reuse prefixes
            out.mkdir(parents=True)
            command = with_checkpoint(demo, root, out, args.zoo)
            if command is None:
                print(f"{name}: skipped (the checkout lacks its checkpoint)")
                continue
            if command != demo.args:
                name += " (zoo checkpoint)"
            command += ["--prefix", demo.prefix, "--no-version-check"]
            result = run_both(root, command, out, args.vendor_python)
            key = result.split(" (")[0].split(":")[0]
            counts[key] = counts.get(key, 0) + 1
            print(f"{name}: {result}", flush=True)
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0 if set(counts) <= {"same", "both refuse"} else 1


if __name__ == "__main__":
    sys.exit(main())
