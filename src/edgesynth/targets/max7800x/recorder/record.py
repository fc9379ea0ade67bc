"""Compile a generated MAX7800x project on this PC with edgesynth's recorder and record its writes.

The project's C (cnn.c, main.c or main_riscv.c, softmax.c) is compiled with the host's C
compiler against the MSDK stand-in headers `edgesynth build` uses (templates/msdk) and linked
with recorder.c, whose address map recorder_map.h is written from regmap.py (mapgen.py). -O0
keeps one store per C assignment, so the trace holds the writes the firmware makes, in order.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import NoReturn

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.firmware import (
    CPU_SOURCES,
    MEMORY,
    project_device,
    write_standins,
)
from edgesynth.targets.max7800x.recorder.mapgen import header

# Vendor projects include these MSDK headers too; each stands in as mxc.h.
EXTRA_HEADERS = (
    "board.h", "bbfc_regs.h", "dma.h", "gpio.h", "icc.h", "led.h", "lp.h", "mxc_delay.h",
    "mxc_sys.h", "nvic_table.h", "pb.h", "tmr.h", "uart.h",
)  # fmt: skip
FLAGS = ["-O0", "-w", "-fno-builtin"]  # -w: the project casts 32-bit addresses to pointers
COMPILER_HINT = "install one: apt-get install gcc (Debian/Ubuntu), dnf install gcc (Fedora)"


def compiler() -> str:
    """The host's C compiler ($CC, else cc or gcc); a clear refusal where there is none."""
    wanted = os.environ.get("CC")
    for name in [wanted] if wanted else ["cc", "gcc"]:
        found = shutil.which(name)
        if found:
            return found
    raise EdgesynthError(
        f"recording a project's writes needs a C compiler ({wanted or 'cc'} not found); "
        + COMPILER_HINT
    )


def check_platform() -> None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise EdgesynthError(
            "edgesynth's recorder runs on Linux x86-64 only (this is "
            f"{platform.system()} {platform.machine()}); record on such a machine and pass "
            "--trace, or give --recorder"
        )


def _stage(project: Path, work: Path) -> list[tuple[Path, list[str]]]:
    """Headers and host copies of the sources: (source, extra flags) to compile."""
    try:
        device = project_device(project)
    except EdgesynthError:
        device = "MAX78000"  # the stand-ins differ only in interrupt numbers and clock
    main = project / "main_riscv.c"
    riscv = main.is_file()
    if not riscv:
        main = project / "main.c"
    include = work / "include"
    write_standins(include, device, riscv)
    for name in EXTRA_HEADERS:
        (include / name).write_text('#include "mxc.h"\n')
    (include / "recorder_map.h").write_text(header(device, MEMORY[device].core_clock))
    # A RISC-V core's wait for interrupt and interrupt attributes mean nothing on the PC.
    main_host = work / "main_host.c"
    text = main.read_text() if main.is_file() else ""
    main_host.write_text(re.sub(r'asm\s+volatile\s*\(\s*"wfi"\s*\)', "(void) 0", text))
    cnn_host = work / "cnn_host.c"
    cnn = (project / "cnn.c").read_text()
    cnn_host.write_text(re.sub(r'__attribute__\s*\(\(\s*interrupt\("machine"\)\s*\)\)', "", cnn))
    recorder = work / "recorder.c"
    recorder.write_text(files(__package__).joinpath("recorder.c").read_text())
    sources = [(cnn_host, []), (main_host, ["-Dmain=project_main"]), (recorder, [])]
    for name in ("softmax.c", *CPU_SOURCES):  # the layers the Cortex-M4 runs, and so on
        if (project / name).is_file():
            sources.append((project / name, []))
    return sources


def build_recorder(project: Path, work: Path) -> Path:
    """The project linked with the recorder, in `work` (the sources compile in parallel)."""
    cc = compiler()
    check_platform()
    include = [f"-I{work / 'include'}", f"-I{project}"]
    jobs = []
    for source, extra in _stage(project, work):
        obj = work / f"{source.stem}.o"
        cmd = [cc, *FLAGS, *include, *extra, "-c", str(source), "-o", str(obj)]
        jobs.append((obj, subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)))
    for _, job in jobs:
        errors = job.communicate()[1]
        if job.returncode != 0:
            _refuse("compiling the project for the recorder", errors, project)
    binary = work / "recorder"
    objects = [str(obj) for obj, _ in jobs]
    done = subprocess.run(
        [cc, "-no-pie", "-o", str(binary), *objects, "-lm"], capture_output=True, text=True
    )
    if done.returncode != 0:
        _refuse("linking the project with the recorder", done.stderr, project)
    return binary


def _refuse(what: str, errors: str, project: Path) -> NoReturn:
    tail = " | ".join(errors.strip().splitlines()[-5:]) or "no message"
    raise EdgesynthError(f"{what} failed: {tail}", file=str(project))


def record_project(project: Path, trace: Path, timeout: float = 600) -> None:
    """Compile `project` with the recorder and write its trace to `trace`."""
    project = Path(project)
    if not (project / "cnn.c").is_file():
        raise EdgesynthError("not a generated project: no cnn.c", file=str(project))
    with tempfile.TemporaryDirectory(prefix="edgesynth-recorder-") as tmp:
        binary = build_recorder(project, Path(tmp))
        try:
            done = subprocess.run(
                [str(binary), str(trace)], capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise EdgesynthError(
                f"the project did not finish within {timeout:.0f} s under the recorder "
                "(a wait on a status the recorder does not complete?)",
                file=str(project),
            ) from None
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-5:]) or f"exit {done.returncode}"
            raise EdgesynthError(
                f"recording the project's writes failed: {tail}", file=str(project)
            )
