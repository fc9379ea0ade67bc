"""Build the generated C and run it: the host build with the system C compiler, or a freestanding
RV32IMC program (Debian's gcc-riscv64-unknown-elf) run under qemu-riscv32 (Debian's qemu-user).
The program reads the L3 image and the inputs on stdin and writes every layer's output and the
per-layer checksums on stdout (see main.c); this module speaks that protocol."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.pulp.emit import RV32_FLAGS, WEIGHTS
from edgesynth.targets.pulp.lower import Storage
from edgesynth.targets.pulp.packing import from_hwc, pack, to_hwc, unpack
from edgesynth.wording import plural

LAYOUT = "layout.json"
SOURCES = ("network.c", "es_kernels.c", "es_hal_host.c", "main.c")
WARNINGS = ("-std=c99", "-Wall", "-Wextra", "-Werror")
HARNESS = ("-DES_TRACE_ACC",)  # the harness can also write each layer's accumulators
TOOLCHAINS = {
    "host": {"cc": "gcc", "io": "es_io_stdio.c", "flags": [], "libs": [], "run": []},
    "rv32": {
        "cc": "riscv64-unknown-elf-gcc",
        "io": "es_io_rv32.c",
        "flags": RV32_FLAGS.split(),
        "libs": ["-lgcc"],
        "run": ["qemu-riscv32"],
    },
}
DEBIAN_PACKAGES = {
    "gcc": "gcc",
    "riscv64-unknown-elf-gcc": "gcc-riscv64-unknown-elf",
    "qemu-riscv32": "qemu-user",
}


@dataclass
class RunResult:
    outputs: list[list[np.ndarray]]  # per sample, per layer: the output, per-sample shape (C,H,W)
    checksums: list[list[int]]  # per sample, per layer: the C program's checksum
    layout: dict[str, Any]
    accumulators: list[dict[str, np.ndarray]]  # per sample: accumulator tensor -> (C, H, W)


def read_layout(folder: Path) -> dict[str, Any]:
    path = Path(folder) / LAYOUT
    try:
        layout = json.loads(path.read_text())
    except FileNotFoundError:
        raise EdgesynthError(
            f"{folder} is not a compiled gap8 program (no {LAYOUT}); make one with "
            "`edgesynth pulp compile NET.onnx -o DIR`"
        ) from None
    if layout.get("format") != "edgesynth-pulp-layout/1":
        raise EdgesynthError(f"{path}: not an edgesynth gap8 layout")
    return layout


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        package = DEBIAN_PACKAGES.get(name, name)
        raise EdgesynthError(f"`{name}` is not installed; on Debian: apt-get install {package}")
    return path


class Build:
    """A build under way: every source compiled by its own compiler process at once (the host's
    cores work in parallel), linked by `wait`."""

    def __init__(self, folder: Path, toolchain: str, opt: str, binary: Path) -> None:
        import tempfile

        self.spec = TOOLCHAINS[toolchain]
        self.folder, self.binary = Path(folder), Path(binary)
        self.cc = _tool(self.spec["cc"])
        self.flags = [*WARNINGS, *HARNESS, opt, *self.spec["flags"]]
        self._objects = tempfile.TemporaryDirectory(prefix="edgesynth-build-")
        sources = [*SOURCES, self.spec["io"]]
        self.objects = [Path(self._objects.name) / f"{Path(s).stem}.o" for s in sources]
        self.jobs = [
            subprocess.Popen(
                [self.cc, *self.flags, "-c", "-o", str(obj), str(self.folder / src)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for src, obj in zip(sources, self.objects, strict=True)
        ]

    def wait(self) -> Path:
        """The linked executable; EdgesynthError with the compiler's messages if it failed."""
        try:
            errors = [job.communicate()[1] for job in self.jobs]
            failed = [e.strip() for e, job in zip(errors, self.jobs, strict=True) if job.returncode]
            if not failed:
                cmd = [self.cc, *self.flags, "-o", str(self.binary), *map(str, self.objects)]
                done = subprocess.run([*cmd, *self.spec["libs"]], capture_output=True, text=True)
                failed = [done.stderr.strip()] if done.returncode else []
            if failed:
                raise EdgesynthError(
                    f"{self.spec['cc']} failed on {self.folder}:\n" + "\n".join(failed)
                )
            return self.binary
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stop the compilers still running (Ctrl-C, an error) and remove the objects."""
        for job in self.jobs:
            if job.poll() is None:
                job.kill()
                job.wait()
        self._objects.cleanup()


def start_build(
    folder: Path, toolchain: str = "host", opt: str = "-O2", binary: Path | None = None
) -> Build:
    """Start compiling the program in `folder` with warnings as errors (the executable goes to
    `binary`, by default network_TOOLCHAIN in `folder`); `.wait()` links it."""
    return Build(folder, toolchain, opt, binary or Path(folder) / f"network_{toolchain}")


def build(folder: Path, toolchain: str = "host", opt: str = "-O2") -> Path:
    """Compile the program in `folder` with warnings as errors; return the executable."""
    return start_build(folder, toolchain, opt).wait()


def stdin_bytes(
    folder: Path, layout: dict[str, Any], inputs: list[np.ndarray], trace: bool = False
) -> bytes:
    """The program's input: header, L3 image, each sample's inputs packed in HWC order."""
    weights = (Path(folder) / WEIGHTS).read_bytes()
    if len(weights) != layout["weights_bytes"]:
        raise EdgesynthError(
            f"{folder / WEIGHTS} has {len(weights)} bytes, expected {layout['weights_bytes']}"
        )
    specs = layout["inputs"]
    if len(inputs) != len(specs):
        raise EdgesynthError(f"the network takes {plural(len(specs), 'input')}, got {len(inputs)}")
    samples = inputs[0].shape[0]
    parts = [b"ESIT" if trace else b"ESIN", struct.pack("<I", samples), weights]
    for s in range(samples):
        for spec, batch in zip(specs, inputs, strict=True):
            storage = Storage(spec["bits"], spec["signed"])
            x = np.asarray(batch[s])
            if int(np.prod(x.shape)) != int(np.prod(spec["shape_chw"])):
                raise EdgesynthError(
                    f"input {spec['tensor']}: a sample has shape {x.shape}, expected "
                    f"{tuple(spec['shape_chw'])} (C, H, W)"
                )
            x = x.reshape(spec["shape_chw"])
            try:
                parts.append(pack(to_hwc(x), storage))
            except ValueError as err:
                raise EdgesynthError(f"input {spec['tensor']}: {err}") from None
    return b"".join(parts)


def execute(
    folder: Path,
    inputs: list[np.ndarray],
    toolchain: str = "host",
    binary: Path | None = None,
    timeout: float = 600.0,
    accumulators: bool = False,
) -> RunResult:
    """Run the built program on a batch (one (N, C, H, W) array per input)."""
    folder = Path(folder)
    layout = read_layout(folder)
    binary = binary or folder / f"network_{toolchain}"
    if not binary.is_file():
        binary = build(folder, toolchain)
    runner = [_tool(t) for t in TOOLCHAINS[toolchain]["run"]]
    data = stdin_bytes(folder, layout, inputs, accumulators)
    done = subprocess.run([*runner, str(binary)], input=data, capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise EdgesynthError(
            f"{binary.name} exited with status {done.returncode}: {done.stderr.decode()[:500]}"
        )
    out = memoryview(done.stdout)
    layers = layout["layers"]

    def acc_count(entry: dict[str, Any]) -> int:
        return int(np.prod(entry["shape_chw"])) if accumulators and entry.get("acc_tensor") else 0

    per_sample = sum(entry["bytes"] + 8 * acc_count(entry) for entry in layers) + 4 * len(layers)
    samples = inputs[0].shape[0]
    if len(out) != samples * per_sample:
        raise EdgesynthError(
            f"{binary.name} wrote {len(out)} bytes, expected {samples * per_sample}"
        )
    outputs, sums, accs = [], [], []
    at = 0
    for _ in range(samples):
        values = []
        traced: dict[str, np.ndarray] = {}
        for entry in layers:
            storage = Storage(entry["bits"], entry["signed"])
            count = int(np.prod(entry["shape_chw"]))
            shape = tuple(entry["shape_chw"])
            raw = out[at : at + entry["bytes"]]
            values.append(from_hwc(unpack(raw, storage, count), shape))
            at += entry["bytes"]
            if acc_count(entry):
                acc = np.frombuffer(out[at : at + 8 * count], dtype="<i8").astype(np.int64)
                traced[entry["acc_tensor"]] = from_hwc(acc, shape)
                at += 8 * count
        accs.append(traced)
        checks = list(struct.unpack(f"<{len(layers)}I", out[at : at + 4 * len(layers)]))
        at += 4 * len(layers)
        outputs.append(values)
        sums.append(checks)
    return RunResult(outputs, sums, layout, accs)
