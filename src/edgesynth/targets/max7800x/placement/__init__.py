"""Automatic placement for MAX78000/MAX78002: `processors`, `output_processors`, `in_offset`,
`out_offset` (and `write_gap` for interleaved element-wise operands) chosen by a search.

`place(net, device, options, rebuild)` takes a network built from a YAML that may omit those keys
on any layer, searches a placement (`problem` states what must hold, `solve` is the CP-SAT
model), writes it into a copy of the YAML's layer specs, rebuilds the network with `rebuild`, and
checks the result with the device rules and the kernel allocator the code generator uses. If the
allocator cannot fit the kernels where the model's per-processor sums said they fit (it keeps
each layer's kernels in one run of columns common to all its processors), the capacity of the
memory that overflowed is lowered and the search runs again; if it would overlap two layers'
kernels, that start of the layer's input is forbidden and the search runs again.

Placement starts when an executed layer has no `processors`; then every key the YAML leaves out
is chosen. A YAML that gives every layer's `processors` keeps the vendor's defaults for the
rest (`out_offset` 0, `in_offset` the previous layer's `out_offset`, ...).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.network import Network
from edgesynth.targets.max7800x.description.spec import NetworkSpec
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.rules import RuleOptions

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.placement.problem import Problem, Unplaceable
    from edgesynth.targets.max7800x.placement.solve import Search, Solution

# The search (problem, solve, snoop) loads when a layer is placed: a YAML that places every
# layer never loads it (`edgesynth izer` on such a YAML).

PLACEMENT_KEYS = ("processors", "output_processors", "in_offset", "out_offset")
MAX_ROUNDS = 6


@dataclass
class LayerPlacement:
    """Where one layer runs: processors, output processors, data-memory offsets, write gap."""

    processors: int
    output_processors: int
    in_offset: int
    out_offset: int
    write_gap: int


@dataclass
class Placement:
    """The chosen placement, per executed layer, and what the search worked with."""

    layers: dict[int, LayerPlacement]
    problem: Problem
    solution: Solution
    chosen: dict[int, list[str]] = field(default_factory=dict)  # layer -> keys edgesynth set
    rounds: int = 1
    seconds: float = 0.0  # time the search and its checks took


def chosen_values(placement: Placement) -> dict[int, dict[str, int]]:
    """Layer -> {key: value} of the keys edgesynth chose (for writing them into a YAML)."""
    return {
        index: {key: getattr(placement.layers[index], key) for key in keys}
        for index, keys in placement.chosen.items()
    }


def needs_placement(spec: NetworkSpec, order: list[int]) -> bool:
    """Some executed layer leaves `processors` to edgesynth."""
    return spec.leaves_placement_out(order)


def layer_placements(problem: Problem, solution: Solution) -> dict[int, LayerPlacement]:
    from edgesynth.targets.max7800x.placement.problem import SINGLE
    from edgesynth.targets.max7800x.placement.solve import member_map, reader_map

    result = {}
    for index in problem.net.order:
        reader = problem.readers[index]
        source = problem.blocks[problem.block_of[reader.tensors[0]]]
        member_in = source.member(reader.tensors[0])
        own = problem.blocks[problem.block_of[index]]
        member = own.member(index)
        in_word = solution.word[source.index] + reader.extra_words
        in_word += member_in.word if reader.kind == SINGLE else 0
        result[index] = LayerPlacement(
            processors=reader_map(problem, index, solution.instance),
            output_processors=member_map(problem, own, member, solution.instance[own.index]),
            in_offset=4 * in_word,
            out_offset=4 * (solution.word[own.index] + member.word),
            write_gap=member.write_gap,
        )
    return result


def apply_placement(
    spec: NetworkSpec, placements: dict[int, LayerPlacement]
) -> tuple[NetworkSpec, dict[int, list[str]]]:
    """A copy of `spec` with every placement key the YAML leaves out filled in."""
    placed = copy.copy(spec)
    placed.layers = [copy.copy(layer) for layer in spec.layers]
    chosen: dict[int, list[str]] = {}
    for index, values in placements.items():
        layer = placed.layers[index]
        keys = []
        for key in (*PLACEMENT_KEYS, "write_gap"):
            if getattr(layer, key) is None and (key != "write_gap" or values.write_gap):
                setattr(layer, key, getattr(values, key))
                keys.append(key)
        chosen[index] = keys
    return placed, chosen


def _check(net: Network, device: Device, options: RuleOptions, write_for_write: bool) -> None:
    """The device rules and the kernel allocator on the placed network (the vendor's, for
    `edgesynth izer`: `write_for_write`)."""
    from edgesynth.targets.max7800x import rules
    from edgesynth.targets.max7800x.plan.chip import Chip
    from edgesynth.targets.max7800x.plan.hwlayers import build_hw_layers
    from edgesynth.targets.max7800x.plan.kernels import KernelOptions, plan_kernels

    rules.check_network(net, device, options)
    chip = Chip.of(device, options.max_proc)
    kernels = KernelOptions(write_for_write=write_for_write)
    plan_kernels(build_hw_layers(net, chip, options), chip, kernels)


def _kernel_words(problem: Problem, solution: Solution, instance: int) -> int:
    """Kernel words the solver counted in memory `instance` for `solution`."""
    from edgesynth.targets.max7800x.placement.solve import kernel_instances
    from edgesynth.targets.max7800x.rules.sizes import memory_instances

    total = 0
    for use in problem.kernels:
        block = problem.blocks[use.block]
        if block.fixed_map is not None:
            present = memory_instances(block.fixed_map | block.copies, problem.shared)
            here = bool(present >> instance & 1)
        else:
            here = instance in kernel_instances(problem, use, solution.instance[use.block])
        if here:
            total += use.words
    return total


def _mixes_calcx4(problem: Problem) -> bool:
    kinds = {use.calcx4 for use in problem.kernels}
    return len(kinds) == 2


def place(
    net: Network,
    device: Device,
    options: RuleOptions,
    rebuild: Callable[[NetworkSpec], Network],
    prove: Callable[[Network], str | None] | None = None,
    outputs: Callable[[Network], dict[int, np.ndarray]] | None = None,
    write_for_write: bool = False,
) -> tuple[Network, Placement]:
    """The network with its placement chosen, and the placement (see the module docstring).

    `prove(placed)` runs a placed network's generated writes on the virtual device (None: it
    passed; else why not). With it, calcx4 layers may share kernel memory with other layers
    when no placement keeps them apart: each such placement is kept only once the device has
    proven it, and a refuted one is excluded from the next search.

    `outputs(net)` gives every layer's simulated output (they do not depend on the placement):
    a network whose layer sequence the MAX78002's snoop units decide needs them to place the
    outputs they watch (placement/snoop.py), and its placement is proven with `prove`.

    `write_for_write`: the kernels are allocated as the vendor's tool does (`edgesynth izer`),
    not as edgesynth's own path does (see plan/kernels.py)."""
    from edgesynth.targets.max7800x.placement.problem import Unplaceable
    from edgesynth.targets.max7800x.placement.solve import Search

    started = time.perf_counter()
    problem = _problem(net, device, options, outputs)
    rounds = _Rounds([device.mask_width_small] * problem.instances)
    search = Search(problem)  # one model for every round
    while rounds.done < rounds.allowed:
        rounds.done += 1
        try:
            solution = rounds.solve(search)
        except Unplaceable:
            if not (rounds.apart and prove is not None and _mixes_calcx4(problem)):
                raise
            rounds.apart = False
            rounds.allowed += MAX_ROUNDS  # proofs on the virtual device need rounds of their own
            continue
        except EdgesynthError:
            if rounds.nogoods:  # every placement left was refuted by the virtual device
                break
            if not rounds.relax(problem, device):
                raise
            continue
        placements = layer_placements(problem, solution)
        spec, chosen = apply_placement(net.spec, placements)
        placed = rebuild(spec)
        if not _allocator_accepts(placed, problem, solution, rounds, options, write_for_write):
            continue
        if not _proven(placed, problem, solution, rounds, prove):
            continue
        seconds = time.perf_counter() - started
        return placed, Placement(placements, problem, solution, chosen, rounds.done, seconds)
    raise _no_placement(net, rounds, write_for_write)


def _problem(
    net: Network,
    device: Device,
    options: RuleOptions,
    outputs: Callable[[Network], dict[int, np.ndarray]] | None,
) -> Problem:
    """The placement problem, restricted to what the snoop units must decide."""
    from edgesynth.targets.max7800x.placement import snoop
    from edgesynth.targets.max7800x.placement.problem import Unplaceable, build_problem

    problem = build_problem(net, device, options)
    decided = snoop.decisions(net)
    if decided:
        if outputs is None:
            raise Unplaceable(
                "automatic placement of a network whose layer sequence the snoop units decide "
                "needs the layers' simulated outputs; give the placement by hand.",
                file=net.spec.path,
                key="snoop",
            )
        snoop.restrict(problem, decided, outputs(net))
    return problem


@dataclass
class _Rounds:
    """What the search rounds have learnt so far, and how many they may take."""

    capacity: list[int]  # kernel words the model may count in each memory instance
    forbidden: dict[int, set[int]] = field(default_factory=dict)  # block -> first instances
    columns: bool = False  # the allocator's column model, after the first overflow
    apart: bool = True  # calcx4 kernels kept in memories of their own
    nogoods: list[dict[int, int]] = field(default_factory=list)  # refuted kernel placements
    first_room: bool = False  # the larger kernel memory of each group's first processor
    in_place: bool = False  # layers writing over their own input, when nothing else fits
    refuted: str = ""  # why the virtual device refuted the last placement
    allowed: int = MAX_ROUNDS
    done: int = 0

    def solve(self, search: Search) -> Solution:
        return search.solve(
            self.capacity,
            self.forbidden,
            kernel_columns=self.columns,
            calcx4_apart=self.apart,
            nogoods=self.nogoods,
            first_processor_room=self.first_room,
            in_place=self.in_place,
        )

    def relax(self, problem: Problem, device: Device) -> bool:
        """After a search without a solution: allow the next thing that may make room (the
        first processors' larger kernel memory, then writing over a layer's own input);
        False when nothing is left."""
        if not self.first_room and device.mask_width_large > device.mask_width_small:
            self.first_room = True  # the allocator's check proves what the model allows
            return True
        if not self.in_place and problem.in_place:
            self.in_place = True
            return True
        return False


def _allocator_accepts(
    placed: Network,
    problem: Problem,
    solution: Solution,
    rounds: _Rounds,
    options: RuleOptions,
    write_for_write: bool,
) -> bool:
    """The device rules and the kernel allocator on the placed network; where the allocator
    cannot follow the model, what the next round must avoid is noted in `rounds` (False)."""
    from edgesynth.targets.max7800x.plan.kernels import KernelClash, KernelMemoryExhausted

    device = problem.device
    try:
        _check(placed, device, options, write_for_write)
    except KernelMemoryExhausted as full:
        # The allocator gives each layer the same columns on all its processors, so
        # memory is lost between layers of different processor ranges: what the model
        # counted there no longer fits; ask for less than that.
        instance = full.processor // device.processors_sharing_memory
        if rounds.columns:
            counted = _kernel_words(problem, solution, instance)
            rounds.capacity[instance] = min(rounds.capacity[instance], counted) - max(
                1, full.overflow
            )
        rounds.columns = True
        return False
    except KernelClash as clash:  # the vendor's allocator overlaps two layers here
        if clash.layer is None or clash.layer not in problem.readers:
            raise
        block = problem.block_of[problem.readers[clash.layer].tensors[0]]
        rounds.forbidden.setdefault(block, set()).add(solution.instance[block])
        return False
    except (EdgesynthError, MultipleErrors) as err:
        raise EdgesynthError(
            "the automatic placement breaks a device rule (a defect in edgesynth's planner; "
            f"please report it with this YAML): {err}",
            file=problem.net.spec.path,
        ) from None
    return True


def _proven(
    placed: Network,
    problem: Problem,
    solution: Solution,
    rounds: _Rounds,
    prove: Callable[[Network], str | None] | None,
) -> bool:
    """A placement with calcx4 kernels sharing memory, or one the snoop units decide, run on
    the virtual device: a refuted shared placement is excluded from the next round (False);
    a refuted snoop placement is a defect."""
    if not rounds.apart and prove is not None:
        rounds.refuted = prove(placed) or ""
        if rounds.refuted:
            rounds.nogoods.append(
                {use.block: solution.instance[use.block] for use in problem.kernels}
            )
            return False
    elif problem.decisions and prove is not None:
        rounds.refuted = prove(placed) or ""
        if rounds.refuted:
            raise EdgesynthError(
                "the automatic placement does not give the layer sequence the snoop units "
                f"must decide on the virtual device ({rounds.refuted}); a defect in edgesynth's "
                "planner: please report it with this YAML, and give the placement by hand.",
                file=problem.net.spec.path,
            )
    return True


def _no_placement(net: Network, rounds: _Rounds, write_for_write: bool) -> EdgesynthError:
    """Why every round failed."""
    from edgesynth.targets.max7800x.placement.problem import Unplaceable

    if not rounds.apart:
        hint = "use calcx4 on every layer or on none, or give the placement by hand."
        if write_for_write:
            hint = (
                "the vendor's kernel allocator, which `edgesynth izer` keeps write for write, "
                "writes calcx4 kernels over other layers' kernels; `edgesynth synth` and "
                "`edgesynth plan` allocate them where they are free, or " + hint
            )
        return Unplaceable(
            "automatic placement does not handle this mix of calcx4 and other layers: the "
            f"placements tried with shared kernel memory failed on the virtual device "
            f"({rounds.refuted}); " + hint,
            file=net.spec.path,
        )
    return EdgesynthError(
        "the kernels do not fit in kernel memory with any placement tried "
        f"({MAX_ROUNDS} rounds); use fewer or smaller layers, or give `processors` by hand.",
        file=net.spec.path,
    )


def __getattr__(name: str) -> Any:
    """`Unplaceable` (placement/problem.py), loaded when asked for."""
    if name == "Unplaceable":
        from edgesynth.targets.max7800x.placement.problem import Unplaceable

        return Unplaceable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PLACEMENT_KEYS",
    "LayerPlacement",
    "Placement",
    "Unplaceable",
    "apply_placement",
    "chosen_values",
    "needs_placement",
    "place",
]
