"""The vendor's `ai8xize.py` command line, accepted unchanged by `edgesynth izer`.

Every option of the vendor's synthesizer is declared once, in `OPTIONS`, with the same option
strings (aliases included), arity, value type and default as the vendor's parser. Each option is
tagged with what it affects (`Effect`):

- ``"sim"``: changes the simulated known-answer numbers (device, input, weights, layer range...).
- ``"rules"``: changes what is legal (a configuration is accepted or refused), not the numbers.
- ``"codegen"``: only changes the generated C / RTL-simulation files or the vendor's log output.
- ``"run"``: how the tool runs and reports (console verbosity, version checks, where the results
  go). These are honoured without code generation, so they are never reported as "no effect".

`parse_izer_args` parses an argument list and returns a frozen `IzerOptions` built by
`IzerOptions.from_parsed`, which reads the values as the vendor does (list/hex values, implied
options, device-dependent defaults). The core never sees it: `izer.core_options` maps it once
into the typed `options.Max7800xOptions`.
Usage errors (unknown option, missing or bad value, conflicting options) raise `UsageError`
(exit status 2, like the vendor's argparse) naming the option, the allowed values and the
closest option for a typo. `--help` prints the help text and exits with status 0, like the
vendor tool.

`option_rule_errors` reports the vendor's checks that depend only on the options and the device
(e.g. `--fast-fifo` requires `--riscv`); checks that need the network are done elsewhere.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Literal, NoReturn

from edgesynth.errors import EdgesynthError, UsageError, did_you_mean
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.assemble_options import ALL_LAYERS_NO_BIAS
from edgesynth.targets.max7800x.device import Device, get_device

Effect = Literal["sim", "rules", "codegen", "run"]
EFFECTS: tuple[Effect, ...] = ("sim", "rules", "codegen", "run")


# ------------------------------------------------------------------------------------------------
# Value types. Each raises ArgumentTypeError with a message that names the allowed values.


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got `{text}`") from None


def _auto_int(text: str) -> int:
    """An integer in any base Python accepts with a prefix (`0x2000`, `8192`, `0o17`)."""
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer (decimal, or hexadecimal with 0x), got `{text}`"
        ) from None


def _int_choice(*allowed: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        value = _int(text)
        if value not in allowed:
            choices = ", ".join(str(a) for a in allowed)
            raise argparse.ArgumentTypeError(f"`{text}` is not allowed; choose one of {choices}")
        return value

    return convert


def _int_range(low: int, high: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"`{text}` is out of range; use {low} to {high}")
        return value

    return convert


_DEVICE_NUMBERS = {85: "MAX78000", 78000: "MAX78000", 87: "MAX78002", 78002: "MAX78002"}
_DEVICE_SPELLINGS = ("MAX78000", "MAX78002", "AI85", "AI87", "85", "87", "78000", "78002")


def _device(text: str) -> str:
    """A device as the vendor takes it: part number or die type, case-insensitive.

    `MAX78000`, `AI85`, `85` and `78000` all mean MAX78000; `MAX78002`, `AI87`, `87`, `78002`
    mean MAX78002. Returns the part number.
    """
    s = text.strip().lower()
    if s == "cmsis-nn":
        raise argparse.ArgumentTypeError(
            "the CMSIS-NN software target is not supported by edgesynth; "
            "choose MAX78000 or MAX78002"
        )
    if s.startswith("max"):
        s = s[3:]
    elif s.startswith("ai"):
        s = s[2:]
    try:
        name = _DEVICE_NUMBERS.get(int(s))
    except ValueError:
        name = None
    if name is None:
        hint = did_you_mean(text.upper(), _DEVICE_SPELLINGS)
        raise argparse.ArgumentTypeError(
            f"unknown device `{text}`; choose MAX78000 or MAX78002 "
            f"(also accepted: AI85, AI87, 85, 87).{hint}"
        )
    return name


_TYPE_VALUES: dict[Any, str] = {
    str: "a value",
    _int: "an integer",
    _auto_int: "an integer (decimal, or hexadecimal with 0x)",
}


# ------------------------------------------------------------------------------------------------
# The option table.


@dataclass(frozen=True)
class Opt:
    """One vendor option: its spellings, arity, type, default, and what it affects."""

    flags: tuple[str, ...]
    effect: Effect
    help: str
    dest: str
    nargs: int | str | None  # 0: a flag; None: one value; "?": an optional value
    const: Any = None  # the value a flag (or a value-less "?") stores
    default: Any = None
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    required: bool = False
    mutex: str | None = None  # options with the same id are mutually exclusive
    values: str | None = None  # what a value may be, for error messages
    section: str = ""


def _dest(flags: Sequence[str], dest: str | None) -> str:
    if dest:
        return dest
    long = next((f for f in flags if f.startswith("--")), flags[0])
    return long.lstrip("-").replace("-", "_")


def _flag(
    *flags: str,
    effect: Effect,
    help: str,
    dest: str | None = None,
    value: Any = True,
    default: Any = False,
    mutex: str | None = None,
) -> Opt:
    return Opt(flags, effect, help, _dest(flags, dest), 0, value, default, mutex=mutex)


def _value(
    *flags: str,
    effect: Effect,
    help: str,
    type: Callable[[str], Any] = str,
    default: Any = None,
    metavar: str = "S",
    dest: str | None = None,
    required: bool = False,
    mutex: str | None = None,
    values: str | None = None,
) -> Opt:
    values = values or _TYPE_VALUES.get(type, "a value")
    return Opt(
        flags,
        effect,
        help,
        _dest(flags, dest),
        None,
        None,
        default,
        type,
        metavar,
        required,
        mutex,
        values,
    )


_OPT_FIELDS = tuple(f.name for f in fields(Opt))
assert _OPT_FIELDS[-1] == "section"


def _section(title: str, *opts: Opt) -> tuple[Opt, ...]:
    """`opts` in section `title` (made with every field by position, the cheapest way to make
    the 175 options every run loads)."""
    return tuple(Opt(*(getattr(o, f) for f in _OPT_FIELDS[:-1]), title) for o in opts)


_N = "N"
_REQUIRED_MUTEX = {"device"}

# fmt: off
OPTIONS: tuple[Opt, ...] = (
    *_section(
        "Device selection",
        _flag("--ai85", effect="sim", help="target the MAX78000", dest="device",
              value="MAX78000", default=None, mutex="device"),
        _value("--device", effect="sim", help="target device: MAX78000 or MAX78002",
               type=_device, metavar="device-name", mutex="device",
               values="MAX78000 or MAX78002 (also AI85, AI87, 85, 87)"),
    ),
    *_section(
        "Hardware features",
        _flag("--avg-pool-rounding", effect="sim", help="round average-pooling results"),
        _flag("--simple1b", effect="codegen", help="1-bit weights multiply by XOR"),
    ),
    *_section(
        "Embedded code",
        _flag("-e", "--embedded-code", effect="codegen", help="generate embedded C (default)",
              default=True, mutex="target"),
        _flag("--rtl", "--rtl-sim", effect="codegen", help="generate an RTL simulation instead",
              dest="embedded_code", value=False, default=True, mutex="target"),
        _flag("--rtl-preload", effect="codegen", help="RTL simulation with preloaded memories",
              mutex="target"),
        _flag("--rtl-preload-weights", effect="codegen",
              help="RTL simulation with preloaded weight memories"),
        _flag("--pipeline", effect="rules", help="use the pipeline (default where supported)",
              default=None, mutex="pipeline"),
        _flag("--no-pipeline", effect="rules", help="do not use the pipeline", dest="pipeline",
              value=False, default=True, mutex="pipeline"),
        _flag("--pll", effect="rules", help="clock the CNN from the PLL (default: automatic)",
              default=None, mutex="pll"),
        _flag("--no-pll", "--apb", effect="rules", help="do not use the PLL", dest="pll",
              value=False, default=True, mutex="pll"),
        _flag("--balance-speed", effect="codegen",
              help="balance load speed against power (default)", default=True, mutex="speed"),
        _flag("--max-speed", effect="rules", help="load data and weights as fast as possible",
              dest="balance_speed", value=False, default=True, mutex="speed"),
        _value("--clock-divider", effect="codegen", help="CNN clock divider: 1, 2, 4, 8 or 16",
               type=_int_choice(1, 2, 4, 8, 16), metavar=_N, mutex="speed",
               values="1, 2, 4, 8 or 16"),
        _value("--config-file", effect="sim", help="YAML network description", required=True),
        _value("--checkpoint-file", effect="sim", help="quantized checkpoint (.pth.tar)"),
        _value("--board-name", effect="codegen", help="target board (default: EvKit_V1)",
               default="EvKit_V1"),
        _flag("--display-checkpoint", effect="codegen", help="print the parsed checkpoint"),
        _flag("--no-warn-zero", effect="run", help="no warning for all-zero layer outputs"),
        _value("--prefix", effect="run", help="name of the output folder inside --test-dir",
               required=True),
        _value("--debugwait", effect="codegen", help="seconds to wait before sleeping (default: 2)",
               type=_int, default=2, metavar=_N),
        _value("--define", effect="codegen", help="extra preprocessor defines, space-separated",
               default=""),
        _value("--define-default-arm", effect="codegen", help="default Arm defines",
               default="MXC_ASSERT_ENABLE ARM_MATH_CM4"),
        _value("--define-default-riscv", effect="codegen", help="default RISC-V defines",
               default="MXC_ASSERT_ENABLE RV32"),
        _value("--eclipse-includes", effect="codegen", help="extra Eclipse include paths",
               default=""),
        _value("--eclipse-variables", effect="codegen", help="extra Eclipse variables",
               default=""),
        _value("--eclipse-openocd-args", effect="codegen", help="OpenOCD arguments for Eclipse",
               default="-f interface/cmsis-dap.cfg -f target/##__TARGET_LC__##.cfg"),
    ),
    *_section(
        "Code generation",
        _flag("--overwrite", effect="run", help="write into an existing output folder"),
        _flag("--compact-data", effect="codegen", help="load input with memcpy() (default)",
              default=True, mutex="compact_data"),
        _flag("--no-compact-data", effect="codegen", help="load input with inline code",
              dest="compact_data", value=False, default=True, mutex="compact_data"),
        _flag("--compact-weights", effect="codegen", help="load weights with memcpy()"),
        _flag("--mexpress", effect="codegen", help="express kernel loading (default)",
              default=None, mutex="mexpress"),
        _flag("--no-mexpress", effect="codegen", help="no express kernel loading",
              dest="mexpress", value=False, default=True, mutex="mexpress"),
        _flag("--mlator", effect="codegen", help="unload output through the byte swapper"),
        _value("--unroll-mlator", effect="codegen", help="mlator reads per loop (default: 8)",
               type=_int, default=8, metavar=_N),
        _value("--unroll-8bit", effect="codegen", help="8-bit reads per loop (default: 1)",
               type=_int, default=1, metavar=_N),
        _value("--unroll-wide", effect="codegen", help="32-bit reads per loop (default: 8)",
               type=_int, default=8, metavar=_N),
        _flag("--softmax", effect="codegen", help="add a software softmax"),
        _flag("--unload", effect="codegen", help="generate cnn_unload() (default)", default=None,
              mutex="unload"),
        _flag("--no-unload", effect="codegen", help="do not generate cnn_unload()", dest="unload",
              value=False, default=True, mutex="unload"),
        _flag("--no-kat", effect="codegen", help="do not generate the known-answer check",
              dest="generate_kat", value=False, default=True),
        _value("--boost", effect="codegen", help="port.pin to drive during inference, e.g. 2.5",
               values="a port.pin such as 2.5"),
        _value("--start-layer", effect="sim", help="first layer to run (default: 0)", type=_int,
               default=0, metavar=_N),
        _flag("--no-wfi", effect="codegen", help="busy-wait instead of sleeping", dest="wfi",
              value=False, default=True),
        _value("--timer", effect="codegen", help="time the inference with this timer",
               type=_int, metavar=_N),
        _flag("--no-timer", effect="codegen", help="ignore --timer"),
        _flag("--energy", effect="codegen", help="add energy-measurement instrumentation"),
        _value("--switch-delay", effect="codegen", help="ms to wait after cnn_enable()",
               dest="enable_delay", type=_int, metavar=_N),
        _value("--output-width", effect="sim", help="final layer output width: 8 or 32",
               type=_int_choice(8, 32), metavar="{8,32}", values="8 or 32"),
        _flag("--no-deduplicate-weights", effect="codegen", help="do not share equal weights"),
    ),
    *_section(
        "File names",
        _value("--c-filename", effect="codegen", help="main C file base name (main or test)"),
        _value("--api-filename", effect="codegen", help="C library file (default: cnn.c)",
               default="cnn.c"),
        _value("--weight-filename", effect="codegen", help="weight header (default: weights.h)",
               default="weights.h"),
        _value("--sample-filename", effect="codegen",
               help="sample input header (default: sampledata.h)", default="sampledata.h"),
        _value("--sample-input", effect="sim",
               help="sample input .npy (default: tests/sample_<dataset>.npy)"),
        _value("--sample-output-filename", effect="codegen",
               help="expected-output header (default: sampleoutput.h)", dest="result_filename"),
        _value("--sample-numpy-filename", effect="run",
               help="also save the expected output as .npy", dest="result_numpy"),
    ),
    *_section(
        "Streaming and FIFOs",
        _flag("--fifo", effect="rules", help="load streaming input through the FIFOs"),
        _flag("--fast-fifo", effect="rules", help="use the fast FIFO (implies --fifo)"),
        _flag("--fast-fifo-quad", effect="rules",
              help="fast FIFO in quad fan-out mode (implies --fast-fifo)"),
        _flag("--no-fifo-wait", effect="codegen", help="do not wait for FIFO space",
              dest="fifo_wait", value=False, default=True),
        _flag("--fifo-go", effect="rules", help="start before the first FIFO push"),
        _value("--slow-load", effect="codegen", help="slow down FIFO loads (default: 0)",
               type=_int, default=0, metavar=_N),
        _flag("--debug-new-streaming", effect="codegen", help="modified streaming equation",
              default=True),
    ),
    *_section(
        "RISC-V",
        _flag("--riscv", effect="codegen", help="run the CNN code on the RISC-V core"),
        _flag("--riscv-flash", effect="codegen", help="RISC-V code in flash (implies --riscv)",
              default=None, mutex="riscv_flash"),
        _flag("--no-riscv-flash", effect="codegen", help="RISC-V code not in flash",
              dest="riscv_flash", value=False, default=True, mutex="riscv_flash"),
        _flag("--riscv-cache", effect="codegen",
              help="RISC-V cache (implies --riscv, --riscv-flash)", default=None,
              mutex="riscv_cache"),
        _flag("--no-riscv-cache", effect="codegen", help="no RISC-V cache", dest="riscv_cache",
              value=False, default=True, mutex="riscv_cache"),
        _flag("--riscv-debug", effect="codegen", help="RISC-V debug interface (implies --riscv)"),
        _flag("--riscv-exclusive", effect="codegen",
              help="exclusive SRAM for RISC-V (implies --riscv)"),
    ),
    *_section(
        "Debug and logging",
        _flag("-v", "--verbose", effect="run", help="verbose output"),
        _flag("-L", "--log", effect="codegen", help="write the log file (default)", default=None),
        _flag("--no-log", effect="codegen", help="do not write the log file", dest="log",
              value=False, default=True),
        _flag("--no-progress", effect="run", help="no progress bars", dest="display_progress",
              value=False, default=True),
        _flag("--log-intermediate", effect="codegen", help="log data between layers to .mem"),
        _flag("--log-pooling", effect="codegen", help="log pooling data as CSV"),
        _flag("--short-log", "--log-last-only", "--verbose-all", effect="codegen",
              help="log output layers only", dest="verbose_all", value=False, default=True),
        _value("--log-filename", effect="codegen", help="log file (default: log.txt)",
               default="log.txt"),
        _flag("-D", "--debug", effect="codegen", help="debug output"),
        _flag("--debug-computation", effect="codegen", help="debug the computation (slow)"),
        _flag("--debug-latency", effect="codegen", help="debug latency calculations"),
        _flag("--no-error-stop", effect="rules", help="continue after errors"),
        _value("--stop-after", effect="sim", help="last layer to run", type=_int, metavar=_N),
        _value("--skip-checkpoint-layers", effect="sim",
               help="skip the first N checkpoint layers", type=_int, default=0, metavar=_N),
        _value("--skip-yaml-layers", effect="sim", help="skip the first N YAML layers",
               type=_int, default=0, metavar=_N),
        _flag("--stop-start", effect="codegen", help="stop and restart the accelerator"),
        _flag("--one-shot", effect="rules", help="run layer by layer (one-shot)"),
        _value("--repeat-layers", effect="rules", help="repeat the layers N times (default: 1)",
               type=_int, default=1, metavar=_N),
        _value("--clock-trim", effect="codegen", help="IBRO,ISO,IPO trims (hex; 0 = keep)",
               metavar="LIST", values="three comma-separated integers, e.g. 0x173,0x5e,0x14"),
        _flag("--fixed-input", effect="codegen", help="use alternating 0xaa/0x55 input"),
        _flag("--reshape-inputs", effect="sim", help="drop input channels to match the weights"),
        _flag("--forever", effect="codegen", help="repeat the inference forever"),
        _flag("--link-layer", effect="rules", help="always use the link-layer feature"),
        _flag("--read-ahead", effect="rules", help="set read-ahead in every layer",
              dest="rd_ahead"),
        _flag("--calcx4", effect="rules", help="set calcx4 in every layer"),
        _flag("--ext-rdy", effect="codegen", help="set the ext_rdy bit"),
        _value("--weight-start", effect="rules", help="first kernel memory word for weights",
               type=_int, default=0, metavar=_N),
        _flag("--ignore-bias-groups", effect="rules", help="allow bias in inactive groups"),
        _value("--kernel-format", effect="codegen", help="print format for kernels",
               default="{0:4}"),
        _flag("--debug-snoop", effect="codegen", help="add snoop-register debug code"),
        _flag("--snoop-loop", effect="codegen", help="add a snoop loop"),
        _flag("--ignore-hw-limits", effect="rules", help="ignore some hardware limits"),
        _flag("--ignore-bn", effect="sim", help="ignore BatchNorm in the checkpoint"),
        _flag("--ignore-activation", effect="sim", help="ignore the YAML activations"),
        _flag("--ignore-energy-warning", effect="codegen", help="no energy hints"),
        _flag("--ignore-mlator-warning", effect="codegen", help="no mlator hints"),
        # Older vendor releases had this option; it is still accepted.
        _flag("--no-greedy-kernel", effect="codegen", help="no greedy kernel allocation (legacy)",
              dest="greedy_kernel_allocator", value=False, default=True),
        _flag("--new-kernel-loader", effect="codegen", help="new kernel loader (default)",
              default=True, mutex="kernel_loader"),
        _flag("--old-kernel-loader", effect="codegen", help="old kernel loader",
              dest="new_kernel_loader", value=False, default=None, mutex="kernel_loader"),
        _value("--weight-input", effect="sim", help="synthetic weights .npy (development)"),
        _value("--bias-input", effect="sim", help="synthetic bias .npy (development)"),
    ),
    *_section(
        "RTL simulation",
        _value("--input-csv", effect="codegen", help="camera input .csv for the RTL simulation"),
        _value("--input-csv-format", effect="sim", help="camera pixel format: 555, 565 or 888",
               type=_int_choice(555, 565, 888), default=888, metavar=_N,
               values="555, 565 or 888"),
        _value("--input-csv-retrace", effect="codegen", help="camera retrace delay (default: 5)",
               type=_int, default=5, metavar=_N),
        _value("--input-csv-period", effect="codegen", help="camera data period (default: 80)",
               type=_int, default=80, metavar=_N),
        _value("--input-pix-clk", effect="codegen", help="camera pixel clock (default: 9)",
               type=_int, default=9, metavar=_N),
        _flag("--input-sync", effect="codegen", help="synchronous camera input"),
        _flag("--input-fifo", effect="codegen", help="buffer input in a software FIFO"),
        _value("--autogen", effect="codegen", help="folder for the autogen list",
               default="None"),
        _value("--autogen_list", effect="codegen", help="autogen list file name",
               default="autogen_list"),
        _value("--input-filename", effect="codegen", help="input .mem base name",
               default="input"),
        _value("--output-filename", effect="codegen", help="output .mem/.csv base name",
               default="output"),
        _value("--output-config-filename", effect="codegen", help="config .csv base name",
               default="config"),
        _value("--output-data-filename", effect="codegen", help="data .npy base name",
               default="data"),
        _value("--output-weights-filename", effect="codegen", help="weights .npy base name",
               default="weights"),
        _value("--output-bias-filename", effect="codegen", help="bias .npy base name",
               default="bias"),
        _value("--output-pass-filename", effect="codegen", help="pass data base name"),
        _value("--runtest-filename", effect="codegen", help="run-test file name",
               default="run_test.sv"),
        _flag("--legacy-test", effect="sim", help="old RTL simulation compatibility"),
        _flag("--legacy-kernels", effect="codegen", help="old kernel allocation"),
        _value("--test-dir", effect="run", help="base folder for the output", required=True),
        _value("--top-level", effect="codegen", help="top-level name (None: block level)",
               default="cnn"),
        _value("--queue-name", effect="codegen", help="simulation queue name"),
        _value("--timeout", effect="codegen", help="RTL simulation timeout (ms)", type=_int,
               metavar=_N),
        _flag("--result-output", effect="codegen", help="expected output in memory dumps"),
    ),
    *_section(
        "Streaming tweaks",
        _flag("--overlap-data", effect="rules", help="allow output to overwrite input",
              dest="overwrite_ok"),
        _value("--override-start", effect="codegen", help="streaming start value",
               type=_auto_int, metavar=_N),
        _value("--increase-start", effect="codegen", help="add to the streaming start value",
               type=_auto_int, default=2, metavar=_N),
        _value("--override-rollover", effect="codegen", help="streaming rollover value",
               type=_auto_int, metavar=_N),
        _value("--override-delta1", effect="codegen", help="streaming delta1 value",
               type=_auto_int, metavar=_N),
        _value("--increase-delta1", effect="codegen", help="add to streaming delta1",
               type=_auto_int, default=0, metavar=_N),
        _value("--override-delta2", effect="codegen", help="streaming delta2 value",
               type=_auto_int, metavar=_N),
        _value("--increase-delta2", effect="codegen", help="add to streaming delta2",
               type=_auto_int, default=0, metavar=_N),
        _flag("--ignore-streaming", effect="rules", help="ignore the YAML `streaming` keys"),
        _flag("--allow-streaming", effect="rules", help="streaming without a FIFO (unsupported)"),
        Opt(("--no-bias",), "sim", "ignore bias in these layers (no list: all layers)",
            "no_bias", "?", const=tuple(range(ALL_LAYERS_NO_BIAS)), metavar="[LIST]",
            values="comma-separated layer numbers, or nothing for all layers"),
        _value("--streaming-layers", effect="rules", help="extra streaming layers",
               metavar="LIST", values="comma-separated layer numbers"),
    ),
    *_section(
        "Power saving",
        _flag("--powerdown", effect="codegen", help="power down unused MRAM"),
        _flag("--deepsleep", effect="rules", help="deep-sleep the Arm core (needs --riscv)"),
    ),
    *_section(
        "Hardware settings",
        _value("--max-proc", effect="rules", help="use at most N processors (1 to 64)",
               type=_int_range(0, 64), metavar=_N, values="an integer from 1 to 64"),
        _value("--input-offset", effect="rules", help="first layer input offset (hex)",
               type=_auto_int, metavar=_N),
        _flag("--verify-writes", effect="codegen", help="read back every write"),
        _flag("--verify-kernels", effect="codegen", help="read back the kernels"),
        _flag("--mlator-noverify", effect="codegen", help="check the mlator output only"),
        _flag("--write-zero-registers", effect="codegen", help="also write zero registers"),
        _flag("--init-tram", effect="codegen", help="clear TRAM first"),
        _flag("--zero-sram", effect="codegen", help="zero the memories (self-test first)"),
        _flag("--pretend-zero-sram", effect="sim", help="like --zero-sram without BIST"),
        _flag(
            "--test-bist",
            effect="sim",
            help="with --zero-sram or --pretend-zero-sram: clear every 7th kernel",
        ),
        _flag("--zero-unused", effect="codegen", help="zero unused registers"),
        _value("--apb-base", effect="codegen", help="APB base address", type=_auto_int,
               metavar=_N),
        _value("--ready-sel", effect="codegen", help="memory wait states", type=_int,
               metavar=_N),
        _value("--ready-sel-fifo", effect="codegen", help="FIFO wait states", type=_int,
               metavar=_N),
        _value("--ready-sel-aon", effect="codegen", help="AON wait states", type=_int,
               metavar=_N),
    ),
    *_section(
        "Various",
        _value("--input-split", effect="codegen", help="load the input in N parts (1 to 1024)",
               type=_int_range(1, 1024), default=1, metavar=_N,
               values="an integer from 1 to 1024"),
        _value("--synthesize-input", effect="sim", help="synthesize input, adding N per block",
               type=_auto_int, metavar=_N),
        _value("--synthesize-words", effect="sim", help="words per synthesized block (default 8)",
               type=_int, default=8, metavar=_N),
        _value("--max-verify-length", "--max-checklines", effect="codegen",
               help="check only N output words", dest="max_count", type=_int, metavar=_N),
        _flag("--no-version-check", effect="run", help="accepted; edgesynth never checks"),
        _value("--version-check-interval", effect="run", help="accepted; ignored",
               type=_int, default=24, metavar="HOURS"),
        _value("--upstream", effect="run", help="accepted; ignored",
               default="MaximIntegratedAI/ai8x-synthesis", metavar="REPO"),
        _value("--yamllint", effect="run", help="YAML linter to run (none: do not lint)",
               default="yamllint"),
    ),
    *_section(
        "edgesynth (not in the vendor's tool)",
        _flag("--no-verify", effect="run",
              help="write the project without running its writes on the virtual device first "
              "(by default a project that misses its known answer is refused)"),
    ),
)
# fmt: on

OPTION_EFFECTS: dict[str, Effect] = {flag: o.effect for o in OPTIONS for flag in o.flags}
"""Every option string (aliases included) -> what it affects."""

OPTION_STRINGS: tuple[str, ...] = tuple(OPTION_EFFECTS)


# ------------------------------------------------------------------------------------------------
# The parser.


class _Record(argparse.Action):
    """Store the value (or a flag's constant) and remember which option strings were given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        value = self.const if self.nargs == 0 else values
        setattr(namespace, self.dest, value)
        given = getattr(namespace, "_given", None)
        if given is not None:
            shown = None if self.nargs == 0 or value is self.const else values
            given.append((option_string, shown))


class IzerArgumentParser(argparse.ArgumentParser):
    """argparse with the vendor's options whose usage errors raise UsageError."""

    def __init__(self) -> None:
        super().__init__(
            prog="edgesynth izer",
            description="Synthesize a MAX78000/MAX78002 network; takes the vendor "
            "ai8xize.py command line unchanged.",
            exit_on_error=False,
        )
        self._by_string: dict[str, Opt] = {}

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        try:
            return super().parse_known_args(args, namespace)
        except argparse.ArgumentError as exc:
            raise self._argument_error(exc) from None

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        ns, extras = self.parse_known_args(argv, namespace)
        if extras:
            raise _unrecognized(extras, argv, self._by_string)
        return ns

    def error(self, message: str) -> NoReturn:
        raise _translate_message(message)

    def _argument_error(self, exc: argparse.ArgumentError) -> UsageError:
        name = exc.argument_name or ""
        first = name.split("/")[0]
        opt = self._by_string.get(first)
        message = exc.message
        if message.startswith("expected one argument"):
            allowed = opt.values if opt else "a value"
            return usage_error(f"`{name}` needs a value: {allowed}")
        if message.startswith("not allowed with argument"):
            other = message.removeprefix("not allowed with argument").strip()
            return usage_error(f"`{name}` cannot be combined with `{other}`")
        if message.startswith("ignored explicit argument"):
            value = message.removeprefix("ignored explicit argument").strip()
            return usage_error(f"`{name}` takes no value (got {value})")
        return usage_error(f"`{name}`: {message}" if name else message)


USAGE = (
    "usage: edgesynth izer --device DEVICE --config-file YAML --test-dir DIR --prefix NAME "
    "[options]"
)


def usage_error(message: str) -> UsageError:
    """A usage error of `edgesynth izer`, printed like argparse's (exit status 2)."""
    return UsageError(message, prog="edgesynth izer", usage=USAGE)


_REQUIRED_RE = re.compile(r"the following arguments are required: (.*)")
_ONE_OF_RE = re.compile(r"one of the arguments (.*) is required")
_AMBIGUOUS_RE = re.compile(r"ambiguous option: (\S+) could match (.*)")


def _translate_message(message: str) -> UsageError:
    if m := _REQUIRED_RE.match(message):
        names = ", ".join(f"`{n.strip()}`" for n in m.group(1).split(","))
        return usage_error(f"missing required option(s): {names}")
    if m := _ONE_OF_RE.match(message):
        names = " or ".join(f"`{n}`" for n in m.group(1).split())
        return usage_error(f"missing required option: {names} (e.g. --device MAX78000)")
    if m := _AMBIGUOUS_RE.match(message):
        return usage_error(f"ambiguous option `{m.group(1)}`: could be {m.group(2)}; spell it out")
    return usage_error(message)


def _unrecognized(extras: list[str], argv: list[str], by_string: dict[str, Opt]) -> UsageError:
    problems = []
    for extra in extras:
        if extra.startswith("-") and len(extra) > 1:
            name = extra.split("=", 1)[0]
            problems.append(
                f"unknown option `{name}`." + did_you_mean(name, (*OPTION_STRINGS, "--help"))
            )
            continue
        message = f"unexpected argument `{extra}`"
        i = argv.index(extra) if extra in argv else -1
        prev = by_string.get(argv[i - 1]) if i > 0 else None
        if prev is not None and prev.nargs == 0:
            message += f" (`{argv[i - 1]}` takes no value)"
        problems.append(message)
    return usage_error("; ".join(problems))


def build_parser() -> IzerArgumentParser:
    """The vendor-compatible parser, built from `OPTIONS`."""
    parser = IzerArgumentParser()
    sections: dict[str, argparse._ArgumentGroup] = {}
    mutexes: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for o in OPTIONS:
        group: Any = sections.get(o.section)
        if group is None:
            group = sections[o.section] = parser.add_argument_group(o.section)
        if o.mutex:
            if o.mutex not in mutexes:
                mutexes[o.mutex] = group.add_mutually_exclusive_group(
                    required=o.mutex in _REQUIRED_MUTEX
                )
            group = mutexes[o.mutex]
        kwargs: dict[str, Any] = {
            "action": _Record,
            "dest": o.dest,
            "nargs": o.nargs,
            "default": o.default,
            "help": o.help,
        }
        if o.nargs != 0:
            kwargs["metavar"] = o.metavar
            if o.type is not None:
                kwargs["type"] = o.type
        if o.nargs in (0, "?"):
            kwargs["const"] = o.const
        if o.required:
            kwargs["required"] = True
        group.add_argument(*o.flags, **kwargs)
        for flag in o.flags:
            parser._by_string[flag] = o
    return parser


# ------------------------------------------------------------------------------------------------
# The parsed options.


@dataclass(frozen=True)
class IzerOptions:
    """Every vendor option after the vendor's own post-processing.

    Field names are the vendor's (argparse `dest`) names. Lists are tuples. `given` lists the
    options in the order they appeared (option string as typed, value or None for flags);
    `warnings` holds the vendor's non-fatal remarks about the command line.
    """

    # Device selection and hardware features
    device: str  # "MAX78000" or "MAX78002"
    avg_pool_rounding: bool
    simple1b: bool
    # Embedded code
    embedded_code: bool
    rtl_preload: bool
    rtl_preload_weights: bool
    pipeline: bool
    pll: bool
    balance_speed: bool
    clock_divider: int | None
    config_file: str
    checkpoint_file: str | None
    board_name: str
    display_checkpoint: bool
    prefix: str
    debugwait: int
    define: str  # "-DA -DB", as the vendor formats it for the Makefile
    define_default_arm: str
    define_default_riscv: str
    eclipse_includes: str
    eclipse_variables: str
    eclipse_openocd_args: str
    # Code generation
    overwrite: bool
    compact_data: bool
    compact_weights: bool
    mexpress: bool
    mlator: bool
    unroll_mlator: int
    unroll_8bit: int
    unroll_wide: int
    softmax: bool
    unload: bool
    generate_kat: bool
    boost: tuple[int, int] | None  # (port, pin)
    start_layer: int
    wfi: bool
    timer: int | None
    no_timer: bool
    energy: bool
    enable_delay: int  # ms; device default when not given
    output_width: int | None
    no_deduplicate_weights: bool
    # File names
    c_filename: str
    api_filename: str
    weight_filename: str
    sample_filename: str
    sample_input: str | None
    result_filename: str | None
    result_numpy: str | None
    # Streaming and FIFOs
    fifo: bool
    fast_fifo: bool
    fast_fifo_quad: bool
    fifo_wait: bool
    fifo_go: bool
    slow_load: int
    debug_new_streaming: bool
    # RISC-V
    riscv: bool
    riscv_flash: bool
    riscv_cache: bool
    riscv_debug: bool
    riscv_exclusive: bool
    # Debug and logging
    verbose: bool
    log: bool
    display_progress: bool
    log_intermediate: bool
    log_pooling: bool
    verbose_all: bool
    log_filename: str
    debug: bool
    debug_computation: bool
    debug_latency: bool
    no_error_stop: bool
    stop_after: int | None
    skip_checkpoint_layers: int
    skip_yaml_layers: int
    stop_start: bool
    one_shot: bool
    repeat_layers: int
    clock_trim: tuple[int, int, int] | None
    fixed_input: bool
    reshape_inputs: bool
    forever: bool
    link_layer: bool
    rd_ahead: bool
    calcx4: bool
    ext_rdy: bool
    weight_start: int
    ignore_bias_groups: bool
    kernel_format: str
    debug_snoop: bool
    snoop_loop: bool
    ignore_hw_limits: bool
    ignore_bn: bool
    ignore_activation: bool
    ignore_energy_warning: bool
    ignore_mlator_warning: bool
    greedy_kernel_allocator: bool
    new_kernel_loader: bool
    weight_input: str | None
    bias_input: str | None
    # RTL simulation
    input_csv: str | None
    input_csv_format: int
    input_csv_retrace: int
    input_csv_period: int
    input_pix_clk: int
    input_sync: bool
    input_fifo: bool
    autogen: str | None  # the vendor's "None" becomes None
    autogen_list: str
    input_filename: str
    output_filename: str
    output_config_filename: str
    output_data_filename: str
    output_weights_filename: str
    output_bias_filename: str
    output_pass_filename: str | None
    runtest_filename: str
    legacy_test: bool
    legacy_kernels: bool
    test_dir: str
    top_level: str | None  # None: block level
    queue_name: str | None
    timeout: int | None
    result_output: bool
    # Streaming tweaks
    overwrite_ok: bool
    override_start: int | None
    increase_start: int
    override_rollover: int | None
    override_delta1: int | None
    increase_delta1: int
    override_delta2: int | None
    increase_delta2: int
    ignore_streaming: bool
    allow_streaming: bool
    no_bias: tuple[int, ...]  # layers whose bias is ignored
    streaming_layers: tuple[int, ...] | None
    # Power saving
    powerdown: bool
    deepsleep: bool
    # Hardware settings
    max_proc: int | None
    input_offset: int | None
    verify_writes: bool
    verify_kernels: bool
    mlator_noverify: bool
    write_zero_registers: bool
    init_tram: bool
    zero_sram: bool
    pretend_zero_sram: bool
    test_bist: bool
    no_warn_zero: bool
    zero_unused: bool
    apb_base: int | None
    ready_sel: int | None
    ready_sel_fifo: int | None
    ready_sel_aon: int | None
    # Various
    input_split: int
    synthesize_input: int | None
    synthesize_words: int
    max_count: int | None
    no_version_check: bool
    version_check_interval: int
    upstream: str
    yamllint: str | None  # None: do not lint
    no_verify: bool  # edgesynth's own: skip the proof on the virtual device
    # Bookkeeping
    given: tuple[tuple[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    # True: the vendor's writes, its firmware defects included (`edgesynth izer`, the
    # compat quirks that are wrong on the silicon); False: edgesynth's own path (`synth`,
    # `compile`, `plan`), which writes what computes the known answer.
    write_for_write: bool = True

    @classmethod
    def from_parsed(cls, parsed: dict[str, Any], given: Sequence[tuple[str, Any]]) -> IzerOptions:
        """The options as the vendor reads `parsed` (argparse's values by `dest`)."""
        values = _read_values(parsed)
        dev = get_device(values["device"])
        _output_kind(values, dev)
        remarks = _remarks(values)
        _implied(values)
        _device_defaults(values, dev)
        return cls(**values, given=tuple(given), warnings=tuple(remarks))

    @property
    def device_spec(self) -> Device:
        return get_device(self.device)

    def was_given(self, option: str) -> bool:
        """Whether `option` (any of its spellings) appeared on the command line."""
        opt = _BY_STRING.get(option)
        flags = opt.flags if opt else (option,)
        return any(name in flags for name, _ in self.given)


_BY_STRING: dict[str, Opt] = {flag: o for o in OPTIONS for flag in o.flags}
_BOOKKEEPING = {"given", "warnings", "write_for_write"}


# ------------------------------------------------------------------------------------------------
# From the parsed values to `IzerOptions`: the vendor's own reading of its command line, in the
# vendor's order (values first, then the output kind, remarks, implied options, device defaults).


def _int_list(text: str, option: str, what: str, base: int = 10) -> tuple[int, ...]:
    try:
        return tuple(int(s, base) for s in text.split(","))
    except ValueError:
        raise usage_error(f"`{option}`: `{text}` is not {what}") from None


def _no_bias(value: str | tuple[int, ...] | None) -> tuple[int, ...]:
    """`--no-bias LIST` (layer numbers); without a value, every layer; not given, none."""
    if value is None:
        return ()
    if isinstance(value, str):
        what = "a comma-separated list of layer numbers (or give no value)"
        return _int_list(value, "--no-bias", what)
    return value


def _clock_trim(text: str) -> tuple[int, int, int]:
    trims = _int_list(text, "--clock-trim", "three comma-separated integers", base=0)
    if len(trims) != 3:
        raise usage_error(
            f"`--clock-trim`: `{text}` must be three comma-separated integers "
            "for IBRO,ISO,IPO (0 keeps a trim), e.g. 0x173,0x5e,0x14"
        )
    return trims  # type: ignore[return-value]


def _port_pin(text: str) -> tuple[int, int]:
    try:
        port_pin = tuple(int(s, 0) for s in text.split("."))
    except ValueError:
        port_pin = ()
    if len(port_pin) != 2:
        raise usage_error(f"`--boost`: `{text}` is not a port.pin such as 2.5")
    return port_pin  # type: ignore[return-value]


def _streaming_layers(text: str) -> tuple[int, ...]:
    what = "a comma-separated list of layer numbers"
    return _int_list(text, "--streaming-layers", what, base=0)


def _none_word(text: str) -> str | None:
    """The vendor's `none` (any case) for "nothing"."""
    return None if text.lower() == "none" else text


def _defines(text: str) -> str:
    """`A B` -> `-DA -DB`, as the vendor formats defines for the Makefile."""
    names = [n for n in text.split(" ") if n]
    return " ".join(f"-D{n}" for n in names)


# How the vendor reads these options' values after parsing (in its order: the first bad value
# is the one reported). Each reader is given the parsed value; None (not given) is kept,
# except for `--no-bias`.
_READERS: dict[str, Callable[[Any], Any]] = {
    "no_bias": _no_bias,
    "clock_trim": _clock_trim,
    "boost": _port_pin,
    "streaming_layers": _streaming_layers,
    "top_level": lambda text: None if text == "None" else text,
    "autogen": _none_word,
    "yamllint": _none_word,
    "define": _defines,
    "define_default_arm": _defines,
    "define_default_riscv": _defines,
    "max_proc": lambda n: n or None,  # the vendor treats 0 as "no override"
}


def _read_values(parsed: dict[str, Any]) -> dict[str, Any]:
    values = dict(parsed)
    for dest, read in _READERS.items():
        if values[dest] is not None or dest == "no_bias":
            values[dest] = read(values[dest])
    return values


def _output_kind(v: dict[str, Any], dev: Device) -> None:
    """Embedded code or an RTL simulation, and how kernels are loaded and checked."""
    if v["rtl_preload"]:
        v["embedded_code"] = False
    if v["verify_kernels"] or (v["verify_writes"] and v["new_kernel_loader"]):
        v["rtl_preload_weights"] = False
    if v["mexpress"] is not None:
        v["rtl_preload_weights"] = False
    if v["rtl_preload_weights"]:
        v["mexpress"] = False
    if not v["embedded_code"]:
        v["softmax"] = v["energy"] = False
    if v["mexpress"] is None:
        v["mexpress"] = True
    if v["new_kernel_loader"] is None:  # not reachable with today's defaults; kept for safety
        v["new_kernel_loader"] = v["embedded_code"] and dev.name == "MAX78002"
    if v["new_kernel_loader"]:
        v["compact_weights"] = False
    if not v["c_filename"]:
        v["c_filename"] = "main" if v["embedded_code"] else "test"
    for flag in ("log", "unload"):
        if v[flag] is None:
            v[flag] = True
    if v["result_filename"] is None:
        v["result_filename"] = "sampleoutput.h" if v["embedded_code"] else None
    else:
        v["result_filename"] = _none_word(v["result_filename"])


def _remarks(v: dict[str, Any]) -> list[str]:
    """The vendor's non-fatal remarks about the command line (and the timer they drop)."""
    remarks = []
    if v["allow_streaming"]:
        remarks.append("`--allow-streaming` is unsupported.")
    if v["no_timer"]:
        v["timer"] = None
    if v["timer"] is not None and v["energy"]:
        remarks.append("`--timer` is ignored with `--energy`; drop `--timer` or add `--no-timer`.")
        v["timer"] = None
    return remarks


def _implied(v: dict[str, Any]) -> None:
    """Options other options turn on (or off).

    The vendor fills the RISC-V defaults from --riscv first, then lets the debug, cache, flash
    and exclusive options turn --riscv on (so `--riscv-debug` alone leaves flash and cache off).
    """
    for option in ("riscv_flash", "riscv_cache"):
        if v[option] is None:
            v[option] = v["riscv"]
    if v["riscv_debug"]:
        v["riscv"] = True
    if v["riscv_cache"]:
        v["riscv"] = v["riscv_flash"] = True
    if v["riscv_flash"] or v["riscv_exclusive"]:
        v["riscv"] = True
    if v["fast_fifo_quad"]:
        v["fast_fifo"] = True
    if v["fast_fifo"]:
        v["fifo"] = True
    if v["zero_sram"]:
        v["rtl_preload"] = False
    if v["result_output"] and (v["mlator"] or v["one_shot"] or v["stop_start"]):
        v["result_output"] = False
    if v["result_output"]:
        v["max_count"] = None


def _device_defaults(v: dict[str, Any], dev: Device) -> None:
    """What the device decides when the command line does not."""
    if v["pipeline"] is None:
        v["pipeline"] = dev.supports_pipeline
    if v["pll"] is None:  # the PLL exists exactly on the devices with a pipeline
        v["pll"] = dev.supports_pipeline
    if v["enable_delay"] is None:
        v["enable_delay"] = dev.switch_delay_ms if v["embedded_code"] else 0


def parse_izer_args(argv: Sequence[str]) -> IzerOptions:
    """Parse the vendor's `ai8xize.py` arguments (without the program name).

    Raises UsageError for usage errors; `--help` prints help and raises SystemExit(0).
    """
    parser = build_parser()
    given: list[tuple[str, Any]] = []
    ns = parser.parse_args(list(argv), argparse.Namespace(_given=given))
    return IzerOptions.from_parsed({k: v for k, v in vars(ns).items() if k != "_given"}, given)


def codegen_only_options_used(opts: IzerOptions) -> list[str]:
    """The given options that only affect code generation, as typed: ["--softmax", "--timer 0"].

    For the note "accepted, no effect until code generation exists: ...".
    """
    seen: list[str] = []
    for name, value in opts.given:
        if OPTION_EFFECTS.get(name) != "codegen":
            continue
        text = name if value is None else f"{name} {value}"
        if text not in seen:
            seen.append(text)
    return seen


def options_by_effect(effect: Effect) -> list[str]:
    """Every option string tagged with `effect`."""
    return [flag for flag, e in OPTION_EFFECTS.items() if e == effect]


def option_rule_errors(opts: IzerOptions) -> list[EdgesynthError]:
    """The vendor's refusals that depend only on the options and the device.

    Checks that need the network (FIFO channel limits, streaming, memory) are not made here.
    """
    dev = opts.device_spec
    errors: list[str] = []

    def unsupported(option: str) -> None:
        errors.append(f"`{option}` is not supported on the {dev.name}.")

    if opts.start_layer > 0 and not dev.supports_link_layer:
        unsupported("--start-layer")
    elif opts.start_layer > dev.max_start_layer:
        errors.append(
            f"`--start-layer` is {opts.start_layer}, but the {dev.name} supports at most "
            f"{dev.max_start_layer}."
        )
    if opts.link_layer and not dev.supports_link_layer:
        unsupported("--link-layer")
    if opts.rd_ahead and not dev.supports_read_ahead:
        unsupported("--read-ahead")
    if opts.calcx4 and not dev.supports_calcx4:
        unsupported("--calcx4")
    if opts.pipeline and not dev.supports_pipeline:
        unsupported("--pipeline")
    if opts.pll and not dev.supports_pipeline:
        unsupported("--pll")
    if opts.fifo_go and not dev.supports_fifo_go:
        unsupported("--fifo-go")
    if opts.one_shot and not dev.supports_oneshot:
        unsupported("--one-shot")
    if not opts.balance_speed and not opts.pll:
        errors.append("`--max-speed` requires `--pll` or `--pipeline`.")
    if opts.synthesize_input is not None and not opts.fifo:
        errors.append("`--synthesize-input` requires `--fifo`.")
    if opts.fifo and opts.start_layer != 0:
        errors.append("`--start-layer` must be 0 when using a FIFO.")
    if opts.fast_fifo and not opts.riscv:
        errors.append("`--fast-fifo` requires `--riscv`.")
    if opts.deepsleep and not opts.riscv:
        errors.append("`--deepsleep` requires `--riscv`.")
    if opts.one_shot and opts.timer is not None:
        errors.append("`--timer` is not supported with `--one-shot`.")
    if opts.max_proc is not None and opts.max_proc > dev.processors:
        errors.append(
            f"`--max-proc` is {opts.max_proc}, but the {dev.name} has {dev.processors} processors."
        )
    return [EdgesynthError(e) for e in errors]


def _check_table() -> None:
    """The dataclass and the table must name the same options (import-time sanity check)."""
    dests = {o.dest for o in OPTIONS}
    names = {f.name for f in fields(IzerOptions)} - _BOOKKEEPING
    if dests != names:  # pragma: no cover - a programming error
        raise AssertionError(f"option table and IzerOptions differ: {dests ^ names}")


_check_table()
