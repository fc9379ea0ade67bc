"""The placement search: a CP-SAT model over the blocks of a `Problem`.

Variables: per block its first memory instance (one Boolean per candidate) and its word offset.
Constraints: in every data-memory instance, blocks alive at the same step do not share a word
(one `NoOverlap2D` per instance: steps x words); every processor's kernel memory holds the
kernels of the layers that enable it; a passthrough layer writes each quadrant's channels to the
same quadrant; keys the YAML gives are fixed. Objective, in this order: the fullest kernel
memory (room for the kernel allocator), the highest data-memory word used, then the lowest
processors (a readable map).
"""

from __future__ import annotations

from dataclasses import dataclass

from edgesynth.cpsat import new_solver
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.placement.problem import (
    CONCAT,
    ELTWISE,
    SINGLE,
    Block,
    KernelUse,
    Member,
    Problem,
    Unplaceable,
    tensor_name,
)
from edgesynth.targets.max7800x.placement.problem import member_map as problem_member_map
from edgesynth.targets.max7800x.placement.shortage import DATA_ADVICE, shortages, usage
from edgesynth.targets.max7800x.placement.simple import proven_placement
from edgesynth.targets.max7800x.plan.hwlayers import passthrough_slot_index
from edgesynth.targets.max7800x.rules import input_passes, memory_instances, popcount
from edgesynth.targets.max7800x.rules.layers import passthrough_group_mismatch

# The search stops at a deterministic effort (CP-SAT's deterministic time, the same on every
# machine, so a network always gets the same placement), with wall time only as a backstop.
# The vendor's largest demo network (the 116-layer FPN detector) reaches the objective it would
# reach in 10 s at 1.0; corpus networks finish well below.
EFFORT_LIMIT = 2.0
TIME_LIMIT_S = 60.0


@dataclass
class Solution:
    instance: dict[int, int]  # block -> first memory instance
    word: dict[int, int]  # block -> offset in words
    optimal: bool


def member_map(problem: Problem, block: Block, member: Member, instance: int) -> int:
    """The processor map of one member when its block starts at memory `instance`."""
    return problem_member_map(problem.shared, block, member, instance)


def block_map(problem: Problem, block: Block, instance: int) -> int:
    result = 0
    for member in block.members:
        result |= member_map(problem, block, member, instance)
    return result


def reader_map(problem: Problem, layer: int, instance_of: dict[int, int]) -> int:
    """The `processors` of a layer, given the blocks' first instances."""
    reader = problem.readers[layer]
    block = problem.blocks[problem.block_of[reader.tensors[0]]]
    start = instance_of[block.index]
    if reader.kind == CONCAT:
        return block_map(problem, block, start)
    result = member_map(problem, block, block.member(reader.tensors[0]), start)
    if reader.processors is not None:  # a `read_gap` reader: some processors of its source
        result = _lowest(result, reader.skip, reader.processors)
    return result


def _lowest(bits: int, skip: int, count: int) -> int:
    """`count` set bits of `bits` after its `skip` lowest ones."""
    result = 0
    while bits and count:
        low = bits & -bits
        bits ^= low
        if skip:
            skip -= 1
            continue
        result |= low
        count -= 1
    return result


def passthrough_ok(problem: Problem, in_map: int, out_map: int) -> bool:
    """A passthrough layer writes each quadrant's channels packed into the same quadrant."""
    per = problem.device.processors_per_group
    return passthrough_group_mismatch(in_map, out_map, per, problem.max_proc // per) is None


def candidates(problem: Problem, block: Block) -> list[int]:
    if block.fixed_map is not None:
        return [0]
    if block.fixed_processor is not None:
        return [block.fixed_processor // problem.shared]
    if block.chw:  # one processor (the first) of each instance
        last = (problem.max_proc - 1) // problem.shared - block.processors + 1
    else:
        last = (problem.max_proc - block.processors) // problem.shared
    return list(range(last + 1))


def solve(
    problem: Problem,
    kernel_capacity: list[int],
    forbidden: dict[int, set[int]] | None = None,
    **round_options,
) -> Solution:
    """An optimal (or, past the search effort, the best found) placement; error if none exists
    (one round of a `Search`; see `Search.solve` for the options)."""
    return Search(problem).solve(kernel_capacity, forbidden, **round_options)


class Search:
    """The placement search of one problem, over the rounds `place` runs: the CP-SAT model is
    built once, on the first round the rule of simple.py cannot settle; each later round adds
    what it restricts (lower kernel capacity, forbidden starts, the allocator's columns, refuted
    combinations) and switches what it relaxes by fixing a literal (calcx4 kernels apart, the
    larger kernel memory of each group's first processor, layers writing over their input)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.model = None
        self.rounds = 0

    def solve(
        self,
        kernel_capacity: list[int],
        forbidden: dict[int, set[int]] | None = None,
        *,
        kernel_columns: bool = False,
        calcx4_apart: bool = True,
        nogoods: list[dict[int, int]] | None = None,
        first_processor_room: bool = False,
        in_place: bool = False,
    ) -> Solution:
        """One round: a small plain network's first round is settled by a rule that proves its
        answer optimal (simple.py), without starting the solver."""
        self.rounds += 1
        plain = not (forbidden or kernel_columns or nogoods or first_processor_room or in_place)
        if self.rounds == 1 and plain and calcx4_apart:
            proven = proven_placement(self.problem, kernel_capacity)
            if proven is not None:
                return Solution(instance=proven.instance, word=proven.word, optimal=True)
        if self.model is None:
            self.model = _Model(self.problem, max(kernel_capacity))
        return self.model.solve(
            kernel_capacity,
            forbidden or {},
            columns=kernel_columns,
            apart=calcx4_apart,
            nogoods=nogoods or [],
            first_room=first_processor_room,
            in_place=in_place,
        )


def _fix(model, literal, value: bool) -> None:
    """Fix a Boolean of the model (a switch between rounds; presolve drops what it disables)."""
    domain = model.Proto().variables[literal.Index()].domain
    domain[0] = domain[1] = int(value)


class _Model:
    """The CP-SAT model (see the module docstring) and what the rounds have added to it."""

    def __init__(self, problem: Problem, top: int) -> None:
        """`top`: the largest kernel capacity of any memory (the first round's)."""
        from edgesynth.cpsat import cp_model as load_cp_model

        cp_model = load_cp_model()
        self.problem = problem
        self.model = model = cp_model.CpModel()
        words = problem.device.instance_words
        instances = problem.instances
        self.choice: dict[int, dict] = {}
        present: dict[tuple[int, int], object] = {}
        self.offset = offset = {}
        for block in problem.blocks:
            span = block.instances(problem.shared)
            if span > instances:
                raise _no_room(
                    problem,
                    block,
                    f"processors are short: it needs {span} memory instances ({block.processors} "
                    f"processors), the {problem.device.name} has {instances}",
                )
            options = candidates(problem, block)
            self.choice[block.index] = {q: model.NewBoolVar(f"b{block.index}q{q}") for q in options}
            model.AddExactlyOne(self.choice[block.index].values())
            fixed = None
            if block.fixed_map is not None:
                fixed = memory_instances(block.fixed_map | block.copies, problem.shared)
            for i in range(instances):
                if fixed is not None:
                    hits = list(self.choice[block.index].values()) if fixed >> i & 1 else []
                else:
                    hits = [v for q, v in self.choice[block.index].items() if q <= i < q + span]
                if hits:
                    present[block.index, i] = sum(hits)
            low, high = block.skip_words, words - block.words
            if block.fixed_word is not None:
                low = high = block.fixed_word
            if high < low:
                raise _no_room(
                    problem,
                    block,
                    f"data memory is short by {block.words + block.skip_words - words:,} words: "
                    f"it takes {block.words + block.skip_words:,} words in each memory instance "
                    f"it spans, an instance holds {words:,}; {DATA_ADVICE}",
                )
            offset[block.index] = model.NewIntVar(low, high, f"b{block.index}off")
            for q, runs in problem.allowed.get(block.index, {}).items():
                if q not in self.choice[block.index]:
                    continue
                if not runs:
                    model.Add(self.choice[block.index][q] == 0)
                    continue
                domain = cp_model.Domain.FromIntervals([list(r) for r in runs])
                model.AddLinearExpressionInDomain(offset[block.index], domain).OnlyEnforceIf(
                    self.choice[block.index][q]
                )
        self.in_place = model.NewBoolVar("in_place")
        _keep_live_data_apart(model, problem, present, offset, instances, self.in_place)
        self.uses = _kernel_presence(problem, self.choice, present)
        self.worst = model.NewIntVar(0, top, "kernel_max")
        self.strict = model.NewBoolVar("strict_room")  # no use of the first processors' extra
        self.capacity: list[int | None] = [None] * instances
        self.room = False
        self._kernel_sums(worst_only=True)
        self.apart = model.NewBoolVar("calcx4_apart")
        self._calcx4_apart()
        self.columns = None  # the allocator's column starts, once a round asks for them
        self.nogoods = 0
        self.forbidden: set[tuple[int, int]] = set()
        for layer in problem.passthrough:
            _tie_passthrough(model, problem, layer, self.choice)
        _separate_banks(model, problem, offset)
        # Quadrant 0 drives the accelerator: some layer must use it.
        per = problem.device.processors_per_group // problem.shared
        model.AddBoolOr(
            [model.NewConstant(0)]
            + [
                _as_bool(model, present[b.index, i])
                for b in problem.blocks
                for i in range(per)
                if (b.index, i) in present
            ]
        )
        self.peak = model.NewIntVar(0, words, "peak")
        for block in problem.blocks:
            model.Add(self.peak >= offset[block.index] + block.words)
        self.lowest = sum(q * v for c in self.choice.values() for q, v in c.items())
        self.cycles = _passthrough_cycles(problem, self.choice)
        self.latency_cap = None  # the last round's bound on `cycles`

    def _terms(self, i: int):
        """The kernel words in memory `i`: all of them, and those of layers enabling more than
        the first processor of each instance."""
        here = [(self.problem.kernels[n], lit) for (n, j), lit in self.uses.items() if j == i]
        return [u.words * lit for u, lit in here], [
            u.words * lit for u, lit in here if not u.first_only
        ]

    def _first_of_group(self, i: int) -> bool:
        device = self.problem.device
        extra = device.mask_width_large - device.mask_width_small
        return bool(extra) and i % (device.processors_per_group // self.problem.shared) == 0

    def _kernel_sums(self, *, worst_only: bool = False, capacity: list[int] | None = None):
        """The fullest kernel memory (`worst_only`), or the capacity of each memory: without the
        first processors' extra words while `strict`, with them after."""
        model = self.model
        extra = self.problem.device.mask_width_large - self.problem.device.mask_width_small
        for i in range(self.problem.instances):
            terms, others = self._terms(i)
            if not terms:
                continue
            first = self._first_of_group(i)
            if worst_only:
                if first:
                    if others:
                        model.Add(sum(others) <= self.worst).OnlyEnforceIf(self.strict.Not())
                    model.Add(sum(terms) <= self.worst).OnlyEnforceIf(self.strict)
                else:
                    model.Add(sum(terms) <= self.worst)
                continue
            cap = capacity[i]
            if first:
                model.Add(sum(terms) <= cap).OnlyEnforceIf(self.strict)
                if self.room:
                    if others:
                        model.Add(sum(others) <= cap)
                    model.Add(sum(terms) <= cap + extra)
            else:
                model.Add(sum(terms) <= cap)

    def _calcx4_apart(self) -> None:
        """The vendor's allocator reserves calcx4 kernels as if they were ordinary ones, but
        they land spread over the four quarters of kernel memory: keep them apart from the
        others (unless the caller proves each placement on the virtual device instead)."""
        kernels, uses = self.problem.kernels, self.uses
        x4 = [n for n, u in enumerate(kernels) if u.calcx4]
        plain = [n for n, u in enumerate(kernels) if not u.calcx4]
        for i in range(self.problem.instances):
            for a in x4:
                for b in plain:
                    if (a, i) in uses and (b, i) in uses and kernels[a].block != kernels[b].block:
                        self.model.Add(uses[a, i] + uses[b, i] <= 1).OnlyEnforceIf(self.apart)

    def _round(self, capacity, forbidden, columns, apart, nogoods, first_room, in_place) -> None:
        """Add what this round restricts, and switch what it relaxes."""
        problem, model = self.problem, self.model
        for block in problem.blocks:
            options = self.choice[block.index]
            banned = forbidden.get(block.index, set())
            if not set(options) - banned:
                raise _no_room(
                    problem,
                    block,
                    "every memory instance it could start at makes the kernel allocator overlap "
                    "two layers' kernels; give its readers' `processors` by hand",
                )
            for q in banned & set(options):
                if (block.index, q) not in self.forbidden:
                    self.forbidden.add((block.index, q))
                    model.Add(options[q] == 0)
        if first_room and not self.room:
            self.room = True
            self.capacity = [None] * problem.instances  # the relaxed sums, once
        capacity_changed = list(capacity) != self.capacity
        if capacity_changed:
            self.capacity = list(capacity)
            self._kernel_sums(capacity=self.capacity)
        if columns and self.columns is None:
            self.columns = _allocator_columns(model, problem, self.uses, capacity)
        elif self.columns is not None and capacity_changed:
            _column_capacity(model, problem, self.uses, self.columns, capacity)
        for nogood in nogoods[self.nogoods :]:  # combinations the virtual device refuted
            model.AddBoolOr(
                [self.choice[b][q].Not() for b, q in nogood.items() if q in self.choice.get(b, {})]
            )
        self.nogoods = len(nogoods)
        _fix(model, self.strict, not self.room)
        _fix(model, self.apart, apart)
        _fix(model, self.in_place, in_place)
        if self.latency_cap is not None:
            _fix(model, self.latency_cap, False)
            self.latency_cap = None

    def solve(self, capacity, forbidden, *, columns, apart, nogoods, first_room, in_place):
        from edgesynth.cpsat import cp_model as load_cp_model

        cp_model = load_cp_model()
        problem, model = self.problem, self.model
        self._round(capacity, forbidden, columns, apart, nogoods, first_room, in_place)
        words = problem.device.instance_words
        span_q = problem.instances * len(problem.blocks) + 1
        solver = new_solver(seconds=TIME_LIMIT_S, effort=EFFORT_LIMIT, seed=1)
        if self.cycles is not None:  # first the latency the placement decides, then the rest
            model.Minimize(self.cycles)
            status = solver.Solve(model)
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                raise _infeasible(problem, status == cp_model.INFEASIBLE, apart)
            self.latency_cap = model.NewBoolVar("latency_cap")
            model.Add(self.cycles <= round(solver.ObjectiveValue())).OnlyEnforceIf(self.latency_cap)
            _fix(model, self.latency_cap, True)
        model.Minimize((self.worst * (words + 1) + self.peak) * span_q + self.lowest)
        status = solver.Solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise _infeasible(problem, status == cp_model.INFEASIBLE, apart)
        return Solution(
            instance={
                b: next(q for q, v in c.items() if solver.BooleanValue(v))
                for b, c in self.choice.items()
            },
            word={b: solver.Value(v) for b, v in self.offset.items()},
            optimal=status == cp_model.OPTIMAL,
        )


def _kernel_presence(problem: Problem, choice, present) -> dict:
    """(kernel use index, memory instance) -> 1 when the use's layer has kernels there.

    A layer has kernels in every instance its input block spans, except a `read_gap` reader,
    which enables only the first instances of its source's block."""
    result = {}
    for n, use in enumerate(problem.kernels):
        block = problem.blocks[use.block]
        for i in range(problem.instances):
            if (use.block, i) not in present:
                continue
            if use.span is None or block.fixed_map is not None:
                result[n, i] = present[use.block, i]
                continue
            hits = [v for q, v in choice[use.block].items() if q <= i < q + use.span]
            if hits:
                result[n, i] = sum(hits)
    return result


def kernel_instances(problem: Problem, use: KernelUse, first: int) -> range:
    """The memory instances where `use` has kernels when its block starts at `first`."""
    block = problem.blocks[use.block]
    return range(first, first + (use.span or block.instances(problem.shared)))


def _allocator_columns(model, problem: Problem, uses, capacity: list[int]) -> dict:
    """Kernel columns as the vendor's allocator hands them out (a stricter model, used once
    the per-memory word count was not enough): layers that enable every processor first, then
    the others in layer order; a layer's columns are the same in all its processors, start on
    a multiple of 4 and lie above those of every earlier layer sharing a memory instance with
    it. The allocator also fills holes below, so a placement feasible here is feasible there."""
    everywhere = {
        b.index for b in problem.blocks if b.instances(problem.shared) >= problem.instances
    }
    order = sorted(
        range(len(problem.kernels)),
        key=lambda n: (problem.kernels[n].block not in everywhere, problem.kernels[n].layer),
    )
    top = max(capacity)
    start = {n: model.NewIntVar(0, top // 4, f"kcol{n}") for n in order}
    _column_capacity(model, problem, uses, start, capacity)
    for position, n in enumerate(order):
        u = problem.kernels[n]
        for m in order[:position]:
            k = problem.kernels[m]
            common = [i for i in range(problem.instances) if (m, i) in uses and (n, i) in uses]
            if not common:
                continue
            after = start[m] + (k.words + 3) // 4
            if k.block == u.block and k.span is None and u.span is None:
                model.Add(start[n] >= after)
                continue
            share = model.NewBoolVar(f"kshare{m}_{n}")
            for i in common:
                model.Add(share >= uses[m, i] + uses[n, i] - 1)
            model.Add(start[n] >= after).OnlyEnforceIf(share)
    return start


def _column_capacity(model, problem: Problem, uses, start, capacity: list[int]) -> None:
    """Each layer's columns end within the capacity of every memory it has kernels in."""
    for n, u in enumerate(problem.kernels):
        if n not in start:
            continue
        for i in range(problem.instances):
            if (n, i) in uses:
                lit = _as_bool(model, uses[n, i])
                model.Add(4 * start[n] + u.words <= capacity[i]).OnlyEnforceIf(lit)


def _keep_live_data_apart(
    model, problem: Problem, present, offset, instances: int, in_place
) -> None:
    """Two blocks alive at a common step that share a memory instance share no word.

    Only pairs whose lifetimes overlap are constrained (a sequential network has a few per
    block), each with one Boolean "shares an instance" implied by the presence literals."""
    blocks = problem.blocks
    for n, a in enumerate(blocks):
        for b in blocks[n + 1 :]:
            if a.dies < b.born or b.dies < a.born:
                continue
            common = [
                i for i in range(instances) if (a.index, i) in present and (b.index, i) in present
            ]
            if not common:
                continue
            shared = model.NewBoolVar(f"share{a.index}.{b.index}")
            for i in common:
                model.Add(shared >= present[a.index, i] + present[b.index, i] - 1)
            a_low = offset[a.index] - a.skip_words
            b_low = offset[b.index] - b.skip_words
            below = model.NewBoolVar(f"below{a.index}.{b.index}")
            above = model.NewBoolVar(f"above{a.index}.{b.index}")
            model.Add(offset[a.index] + a.words <= b_low).OnlyEnforceIf(below)
            model.Add(offset[b.index] + b.words <= a_low).OnlyEnforceIf(above)
            options = [below, above]
            for first, second in ((a, b), (b, a)):  # a layer writing over its own input
                margin = problem.in_place.get((first.index, second.index))
                if margin is not None:  # allowed in the rounds that switch `in_place` on
                    trails = model.NewBoolVar(f"inplace{first.index}.{second.index}")
                    model.AddImplication(trails, in_place)
                    model.Add(offset[second.index] + margin <= offset[first.index]).OnlyEnforceIf(
                        trails
                    )
                    options.append(trails)
            model.AddBoolOr(options).OnlyEnforceIf(shared)


def _separate_banks(model, problem: Problem, offset) -> None:
    """Read-ahead: input and output in different banks at both ends; every streaming
    read-ahead layer's input buffer in a bank of its own."""
    if not problem.read_ahead:
        return
    words = problem.device.instance_words
    bank = words // problem.device.instance_banks

    def bank_of(expr, name: str):
        value = model.NewIntVar(0, words, name)
        model.Add(value == expr)
        result = model.NewIntVar(0, problem.device.instance_banks, name + "_bank")
        model.AddDivisionEquality(result, value, bank)
        return result

    def first_input(layer: int):
        reader = problem.readers[layer]
        source = problem.blocks[problem.block_of[reader.tensors[0]]]
        extra = source.member(reader.tensors[0]).word if reader.kind == SINGLE else 0
        return offset[source.index] + extra + reader.extra_words

    streaming = {
        i: bank_of(first_input(i), f"s{i}")
        for i in problem.net.order
        if problem.net.layers[i].streaming
    }
    for ra in problem.read_ahead:
        reader = problem.readers[ra.layer]
        source = problem.blocks[problem.block_of[reader.tensors[0]]]
        own = problem.blocks[problem.block_of[ra.layer]]
        extra = source.member(reader.tensors[0]).word if reader.kind == SINGLE else 0
        first_in = offset[source.index] + extra + reader.extra_words
        first_out = offset[own.index] + own.member(ra.layer).word
        in_start = bank_of(first_in, f"ra{ra.layer}is")
        out_start = bank_of(first_out, f"ra{ra.layer}os")
        model.Add(in_start != out_start)
        in_end = bank_of(first_in + ra.in_words - 1, f"ra{ra.layer}ie")
        out_end = bank_of(first_out + ra.out_words - 1, f"ra{ra.layer}oe")
        model.Add(in_end != out_end)
        if ra.layer in streaming:
            for other, start in streaming.items():
                if other != ra.layer:
                    model.Add(streaming[ra.layer] != start)


def _as_bool(model, expr):
    flag = model.NewBoolVar("")
    model.Add(expr >= 1).OnlyEnforceIf(flag)
    model.Add(expr == 0).OnlyEnforceIf(flag.Not())
    return flag


def passthrough_slots(problem: Problem, layer: int, in_map: int) -> int:
    """Output time slots per pixel of a passthrough layer: its fullest quadrant's words."""
    width = problem.net.layers[layer].output_width
    per = problem.device.processors_per_group
    mask = (1 << per) - 1
    counts = [popcount(in_map >> g * per & mask) for g in range(problem.max_proc // per)]
    return 1 + max((passthrough_slot_index(c, width) for c in counts if c), default=0)


def _passthrough_cycles(problem: Problem, choice):
    """The cycles of the passthrough layers that depend on the placement (None: no such layer).

    A passthrough layer spends one cycle per output time slot for every pooled pixel and input
    pass (the vendor's latency model); the slots are the words its fullest quadrant moves.
    """
    terms = []
    for layer in problem.passthrough:
        h = problem.net.layers[layer]
        if h.operation != "none":
            continue
        source = problem.blocks[problem.block_of[problem.readers[layer].tensors[0]]]
        weight = h.pooled_dim[0] * h.pooled_dim[1] * input_passes(h, problem.max_proc)
        slots = {
            q: passthrough_slots(problem, layer, reader_map(problem, layer, {source.index: q}))
            for q in choice[source.index]
        }
        if len(set(slots.values())) > 1:
            terms += [weight * n * choice[source.index][q] for q, n in slots.items()]
    return sum(terms) if terms else None


def _tie_passthrough(model, problem: Problem, layer: int, choice) -> None:
    """Allowed (input block start, output block start) pairs of a passthrough layer."""
    reader = problem.readers[layer]
    source = problem.blocks[problem.block_of[reader.tensors[0]]]
    target = problem.blocks[problem.block_of[layer]]
    member = target.member(layer)
    if source.index == target.index:
        for q, v in choice[source.index].items():
            if not passthrough_ok(
                problem,
                reader_map(problem, layer, {source.index: q}),
                member_map(problem, target, member, q),
            ):
                model.Add(v == 0)
        return
    for q_in, v_in in choice[source.index].items():
        in_map = reader_map(problem, layer, {source.index: q_in})
        for q_out, v_out in choice[target.index].items():
            if not passthrough_ok(problem, in_map, member_map(problem, target, member, q_out)):
                model.AddBoolOr([v_in.Not(), v_out.Not()])


def _no_room(problem: Problem, block: Block, why: str) -> EdgesynthError:
    names = ", ".join(tensor_name(problem.net, m.tensor) for m in block.members)
    return EdgesynthError(f"cannot place {names}: {why}.", file=problem.net.spec.path)


def _infeasible(problem: Problem, proven: bool, calcx4_apart: bool = True) -> EdgesynthError:
    what = "no placement exists" if proven else "no placement was found within the search effort"
    mixed = any(u.calcx4 for u in problem.kernels) and not all(u.calcx4 for u in problem.kernels)
    if mixed and calcx4_apart:
        return Unplaceable(
            f"automatic placement does not handle this mix of calcx4 and other layers: {what} "
            "that keeps the calcx4 layers' kernels on processors of their own (the vendor's "
            "kernel allocator would overlap them with the other layers' kernels); use calcx4 on "
            "every layer or on none, or give the placement by hand.",
            file=problem.net.spec.path,
        )
    if problem.decisions:
        needs = "; ".join(d.describe() for d in problem.decisions)
        return EdgesynthError(
            f"{what} for this network on the {problem.device.name} that gives the layer "
            f"sequence it declares ({needs}): the outputs that must (or must not) reach the "
            "snoop units' addresses collide with other live data; give the placement of the "
            "layers around them by hand.",
            file=problem.net.spec.path,
        )
    short = shortages(problem)
    if short:
        return EdgesynthError(
            f"{what} for this network on the {problem.device.name}: {'; '.join(short)}.",
            file=problem.net.spec.path,
        )
    return EdgesynthError(
        f"{what} for this network on the {problem.device.name}: the layers' data and kernels "
        f"cannot be arranged together, though no resource is short on its own ({usage(problem)}"
        "); make the largest tensors smaller, or give some placement keys (`processors`, "
        "`out_offset`) by hand.",
        file=problem.net.spec.path,
    )


__all__ = [
    "CONCAT",
    "ELTWISE",
    "SINGLE",
    "Solution",
    "block_map",
    "member_map",
    "reader_map",
    "solve",
]
