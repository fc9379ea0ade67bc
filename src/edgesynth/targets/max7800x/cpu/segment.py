"""The accelerator's second program in the first one's project (one firmware): its driver
(`cnn_segment2.c`, `cnn_segment2.h`, `weights_segment2.h`: `segment2/project`'s cnn.c, cnn.h
and weights.h with the driver's functions renamed `segment2_*`), the code that writes the CPU
part's result into data memory as the second program's first layer reads it
(`segment2_input.c`), and `segment2.c`: `cpu_part()` for a CPU part the accelerator takes back
(the CPU layers, their known answer, the second configuration loaded and run, its known answer,
the class).

The input's layout is the second program's `load_input()`'s: each data memory word's four bytes
are values of the CPU part's result (or zero). `input_map` finds which, by planning the input
of probes that number every value; the map applied to the known answer's input gives exactly
the words the second project's own `load_input()` writes (checked here, on every emit)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError

if TYPE_CHECKING:
    from pathlib import Path

    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.plan.plan import Plan

NAME = "segment2"
RENAMED = re.compile(r"\b(cnn_(?!time\b)\w+|CNN_ISR|memcpy32(?:_const)?)\b")
SHIFTS = np.array([0, 8, 16, 24])


def input_map(plan: Plan, sample: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Per input block: its address and, for each byte of its words (four per word, least
    significant first), the index of the value it holds in the flat `sample`, or -1 (a zero)."""
    from edgesynth.targets.max7800x.plan.inputs import plan_input

    sample = np.asarray(sample, dtype=np.int64)
    if plan.inputs.fifo or sample.size >= 1 << 16:
        raise EdgesynthError(
            "the accelerator's second program streams its input through FIFOs, or takes more "
            "than 65,535 values: the Cortex-M4 part cannot hand its result back (not supported)"
        )
    number = np.arange(1, sample.size + 1).reshape(sample.shape)
    low, high = (plan_input(plan.settings, (number >> k) & 0xFF) for k in (0, 8))
    blocks = []
    for lo, hi in zip(low.blocks, high.blocks, strict=True):
        blocks.append((lo.address, (_lanes(lo.words) | _lanes(hi.words) << 8).reshape(-1) - 1))
    flat = sample.reshape(-1) & 0xFF
    for (address, index), block in zip(blocks, plan.inputs.blocks, strict=True):
        got = np.where(index >= 0, flat[index], 0).reshape(-1, 4) << SHIFTS
        if address != block.address or not np.array_equal(got.sum(1), block.words):
            raise AssertionError(f"the input map misses the words at 0x{address:08x}")
    return blocks


def _lanes(words: np.ndarray) -> np.ndarray:
    """Each word's four bytes, least significant first."""
    return (np.asarray(words, np.int64)[:, None] >> SHIFTS) & 0xFF


def renamed(text: str) -> str:
    """The second program's driver (cnn.c or cnn.h) with its own names."""
    text = RENAMED.sub(lambda m: f"{NAME}_{m.group(1)}", text)
    text = text.replace('#include "cnn.h"', f'#include "cnn_{NAME}.h"')
    text = text.replace('#include "weights.h"', f'#include "weights_{NAME}.h"')
    return text.replace("__CNN_H__", f"__CNN_{NAME.upper()}_H__")


def enable_arguments(main_c: str) -> str:
    """The arguments the second project's main() passes cnn_enable() (its CNN clock)."""
    found = re.search(r"^\s*cnn_enable\((.*)\);", main_c, re.MULTILINE)
    assert found is not None, "a generated main.c enables the accelerator"
    return found.group(1)


def _lines(values: np.ndarray, per_line: int = 16) -> list[str]:
    flat = [str(int(v)) for v in np.asarray(values).reshape(-1)]
    return [", ".join(flat[i : i + per_line]) + "," for i in range(0, len(flat), per_line)]


def render_segment(
    plan: Plan, result: SynthesisResult, second: Path, device: str, output: tuple[bool, bool]
) -> dict[str, str]:
    """The files the first project gets for the second program (`plan`, `result`: its
    project's writes and its known answer; `second`: its emitted project folder); `output`:
    (its output is 32-bit accumulators, the network ends in a softmax on the Cortex-M4)."""
    from edgesynth.targets.max7800x.emit.project import render

    sample = np.asarray(result.sample, np.int64)
    blocks = [
        {"address": address, "size": index.size, "words": index.size // 4,
         "lines": _lines(index)}
        for address, index in input_map(plan, sample)
    ]  # fmt: skip
    out = np.asarray(result.output, np.int64).reshape(-1)
    wide, softmax = output
    context = {
        "name": second.parent.name, "device": device, "inputs": sample.size, "outputs": out.size,
        "wide": wide, "out_type": "int32_t" if wide else "int8_t",
        "out_words": out.size if wide else (out.size + 3) // 4, "softmax": softmax,
        "cpu_lines": _lines(sample), "expected_lines": _lines(out), "blocks": blocks,
        "enable": enable_arguments((second / "main.c").read_text()),
    }  # fmt: skip
    return {
        f"cnn_{NAME}.c": renamed((second / "cnn.c").read_text()),
        f"cnn_{NAME}.h": renamed((second / "cnn.h").read_text()),
        f"weights_{NAME}.h": (second / "weights.h").read_text(),
        f"{NAME}.c": render(f"{NAME}.c.j2", **context),
        f"{NAME}.h": render(f"{NAME}.h.j2", **context),
        f"{NAME}_input.c": render(f"{NAME}_input.c.j2", **context),
    }
