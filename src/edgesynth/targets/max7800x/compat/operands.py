"""How the vendor's known-answer simulation splits a multi-operand layer's input."""

from __future__ import annotations

import numpy as np


def legacy_test_operands(data: np.ndarray, operands: int) -> np.ndarray | None:
    """`--legacy-test`: the element-wise operands of every layer after the first, taken as
    interleaved columns (operand i = columns i, i + operands, ...) instead of consecutive
    channel groups.

    The vendor's older regression tests fed element-wise layers that way, and its simulator
    keeps the layout behind this option; the hardware reads operands as channel groups.
    No corpus case uses the option (none decides it); a test checks it against an
    independent reference (tests/max7800x/test_build_options.py). None when the columns cannot
    be split evenly.
    """
    if data.shape[2] % operands:
        return None
    return np.array([data[:, :, i::operands] for i in range(operands)])
