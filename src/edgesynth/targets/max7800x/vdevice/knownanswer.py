"""The known answer a project checks after inference: blocks of data-memory words.

Two spellings: the corpus's kat.npz (arrays addr, mask, length per block and data for all
words) and a generated project's sampleoutput.h (`#define SAMPLE_OUTPUT { addr, mask, length,
data..., addr, ..., 0 }`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.vdevice.record import Record


class KnownAnswer(Record):
    """One entry per checked 32-bit word."""

    addr: np.ndarray  # AHB address
    mask: np.ndarray
    expected: np.ndarray


def from_blocks(
    addr: np.ndarray, mask: np.ndarray, length: np.ndarray, data: np.ndarray
) -> KnownAnswer:
    length = np.asarray(length, dtype=np.int64)
    if int(length.sum()) != np.asarray(data).size:
        raise EdgesynthError(
            f"the known answer's blocks hold {int(length.sum())} words but {np.asarray(data).size} "
            "data words are given"
        )
    starts = np.repeat(np.asarray(addr, dtype=np.int64), length)
    within = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
    return KnownAnswer(
        addr=starts + 4 * within,
        mask=np.repeat(np.asarray(mask, dtype=np.uint32), length),
        expected=np.asarray(data).astype(np.uint32),
    )


def load_kat(path: str | Path) -> KnownAnswer:
    """kat.npz, or a project's sampleoutput.h."""
    path = Path(path)
    if path.suffix == ".h":
        return parse_sampleoutput(path)
    try:
        with np.load(path) as kat:
            addr, mask, length, data = (kat[k] for k in ("addr", "mask", "length", "data"))
    except (OSError, KeyError, ValueError) as err:
        raise EdgesynthError(
            f"cannot read the known answer (expected arrays addr, mask, length, data): {err}",
            file=str(path),
        ) from None
    return from_blocks(addr, mask, length, data)


_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|\d+")


def parse_sampleoutput(path: Path) -> KnownAnswer:
    """The SAMPLE_OUTPUT initializer of a generated sampleoutput.h."""
    try:
        text = path.read_text()
    except OSError as err:
        raise EdgesynthError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    match = re.search(r"#define\s+SAMPLE_OUTPUT\s*\{(.*?)\}", text, re.S)
    if match is None:
        raise EdgesynthError("no `#define SAMPLE_OUTPUT { ... }` found", file=str(path))
    body = match.group(1).replace("\\\n", " ")
    values = [int(v, 0) for v in _NUMBER.findall(body)]
    addr, mask, length, data = [], [], [], []
    i = 0
    while i < len(values) and values[i] != 0:
        if i + 3 > len(values):
            raise EdgesynthError("SAMPLE_OUTPUT ends inside a block header", file=str(path))
        a, m, n = values[i : i + 3]
        block = values[i + 3 : i + 3 + n]
        if len(block) != n:
            raise EdgesynthError(
                f"SAMPLE_OUTPUT block at 0x{a:08x} announces {n} words but has {len(block)}",
                file=str(path),
            )
        addr.append(a)
        mask.append(m)
        length.append(n)
        data.extend(block)
        i += 3 + n
    return from_blocks(np.array(addr), np.array(mask), np.array(length), np.array(data))
