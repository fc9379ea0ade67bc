"""A placement proven optimal without the solver, for small plain networks.

The CP-SAT model (solve.py) minimises, in this order: the fullest kernel memory, the highest
data-memory word used, the sum of the blocks' first memory instances. On a network with no
passthrough layer, read-ahead, snoop decision, calcx4 layer, folded dilated conv1d, fixed
offset or restricted offset, and few enough choices of first instance, this module enumerates
every choice of first instances, and bounds each one's objective from below: its fullest
kernel memory exactly, its highest word by the heaviest set of blocks alive at one step in one
memory instance (they must lie one above the other). A first-fit arrangement of the offsets for
the choice with the lowest bound that reaches that bound is optimal: no placement's objective
is lower than the bound. When no arrangement reaches it, or the network is not plain, the
caller runs the solver. Only the first search round uses it (later rounds add constraints the
rule does not model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgesynth.targets.max7800x.placement.problem import Block, Problem
from edgesynth.targets.max7800x.rules import memory_instances

# The most (choices of first instances) x (memory instances) enumerated: MNIST has 37,632
# choices of 16 instances; a deeper network goes to the solver.
MAX_CELLS = 2_000_000


@dataclass(frozen=True)
class Proven:
    instance: dict[int, int]  # block -> first memory instance
    word: dict[int, int]  # block -> offset in words


def is_plain(problem: Problem) -> bool:
    """The network has none of the constraints this module does not model."""
    words = problem.device.instance_words
    return not (
        problem.passthrough
        or problem.read_ahead
        or problem.allowed
        or problem.decisions
        or any(use.calcx4 for use in problem.kernels)
        or any(b.fixed_word is not None for b in problem.blocks)
        # a folded dilated conv1d: its reader may read words past its input that no one wrote
        # (the vendor's geometry), which the model does not see; the solver's answers are proven
        or any(b.skip_words for b in problem.blocks)
        or any(b.instances(problem.shared) > problem.instances for b in problem.blocks)
        or any(b.words + b.skip_words > words for b in problem.blocks)
    )


def first_instances(problem: Problem, block: Block) -> list[int]:
    """The first memory instances the solver may give `block` (its `candidates`)."""
    if block.fixed_map is not None:
        return [0]
    if block.fixed_processor is not None:
        return [block.fixed_processor // problem.shared]
    if block.chw:
        last = (problem.max_proc - 1) // problem.shared - block.processors + 1
    else:
        last = (problem.max_proc - block.processors) // problem.shared
    return list(range(last + 1))


def presence(problem: Problem, block: Block, first: int) -> frozenset[int]:
    """The memory instances `block` occupies when it starts at `first`."""
    if block.fixed_map is not None:
        bits = memory_instances(block.fixed_map | block.copies, problem.shared)
        return frozenset(i for i in range(problem.instances) if bits >> i & 1)
    return frozenset(range(first, first + block.instances(problem.shared)))


def _length(block: Block) -> int:
    return block.words + block.skip_words


def _kernel_words(problem: Problem, block: Block, first: int) -> list[int]:
    """Kernel words per memory instance of the layers reading `block` when it starts at
    `first` (the solver's `_kernel_presence`)."""
    load = [0] * problem.instances
    for use in problem.kernels:
        if use.block != block.index:
            continue
        if use.span is None or block.fixed_map is not None:
            where = presence(problem, block, first)
        else:  # within the instances any start of the block reaches, as the solver counts
            reach = {
                i for q in first_instances(problem, block) for i in presence(problem, block, q)
            }
            where = frozenset(range(first, first + use.span)) & reach
        for i in where:
            if i < problem.instances:
                load[i] += use.words
    return load


def _along(axis: int, rows: list[list[int]], dims: int) -> np.ndarray:
    """`rows` (one per choice of one block, one column per memory instance) shaped to broadcast
    along `axis` of the choices' grid."""
    shape = [1] * dims + [len(rows[0])]
    shape[axis] = len(rows)
    return np.asarray(rows, dtype=np.int64).reshape(shape)


def _objective_bounds(problem: Problem, options: list[list[int]], capacity: list[int]):
    """Per choice of first instances (a grid, one axis per block): the solver's objective
    with the highest word replaced by its lower bound, the heaviest set of blocks alive at one
    step in one instance, which must lie one above the other (-1 where the choice breaks a
    constraint); and that bound."""
    blocks, dims, count = problem.blocks, len(problem.blocks), problem.instances
    words = problem.device.instance_words
    present = [
        _along(
            b.index,
            [[i in presence(problem, b, q) for i in range(count)] for q in options[b.index]],
            dims,
        )
        for b in blocks
    ]
    load = sum(
        _along(b.index, [_kernel_words(problem, b, q) for q in options[b.index]], dims)
        for b in blocks
    )
    ok = (load <= np.asarray(capacity[:count], dtype=np.int64)).all(axis=-1)
    group = problem.device.processors_per_group // problem.shared
    ok &= sum(p[..., :group].sum(axis=-1) for p in present) > 0  # quadrant 0 drives it
    bound = np.full(ok.shape, max(_length(b) for b in blocks), dtype=np.int64)
    for step in sorted({b.born for b in blocks}):
        alive = [b for b in blocks if b.born <= step <= b.dies]
        stacked = sum(_length(b) * present[b.index] for b in alive)
        bound = np.maximum(bound, np.max(stacked, axis=-1))
    ok &= bound <= words
    lowest = sum(_along(b.index, [[q] for q in options[b.index]], dims)[..., 0] for b in blocks)
    span_q = count * dims + 1
    key = (load.max(axis=-1) * (words + 1) + bound) * span_q + lowest
    return np.where(ok, key, -1), bound


def first_fit(present: list[frozenset[int]], order: list[Block]) -> dict[int, int]:
    """Offsets in words, each block at the lowest start clear of the blocks it conflicts with."""
    placed: list[tuple[Block, int]] = []  # block, start (its offset less its skip words)
    word: dict[int, int] = {}
    for block in order:
        clash = [
            (start, start + _length(other))
            for other, start in placed
            if not (block.dies < other.born or other.dies < block.born)
            and present[block.index] & present[other.index]
        ]
        length = _length(block)
        start = min(
            s
            for s in [0] + [end for _, end in clash]
            if all(s + length <= low or high <= s for low, high in clash)
        )
        placed.append((block, start))
        word[block.index] = start + block.skip_words
    return word


def _peak(problem: Problem, word: dict[int, int]) -> int:
    return max((word[b.index] + b.words for b in problem.blocks), default=0)


def proven_placement(problem: Problem, kernel_capacity: list[int]) -> Proven | None:
    """An optimal placement for the solver's objective, or None when this rule cannot prove one
    (see the module docstring)."""
    if not problem.blocks or not is_plain(problem):
        return None
    if any(b.index != n for n, b in enumerate(problem.blocks)):
        return None
    options = [first_instances(problem, b) for b in problem.blocks]
    if math.prod(len(o) for o in options) * problem.instances > MAX_CELLS:
        return None
    key, bound = _objective_bounds(problem, options, kernel_capacity)
    if not (key >= 0).any():
        return None
    at = np.unravel_index(np.argmin(np.where(key >= 0, key, np.iinfo(np.int64).max)), key.shape)
    first = [options[b][int(n)] for b, n in enumerate(at)]
    present = [presence(problem, b, q) for b, q in zip(problem.blocks, first, strict=True)]
    orders = (
        sorted(problem.blocks, key=lambda b: (b.born, b.index)),
        sorted(problem.blocks, key=lambda b: (-_length(b), b.index)),
    )
    for order in orders:
        word = first_fit(present, order)
        if _peak(problem, word) == int(bound[at]):
            return Proven(dict(enumerate(first)), word)
    return None
