"""Why no placement exists: what the network needs more of than the device has, whatever the
placement, named by resource, amount and layer.

Each check is a bound every placement the search allows obeys (see solve.py), so a shortage it
reports is real:

* kernel memory: the layers whose input spans every memory instance enable processors in all
  of them, so their kernels stack in every processor's kernel memory;
* kernel memory in all: each layer's kernel words times the memory instances it enables, against
  all of them;
* data memory: at each step, the live tensors that span every memory instance stack in each of
  them, and any other live tensor lies in one of those instances too;
* data memory in all: at each step, every live tensor's words times the instances it spans.

A layer may write over its own input (`Problem.in_place`): two such tensors overlap by at most
what the margin allows, and the bounds subtract that.
"""

from __future__ import annotations

from edgesynth.targets.max7800x.placement.problem import (
    Block,
    KernelUse,
    Problem,
    label,
    tensor_name,
)
from edgesynth.targets.max7800x.rules.sizes import memory_instances, popcount

KERNEL_ADVICE = "use fewer channels or layers, or weights of fewer bits"
DATA_ADVICE = "pool earlier, or use a smaller input or fewer channels"


def shortages(problem: Problem) -> list[str]:
    """One sentence per resource the network is short of (empty: none is, on these bounds)."""
    found = [_kernels_everywhere(problem) or _kernels_in_all(problem), _data(problem)]
    return [s for s in found if s]


def usage(problem: Problem) -> str:
    """The least each resource's fullest part must hold (when no bound explains a failure)."""
    step, need, _ = max(_data_steps(problem), key=lambda t: t[1])
    kernels = _kernel_stack(problem)[0]
    return (
        f"at the fullest, a memory instance holds at least {need:,} of its {_words(problem):,} "
        f"data words ({_when(problem, step)}) and a processor at least {kernels:,} of its "
        f"{problem.device.mask_width_small:,} kernel words"
    )


def _words(problem: Problem) -> int:
    return problem.device.instance_words


def _spans(problem: Problem, block: Block) -> int:
    """Memory instances the block occupies, wherever it starts."""
    if block.fixed_map is not None:
        return popcount(memory_instances(block.fixed_map | block.copies, problem.shared))
    return block.instances(problem.shared)


def _kernel_span(problem: Problem, use: KernelUse) -> int:
    """Memory instances a layer enables processors in (see solve._kernel_presence)."""
    block = problem.blocks[use.block]
    if block.fixed_map is not None or use.span is None:
        return _spans(problem, block)
    return use.span


def _and(items: list[str]) -> str:
    return " and ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else items[0]


def _layers(problem: Problem, layers: list[int]) -> str:
    names = [label(problem.net.layers[i]) for i in layers]
    if len(names) > 4:
        return f"{names[0]} to {names[-1]} ({len(names)} layers)"
    return _and(names)


def _kernel_stack(problem: Problem) -> tuple[int, list[int], int | None]:
    """Kernel words every processor holds (layers enabling all instances), those layers, and
    the layer at which they pass one processor's kernel memory (None: they do not)."""
    limit = problem.device.mask_width_small
    total, layers, first_over = 0, [], None
    for use in problem.kernels:
        if use.first_only or _kernel_span(problem, use) < problem.instances:
            continue
        total += use.words
        layers.append(use.layer)
        if total > limit and first_over is None:
            first_over = use.layer
    return total, layers, first_over


def _kernels_everywhere(problem: Problem) -> str | None:
    total, layers, first_over = _kernel_stack(problem)
    limit = problem.device.mask_width_small
    if first_over is None:
        return None
    return (
        f"kernel memory is short by {total - limit:,} words per processor: "
        f"{_layers(problem, layers)} read inputs spread over all {problem.instances} memory "
        f"instances ({problem.max_proc} processors), so processors in every instance must hold "
        f"their {total:,} kernel words; a processor holds "
        f"{limit:,}, and they run out at {label(problem.net.layers[first_over])}; "
        f"{KERNEL_ADVICE}"
    )


def _kernels_in_all(problem: Problem) -> str | None:
    need = sum(use.words * _kernel_span(problem, use) for use in problem.kernels)
    per = problem.device.mask_width_large
    have = problem.instances * per
    if need <= have:
        return None
    return (
        f"kernel memory is short by {need - have:,} words: the layers' kernels need {need:,} "
        f"words counted once per memory instance (of {problem.shared} processors) they enable, "
        f"and the {problem.instances} instances' processors hold {per:,} each; {KERNEL_ADVICE}"
    )


def _overlap(problem: Problem, first: Block, second: Block) -> int:
    """The most words two blocks may share (a layer writing over its own input)."""
    for a, b in ((first, second), (second, first)):
        margin = problem.in_place.get((a.index, b.index))
        if margin is not None:  # b (the output) starts at least `margin` words below a
            size_a, size_b = a.words + a.skip_words, b.words + b.skip_words
            return max(0, min(size_a, size_b, b.words + a.skip_words - margin))
    return 0


def _stacked(problem: Problem, blocks: list[Block]) -> int:
    """Words the blocks take when they share one memory instance (in-place overlaps taken)."""
    total = sum(b.words + b.skip_words for b in blocks)
    for n, a in enumerate(blocks):
        for b in blocks[n + 1 :]:
            total -= _overlap(problem, a, b)
    return total


def _data_steps(problem: Problem) -> list[tuple[int, int, list[Block]]]:
    """Per step: the words some memory instance must hold, and the blocks that make them up."""
    rows = []
    for step in range(problem.steps + 1):
        live = [b for b in problem.blocks if b.born <= step <= b.dies]
        wide = [b for b in live if _spans(problem, b) >= problem.instances]
        narrow = [b for b in live if b not in wide]
        best = wide
        for other in narrow:  # it lies in some instance, which holds every wide block too
            if _stacked(problem, [*wide, other]) > _stacked(problem, best):
                best = [*wide, other]
        rows.append((step, _stacked(problem, best), best))
    return rows


def _when(problem: Problem, step: int) -> str:
    order = problem.net.order
    if step == 0:
        return "before the first layer runs"
    if step > len(order):
        return "when the host reads the outputs"
    return f"while {label(problem.net.layers[order[step - 1]])} runs"


def _data(problem: Problem) -> str | None:
    words = _words(problem)
    step, need, blocks = max(_data_steps(problem), key=lambda t: t[1])
    if need > words:
        parts = [
            f"{tensor_name(problem.net, b.members[0].tensor)} ({b.words + b.skip_words:,} words"
            + (", in every instance" if _spans(problem, b) >= problem.instances else "")
            + ")"
            for b in sorted(blocks, key=lambda b: b.born)
        ]
        return (
            f"data memory is short by {need - words:,} words {_when(problem, step)}: "
            f"{_and(parts)} must share a memory instance, which holds {words:,} words "
            f"({words * 4:,} bytes); {DATA_ADVICE}"
        )
    return _data_in_all(problem)


def _data_in_all(problem: Problem) -> str | None:
    have = problem.instances * _words(problem)
    worst = (0, 0)
    for step in range(problem.steps + 1):
        live = [b for b in problem.blocks if b.born <= step <= b.dies]
        need = sum((b.words + b.skip_words) * _spans(problem, b) for b in live)
        for n, a in enumerate(live):
            for b in live[n + 1 :]:
                need -= _overlap(problem, a, b) * min(_spans(problem, a), _spans(problem, b))
        worst = max(worst, (need, step))
    need, step = worst
    if need <= have:
        return None
    return (
        f"data memory is short by {need - have:,} words {_when(problem, step)}: the live "
        f"tensors need {need:,} words over all memory instances, the {problem.instances} "
        f"instances hold {have:,}; {DATA_ADVICE}"
    )
