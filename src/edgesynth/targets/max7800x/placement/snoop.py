"""Placement of networks whose layer sequence a MAX78002 snoop unit decides.

The `snoop` words of a YAML configure units that watch the accelerator's data-memory writes by
address and value (vdevice/snoop.py). A unit may stop the run after a layer in which it triggers,
or take a layer's link (NXTLYR) only when it triggered during that layer. Which layers run is
then a property of the placement: the unit triggers only if the watched addresses receive
matching words. The known answer follows the run the YAML declares (`simulated_sequence`, and
`snoop_sequence` for the link), so every layer of that run states a decision:

- a stop unit must trigger in a layer that declares `simulated_sequence: stop`, and in no
  earlier layer;
- a link-gating unit must trigger in a layer whose link the run takes, and must not in a layer
  whose link the run passes by (the next layer in order runs instead).

For each such layer this module computes, per first memory instance of the layer's output block,
the word offsets at which the layer's writes give that decision: its simulated output (which
does not depend on the placement) laid out as the hardware writes it (`plan.kat.layer_words`),
shifted to every offset, shown to the unit's own comparisons. Words the layer writes only in
part are unknown to a whole-word comparison (the other bytes are whatever memory held) and never
count as the decision. The search then keeps each block to its allowed offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer, Network
from edgesynth.targets.max7800x.description.sequence import link_target
from edgesynth.targets.max7800x.placement.problem import Decision, Problem, member_map
from edgesynth.targets.max7800x.plan.hwlayers import hardware_numbers, passes_and_threshold
from edgesynth.targets.max7800x.plan.kat import FULL, layer_words
from edgesynth.targets.max7800x.snoop_unit import (
    WORD_SPACE,
    SnoopUnit,
    compare,
    units_from_words,
)

INSTANCE_BITS = 15  # a snoop address: WORD_SPACE | instance << 15 | word


def decisions(net: Network) -> list[Decision]:
    """Every decision the declared run needs from the snoop units (see the module docstring)."""
    if net.spec.snoop is None:
        return []
    units = units_from_words(net.spec.snoop)
    stoppers = [u for u in units if u.stops]
    gates = [u for u in units if u.gates_links]
    run = net.sim_order or net.order
    result = []
    for position, index in enumerate(run):
        layer = net.layers[index]
        following = run[position + 1] if position + 1 < len(run) else None
        declared = str(layer.spec.simulated_sequence or "").lower()
        if stoppers and following is None and declared == "stop":
            result.append(Decision(index, stoppers, True, "`simulated_sequence: stop`"))
        elif stoppers and following is not None:
            result.append(Decision(index, stoppers, False, f"the run goes on to layer {following}"))
        link = link_target(layer)
        if gates and following is not None and link is not None and link != index + 1:
            taken = following == link
            why = f"the run goes on to layer {following}" + (
                " by the link" if taken else f", not to the linked layer {link}"
            )
            result.append(Decision(index, gates, taken, why))
    return result


@dataclass
class Written:
    """A layer's writes relative to its output block at memory instance 0, word 0."""

    instance: np.ndarray
    word: np.ndarray
    mask: np.ndarray
    value: np.ndarray


def written(
    layer: Layer,
    output: np.ndarray,
    omap: int,
    word: int,
    write_gap: int,
    max_proc: int,
    shared: int,
) -> Written:
    """Where `layer` writes `output` when its processors are `omap` and its first word `word`
    (`shared` processors per memory instance)."""
    passes, threshold = passes_and_threshold(layer.out_channels, max_proc)
    words = layer_words(
        output, omap, 4 * word, layer.output_width, passes, threshold, write_gap, shared
    )
    return Written(words.processor // shared, words.word, words.mask, words.value)


def triggers(
    unit: SnoopUnit, writes: Written, layer: int, first: int, low: int, high: int
) -> tuple[np.ndarray, np.ndarray]:
    """(triggers, known) for every offset low..high of a block starting at memory instance
    `first`: whether the unit triggers in hardware layer `layer`, and whether that is certain
    (no word the comparison depends on is written only in part)."""
    size = high - low + 1
    if size <= 0 or unit.watched_layer not in (None, layer):
        return np.zeros(max(size, 0), dtype=bool), np.ones(max(size, 0), dtype=bool)
    if unit.whole_words:
        known = writes.mask == FULL
    else:
        known = (writes.mask >> (8 * unit.lane) & 0xFF) == 0xFF
    data = unit.data_of(writes.value.astype(np.uint64) & 0xFFFFFFFF)
    matches = compare(unit.data_code, data, unit.regs["D1"], unit.regs["D2"])
    if unit.data_code == 0:
        known = np.ones_like(known)
    hit = known & matches
    # per write, the offsets at which its address falls inside the window
    window_low, window_high = unit.address_window()
    instance = writes.instance + first
    base = WORD_SPACE | instance << INSTANCE_BITS
    top = base | (1 << INSTANCE_BITS) - 1
    start = np.maximum(window_low, base) - base - writes.word
    stop = np.minimum(window_high, top) - base - writes.word
    start, stop = np.maximum(start, low), np.minimum(stop, high)
    inside = start <= stop

    def count(selected: np.ndarray) -> np.ndarray:
        steps = np.zeros(size + 1, dtype=np.int64)
        sel = selected & inside
        np.add.at(steps, start[sel] - low, 1)
        np.add.at(steps, stop[sel] - low + 1, -1)
        return np.cumsum(steps[:-1])

    hits, unknown = count(hit), count(~known)
    if unit.count_code:
        wrote = count(np.ones_like(inside))
        fails = ~compare(unit.count_code, hits.astype(np.uint64), unit.regs["X1"], unit.regs["X2"])
        return (wrote > 0) & fails, (wrote == 0) | (unknown == 0)
    return hits > 0, (hits > 0) | (unknown == 0)


def allowed_offsets(
    decision: Decision, writes: Written, number: int, first: int, low: int, high: int
) -> np.ndarray:
    """The offsets low..high (block at memory instance `first`) that give `decision`; `number`
    is the decided layer's number in the registers (hidden layers counted)."""
    size = high - low + 1
    if decision.trigger:
        ok = np.zeros(size, dtype=bool)
        for unit in decision.units:
            fires, known = triggers(unit, writes, number, first, low, high)
            ok |= fires & known
        return ok
    ok = np.ones(size, dtype=bool)
    for unit in decision.units:
        fires, known = triggers(unit, writes, number, first, low, high)
        ok &= ~fires & known
    return ok


def intervals(allowed: np.ndarray, low: int) -> list[tuple[int, int]]:
    """The runs of True in `allowed` as (first, last) offsets."""
    edges = np.diff(np.concatenate(([0], allowed.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return [(low + int(s), low + int(e)) for s, e in zip(starts, ends, strict=True)]


def _condition(code: int, low: int, high: int, digits: int) -> str:
    """A comparison code in words: ">= 0x10, <= 0x20"; "any" for code 0."""
    parts = [
        f"{op} {value:#0{digits + 2}x}"
        for bit, op, value in ((1, ">=", low), (2, "==", low), (4, "<=", high), (8, "==", high))
        if code & bit
    ]
    return ", ".join(parts) or "any"


def watching(unit: SnoopUnit) -> str:
    """What a unit compares, for messages."""
    r = unit.regs
    what = "words" if unit.whole_words else f"byte {unit.lane} of words"
    return (
        f"unit {unit.unit} watches addresses {_condition(unit.address_code, r['A1'], r['A2'], 6)}"
        f" for {what} {_condition(unit.data_code, r['D1'], r['D2'], 8 if unit.whole_words else 2)}"
    )


def restrict(problem: Problem, decided: list[Decision], outputs: dict[int, np.ndarray]) -> None:
    """Keep every block a decided layer writes to the offsets that give its decision
    (`problem.allowed`); an error naming the layer and unit when no placement does."""
    from edgesynth.targets.max7800x.placement.solve import candidates

    words = problem.device.instance_words
    numbers = hardware_numbers(problem.net, problem.device)
    for decision in decided:
        layer = problem.net.layers[decision.layer]
        block = problem.blocks[problem.block_of[decision.layer]]
        member = block.member(decision.layer)
        omap = member_map(problem.shared, block, member, 0)
        writes = written(
            layer,
            outputs[decision.layer],
            omap,
            member.word,
            member.write_gap,
            problem.max_proc,
            problem.shared,
        )
        low, high = block.skip_words, words - block.words
        if block.fixed_word is not None:
            low = high = block.fixed_word
        limits = problem.allowed.setdefault(block.index, {})
        for first in candidates(problem, block):
            ok = allowed_offsets(decision, writes, numbers[decision.layer], first, low, high)
            if first in limits:
                ok &= _as_mask(limits[first], low, high)
            limits[first] = intervals(ok, low)
        problem.decisions.append(decision)
        if not any(limits.values()):
            raise _no_placement(problem, decision, layer)


def _as_mask(runs: list[tuple[int, int]], low: int, high: int) -> np.ndarray:
    mask = np.zeros(high - low + 1, dtype=bool)
    for first, last in runs:
        mask[first - low : last - low + 1] = True
    return mask


def _no_placement(problem: Problem, decision: Decision, layer: Layer) -> EdgesynthError:
    block = problem.blocks[problem.block_of[decision.layer]]
    where = "no placement of its output" if decision.trigger else "every placement of its output"
    given = f" with {', '.join(block.fixed_by)}" if block.fixed_by else ""
    key = next((k for k in ("simulated_sequence", "snoop_sequence") if k in layer.spec.lines), None)
    return EdgesynthError(
        f"{decision.describe()}, but {where}{given} gives that "
        f"({'; '.join(watching(u) for u in decision.units)}); check `snoop`, `snoop_sequence` "
        "and `simulated_sequence`.",
        file=problem.net.spec.path,
        line=layer.spec.lines.get(key, layer.spec.line) if key else layer.spec.line,
        layer=layer.index,
        layer_name=layer.spec.name,
        key=key or "snoop",
    )
