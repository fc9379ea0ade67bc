"""The proof a command runs before it moves what it wrote into place: the emitted program, run
on the target's own executor, computes the known answer.

    proof = target.prove(program, staging)   # a Proof, or ProofFailed (nothing is moved)
    print(proof.line)  # "known answer reproduced on the virtual MAX78000: 10 of 10 words"

The executors: the virtual MAX7800x device (the project's writes, write for write), the host
build of the generated gap8 C, the Gati functional model on program.dwp, the xDNN functional
model on script.bin and filters.bin. `--no-verify` skips the proof and says so (`unproven`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass

A = TypeVar("A")
B = TypeVar("B")

NO_VERIFY = "--no-verify"
DEFECT_REMEDY = (
    "Nothing was written. edgesynth generated this program, so this is a defect in edgesynth: "
    "please report it with the model; --no-verify writes the files anyway (unproven)."
)


@dataclass(frozen=True)
class Proof:
    """What a proof found: what ran the project, and how much of the known answer it matched."""

    executor: str  # "the virtual MAX78000", "the host build of the generated C", ...
    matched: int
    total: int
    unit: str = "words"
    more: tuple[Proof, ...] = ()  # the proofs of further parts (a line each)

    @property
    def line(self) -> str:
        first = (
            f"known answer reproduced on {self.executor}: {self.matched} of {self.total} "
            f"{self.unit}"
        )
        return "\n".join([first, *(p.line for p in self.more)])


class ProofFailed(EdgesynthError):
    """The emitted program does not compute its known answer on the target's executor."""


def unproven(what: str, executor: str) -> str:
    """The warning `--no-verify` prints."""
    return (
        f"{NO_VERIFY}: {what} was written without running it on {executor}; nothing shows "
        "that it computes the known answer."
    )


def first_difference(expected: np.ndarray, got: np.ndarray) -> str:
    """Where two arrays of one shape first differ, and how many values differ."""
    bad = np.flatnonzero(expected.reshape(-1) != got.reshape(-1))
    where = tuple(int(i) for i in np.unravel_index(int(bad[0]), expected.shape))
    return (
        f"{bad.size} of {expected.size} values differ; the first at index {where}: "
        f"{int(got.reshape(-1)[bad[0]])} instead of {int(expected.reshape(-1)[bad[0]])}"
    )


def compare(expected: np.ndarray, got: np.ndarray, executor: str, what: str, remedy: str) -> Proof:
    """The proof that `got` (the executor's output) equals `expected` (the bit-exact
    simulator's), or ProofFailed naming `what` failed, where, and `remedy`."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.shape != got.shape:
        raise ProofFailed(
            f"{what} on {executor} gives an output of shape {got.shape}, the simulator "
            f"{expected.shape}. {remedy}"
        )
    if not np.array_equal(expected, got):
        raise ProofFailed(
            f"{what} on {executor} does not compute the simulator's answer: "
            f"{first_difference(expected, got)}. {remedy}"
        )
    return Proof(executor, int(expected.size), int(expected.size), "values")


def side_by_side(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """(first(), second()), second run in another thread while first runs in this one: a proof's
    two independent halves (the executor's run of the files, the simulator's answer) share the
    cores, NumPy releasing the interpreter lock in its large operations. An exception of either
    is raised here (first's before second's); Ctrl-C stops the command without waiting. On a
    busy machine (`cores.side_by_side_threads`) one after the other."""
    from edgesynth.cores import side_by_side_threads

    if side_by_side_threads(2) < 2:
        return first(), second()
    value: list[B] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            value.append(second())
        except BaseException as err:  # raised in the caller's thread below
            error.append(err)

    thread = threading.Thread(target=work, name="edgesynth-proof", daemon=True)
    thread.start()
    got = first()
    thread.join()
    if error:
        raise error[0]
    return got, value[0]
