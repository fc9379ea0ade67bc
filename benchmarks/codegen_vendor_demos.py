"""edgesynth's C projects against the vendor's, on the vendor's demo networks.

Runs every command line of a checkout's `gen-demos-max78000.sh` and `gen-demos-max78002.sh`
whose checkpoint the checkout holds through both the vendor's `ai8xize.py` and `edgesynth
izer`, and compares what the two projects do (not how the C is written):
- cnn.c: every register and memory write statement, in order;
- weights.h, sampledata.h, sampleoutput.h: every `#define NAME {...}` array, by name;
- the functions cnn.c defines.

    python benchmarks/codegen_vendor_demos.py AI8X_SYNTHESIS_DIR [--vendor-python PY]
        [--zoo] [--filter TEXT]

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
from placement_vendor_demos import demos, zoo_checkpoint

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--vendor-python", default=sys.executable)
    parser.add_argument("--filter", default="")
    parser.add_argument("--zoo", action="store_true", help="zoo checkpoints for missing ones")
    args = parser.parse_args()
    root = args.checkout.resolve()
    same = compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        for demo in demos(root):
            name = f"{demo.device} {demo.prefix}"
            if args.filter not in name:
                continue
            out = Path(tmp) / demo.device / demo.prefix
            common = [*demo.args, "--prefix", demo.prefix, "--no-version-check"]
            at = common.index("--checkpoint-file") + 1
            if not (root / common[at]).is_file() or (root / common[at]).stat().st_size < 1024:
                out.mkdir(parents=True)
                substitute = zoo_checkpoint(demo.prefix, demo.device, out) if args.zoo else None
                if substitute is None:
                    print(f"{name}: skipped (the checkout lacks {common[at]})")
                    continue
                common[at], name = str(substitute), f"{name} (zoo checkpoint)"
            env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
            vendor = subprocess.run(
                [args.vendor_python, "ai8xize.py", *common, "--test-dir", str(out / "v")],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
            )
            ours = subprocess.run(
                [sys.executable, "-m", "edgesynth", "izer", *common, "--test-dir", str(out / "o")],
                cwd=root,
                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                capture_output=True,
                text=True,
            )
            if ours.returncode:
                print(f"{name}: edgesynth failed: {ours.stderr.strip().splitlines()[-1:]}")
                continue
            if not (out / "v" / demo.prefix / "cnn.c").exists():
                print(f"{name}: the vendor's tool failed: {vendor.stderr.strip()[-200:]}")
                continue
            compared += 1
            diff = compare(out / "v" / demo.prefix, out / "o" / demo.prefix)
            same += not diff
            print(f"{name}: {'same' if not diff else 'DIFFERENT: ' + ', '.join(diff)}", flush=True)
    print(f"{same} of {compared} projects do the same")
    return 0 if same == compared else 1


if __name__ == "__main__":
    sys.exit(main())
