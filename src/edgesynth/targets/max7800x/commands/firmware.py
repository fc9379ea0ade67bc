"""`edgesynth build`: compile a generated project for the chip with Debian's cross compilers.

The project is compiled against edgesynth's own small stand-in for the MSDK names it uses
(headers, a Cortex-M4 startup and a linker script from the public memory map; see
templates/msdk), with -Wall -Wextra -Werror. The Arm program is linked into
PROJECT/build/<name>.elf and its size is reported against the device's flash and SRAM; the
RISC-V program (--riscv projects) is compiled for rv32imc. The compilers come from Debian:
gcc-arm-none-eabi + libnewlib-arm-none-eabi, gcc-riscv64-unknown-elf + picolibc-riscv64-unknown-elf.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from edgesynth.errors import EdgesynthError

ARM_CC = "arm-none-eabi-gcc"
ARM_SIZE = "arm-none-eabi-size"
RISCV_CC = "riscv64-unknown-elf-gcc"
RISCV_SIZE = "riscv64-unknown-elf-size"
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=softfp", "-mfpu=fpv4-sp-d16"]
RISCV_FLAGS = ["-march=rv32imc", "-mabi=ilp32"]
WARNINGS = ["-Wall", "-Wextra", "-Werror"]
COMMON = ["-Os", "-std=gnu11", "-ffunction-sections", "-fdata-sections"]


@dataclass(frozen=True)
class MemoryMap:
    flash_origin: int
    flash_length: int
    sram_origin: int
    sram_length: int
    riscv_sram_origin: int
    core_clock: int
    cnn_irq: int
    riscv_irq: int
    irq_count: int


MEMORY = {
    "MAX78000": MemoryMap(
        0x10000000, 0x80000, 0x20000000, 0x20000, 0x2001C000, 100_000_000, 63, 67, 104
    ),
    "MAX78002": MemoryMap(
        0x10000000, 0x280000, 0x20000000, 0x60000, 0x2005C000, 120_000_000, 63, 67, 128
    ),
}


@dataclass
class SizeReport:
    text: int
    data: int
    bss: int
    flash: int  # capacity
    sram: int  # capacity

    @property
    def flash_used(self) -> int:
        return self.text + self.data

    @property
    def sram_used(self) -> int:
        return self.data + self.bss

    def lines(self, label: str) -> list[str]:
        def pct(a: int, b: int) -> str:
            return f"{100 * a / b:5.1f}%" if b else "  n/a"

        return [
            f"{label}: text {self.text:,}  data {self.data:,}  bss {self.bss:,} bytes",
            f"  flash {self.flash_used:,} / {self.flash:,} ({pct(self.flash_used, self.flash)})",
            f"  SRAM  {self.sram_used:,} / {self.sram:,} ({pct(self.sram_used, self.sram)})",
        ]


@dataclass
class BuildResult:
    elf: Path
    arm: SizeReport
    riscv: SizeReport | None = None
    riscv_objects: list[Path] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"ELF: {self.elf}", *self.arm.lines("Cortex-M4")]
        if self.riscv is not None:
            lines += self.riscv.lines("RISC-V (compiled objects)")
        return "\n".join(lines)


# The sources of a split network's Cortex-M4 part, and of the accelerator program after it
CPU_SOURCES = ("cpu_part.c", "segment2.c", "segment2_input.c", "cnn_segment2.c")


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EdgesynthError(
            f"`{name}` is not installed; install it with `apt-get install {package}`."
        )
    return path


def _run(cmd: list[str], what: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise EdgesynthError(f"{what} failed:\n{done.stderr.strip()[-4000:]}")
    return done.stdout


def project_device(project: Path) -> str:
    makefile = project / "Makefile"
    if makefile.exists():
        m = re.search(r"^TARGET \?= (MAX7800[02])", makefile.read_text(), re.M)
        if m:
            return m.group(1)
    cnn = project / "cnn.c"
    if cnn.exists():
        m = re.search(r"\((MAX7800[02])\)", cnn.read_text()[:2000])
        if m:
            return m.group(1)
    raise EdgesynthError(
        f"{project} does not look like a generated MAX7800x project (no Makefile with TARGET, "
        "no cnn.c); pass --device.",
        file=str(project),
    )


def write_standins(out: Path, device: str, riscv: bool) -> None:
    """The MSDK stand-in headers, startup code and linker script, rendered into `out`."""
    from edgesynth.targets.max7800x.emit.project import render

    mem = MEMORY[device]
    ctx = {
        "device": device,
        "riscv": riscv,
        "core_clock": mem.core_clock,
        "cnn_irq": mem.cnn_irq,
        "riscv_irq": mem.riscv_irq,
        "irq_count": mem.irq_count,
        "flash_origin": mem.flash_origin,
        "flash_length": mem.flash_length,
        "sram_origin": mem.sram_origin,
        "sram_length": (mem.riscv_sram_origin - mem.sram_origin) if riscv else mem.sram_length,
    }
    out.mkdir(parents=True, exist_ok=True)
    for name in (
        "mxc.h",
        "gcfr_regs.h",
        "fcr_regs.h",
        "sema_regs.h",
        "startup.c",
        "riscv.c",
        "cortex-m4.ld",
    ):
        (out / name).write_text(render(f"msdk/{name}.j2", **ctx))


def _size(tool: str, files: list[Path]) -> tuple[int, int, int]:
    text = data = bss = 0
    out = _run([tool, "-B", *map(str, files)], "size")
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit():
            text += int(parts[0])
            data += int(parts[1])
            bss += int(parts[2])
    return text, data, bss


def build_project(
    project: Path, device: str | None = None, riscv: bool | None = None
) -> BuildResult:
    project = Path(project)
    if not (project / "cnn.c").exists() and not any(project.glob("*.c")):
        raise EdgesynthError(f"{project} holds no generated C project.", file=str(project))
    device = device or project_device(project)
    if device not in MEMORY:
        raise EdgesynthError(f"unknown device `{device}`; choose MAX78000 or MAX78002.")
    if riscv is None:
        riscv = (project / "main_riscv.c").exists()
    arm_cc = _tool(ARM_CC, "gcc-arm-none-eabi libnewlib-arm-none-eabi")
    build = project / "build"
    standins = build / "msdk"
    write_standins(standins, device, riscv)
    includes = [f"-I{standins}", f"-I{project}"]
    name = project.resolve().name

    arm_sources = [project / "main.c", standins / "startup.c"]
    if not riscv:
        arm_sources += [project / "cnn.c", project / "softmax.c"]
        for extra in CPU_SOURCES:  # the layers the Cortex-M4 runs (and a second program)
            if (project / extra).exists():
                arm_sources.append(project / extra)
        if not (project / "cnn.c").exists():  # compile --cpu-only: no accelerator layers
            arm_sources.remove(project / "cnn.c")
    elf = build / f"{name}.elf"
    mem = MEMORY[device]
    sram = (mem.riscv_sram_origin - mem.sram_origin) if riscv else mem.sram_length
    # One compiler run compiles and links every source (-Werror stops at the first warning).
    done = subprocess.run(
        [
            arm_cc,
            *ARM_FLAGS,
            *COMMON,
            *WARNINGS,
            *includes,
            "--specs=nano.specs",
            "-nostartfiles",
            "-Wl,--gc-sections",
            f"-Wl,-Map={build / (name + '.map')}",
            "-T",
            str(standins / "cortex-m4.ld"),
            *map(str, arm_sources),
            "-o",
            str(elf),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        overflow = re.search(r"region `(\w+)' overflowed by (\d+) bytes", done.stderr)
        if overflow:
            region, by = overflow.group(1), int(overflow.group(2))
            capacity = mem.flash_length if region == "FLASH" else sram
            hint = (
                "the kernels, the sample input and the known answer live in flash (weights.h, "
                "sampledata.h, sampleoutput.h): drop the known-answer check (--no-kat) or use a "
                "smaller network."
                if region == "FLASH"
                else "the output buffer of cnn_unload() (CNN_NUM_OUTPUTS values) lives in SRAM: "
                "unload part of the output yourself, or generate without it (--no-unload)."
            )
            raise EdgesynthError(
                f"the program does not fit: {region.lower()} overflows by {by:,} bytes "
                f"(the {device} has {capacity:,}); {hint}",
                file=str(project),
            )
        raise EdgesynthError(
            f"building {elf.name} for the Cortex-M4 failed:\n{done.stderr.strip()[-4000:]}"
        )
    text, data, bss = _size(_tool(ARM_SIZE, "binutils-arm-none-eabi"), [elf])
    result = BuildResult(elf=elf, arm=SizeReport(text, data, bss, mem.flash_length, sram))

    if riscv:
        rv_cc = _tool(RISCV_CC, "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf")
        rv_build = build / "riscv"
        rv_build.mkdir(parents=True, exist_ok=True)
        sources = [
            project / "main_riscv.c",
            project / "cnn.c",
            project / "softmax.c",
            standins / "riscv.c",
        ]
        if (project / "cpu_part.c").exists():  # the layers after the accelerator's
            sources.insert(3, project / "cpu_part.c")
        done = subprocess.run(
            [
                rv_cc,
                *RISCV_FLAGS,
                "--specs=picolibc.specs",
                *COMMON,
                *WARNINGS,
                *[f"-I{Path(i[2:]).resolve()}" for i in includes],
                "-c",
                *[str(src.resolve()) for src in sources],
            ],
            capture_output=True,
            text=True,
            cwd=rv_build,
        )
        if done.returncode != 0:
            raise EdgesynthError(
                f"compiling for the RISC-V core failed:\n{done.stderr.strip()[-4000:]}"
            )
        result.riscv_objects = [rv_build / (src.stem + ".o") for src in sources]
        text, data, bss = _size(
            _tool(RISCV_SIZE, "binutils-riscv64-unknown-elf"), result.riscv_objects
        )
        result.riscv = SizeReport(
            text,
            data,
            bss,
            mem.flash_length,
            mem.sram_origin + mem.sram_length - mem.riscv_sram_origin,
        )
    return result
