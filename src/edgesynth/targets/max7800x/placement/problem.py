"""What the placement search decides, built from a network whose layers may lack placement keys.

Every tensor the network passes between layers (the input, each layer's output) lives in the
data memory of the processors that read it. Tensors that one layer reads together share a
*block*: the parts of a concatenation sit on consecutive processors at one offset; the operands
of an element-wise layer sit on the same processors, interleaved word by word (operand `j` at
`offset + 4 j` bytes, written with `write_gap` = operands - 1). Any other tensor is a block of
its own. The search chooses, per block, its first memory instance (four processors each; the
block's processors then follow from its members' channel counts; each part of a concatenation
starts a memory instance of its own) and its word offset.

A block occupies, in every memory instance it touches, the words from its offset for its size,
from the step its first member is written until the step its last reader runs. Two blocks that
share an instance and a step must not share a word. Each layer with weights needs kernel words in
every processor it enables. Everything the user gave (`processors`, `output_processors`,
`in_offset`, `out_offset`, `write_gap`) is a constraint, never changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.buffers import DATA_BUFFER
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer, Network
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.placement.buffers import buffer_of, buffer_words
from edgesynth.targets.max7800x.rules import (
    Context,
    RuleOptions,
    ffs,
    hw_input_dim,
    hw_kernel,
    input_bytes,
    input_passes,
    input_processors_needed,
    kernel_words,
    output_bytes,
    output_passes,
    output_pixels,
    output_processors_needed,
    output_skip_bytes,
    popcount,
    stream_rollover,
)
from edgesynth.targets.max7800x.rules.sizes import ceil_div
from edgesynth.targets.max7800x.rules.text import layer_name

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.snoop_unit import SnoopUnit

SINGLE, CONCAT, ELTWISE, PASSES = "single", "concat", "eltwise", "passes"
INTERLEAVED = (ELTWISE, PASSES)  # parts on the same processors, one word each per pixel


@dataclass
class Member:
    """One tensor inside its block."""

    tensor: int  # producing layer, or NETWORK_INPUT
    channels: int  # processors it occupies (one per channel and pass)
    first_processor: int  # relative to the block's first processor
    word: int  # relative to the block's offset (element-wise operand position)
    write_gap: int  # words its producer skips after each word


@dataclass
class Block:
    index: int
    members: list[Member]
    chw: bool  # the network input read as CHW: one channel per memory instance
    words: int  # words per memory instance, from the block's offset
    skip_words: int  # words written before the offset (folded dilated conv1d)
    born: int  # step at which the first member is written (0: the input, before layer 1)
    dies: int  # last step at which a member is read
    fixed_map: int | None = None  # the processor map, when the hardware fixes it (FIFO input)
    copies: int = 0  # processors the block also occupies (--fast-fifo-quad: every quadrant)
    fixed_processor: int | None = None  # first processor, when the user fixed a map
    fixed_word: int | None = None  # offset in words, when the user fixed one
    fixed_by: list[str] = field(default_factory=list)  # what fixed them, for messages

    @property
    def processors(self) -> int:
        """Processors the block spans (CHW: memory instances, one processor each)."""
        return max(m.first_processor + m.channels for m in self.members)

    def instances(self, shared: int) -> int:
        """Memory instances the block spans from its first one."""
        if self.fixed_map is not None:
            return 1 + ((self.fixed_map | self.copies).bit_length() - 1) // shared
        return self.processors if self.chw else ceil_div(self.processors, shared)

    def member(self, tensor: int) -> Member:
        return next(m for m in self.members if m.tensor == tensor)


@dataclass
class Reader:
    """How one layer reads its input: which tensors, in which layout."""

    layer: int
    kind: str  # SINGLE, CONCAT, ELTWISE or PASSES (a concatenation read in several passes)
    tensors: list[int]
    processors: int | None = None  # a `read_gap` reader: how many processors of its source
    skip: int = 0  # ... after skipping the first `skip` (`in_channel_skip`)
    extra_words: int = 0  # words past its source's start where it reads (`buffer_shift`)


@dataclass
class KernelUse:
    layer: int
    block: int  # the block the layer reads
    words: int  # kernel words in each processor it enables
    calcx4: bool = False  # kernels spread over the four quarters of kernel memory (MAX78002)
    span: int | None = None  # memory instances it enables from the block's first (None: all)
    first_only: bool = False  # it enables only the first processor of each instance it uses


@dataclass
class ReadAhead:
    """A layer that reads ahead: its input and output must start, and end, in different banks."""

    layer: int
    in_words: int
    out_words: int


@dataclass
class Decision:
    """What the units in `units` must decide in `layer`: trigger (any of them) or not (none)
    (placement/snoop.py finds them and the offsets that give them)."""

    layer: int
    units: list[SnoopUnit]
    trigger: bool
    why: str  # the declaration that asks for it, for messages

    def describe(self) -> str:
        names = " or ".join(f"snoop unit {u.unit}" for u in self.units)
        verb = "trigger" if self.trigger else "stay quiet"
        return f"{names} must {verb} in layer {self.layer} ({self.why})"


@dataclass
class Problem:
    net: Network
    device: Device
    max_proc: int
    blocks: list[Block]
    block_of: dict[int, int]  # tensor -> block
    readers: dict[int, Reader]  # layer -> how it reads
    kernels: list[KernelUse]
    steps: int  # last step (the host reads the outputs after it)
    passthrough: list[int]  # passthrough and depthwise layers (output map tied to input map)
    read_ahead: list[ReadAhead] = field(default_factory=list)
    # (input block, output block) -> words the output must start below the input for the
    # layer to write over its own input (see `in_place_margins`)
    in_place: dict[tuple[int, int], int] = field(default_factory=dict)
    # block -> first memory instance -> the (first, last) word offsets it may take there (the
    # snoop units' decisions, placement/snoop.py); a block or instance not listed: any offset
    allowed: dict[int, dict[int, list[tuple[int, int]]]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)  # the snoop decisions behind it

    @property
    def shared(self) -> int:
        return self.device.processors_sharing_memory

    @property
    def instances(self) -> int:
        return ceil_div(self.max_proc, self.shared)


def label(layer: Layer) -> str:
    """`layer 3`, or `layer 3 (conv2)` for a named layer."""
    return f"layer {layer_name(layer)}"


class Unplaceable(EdgesynthError):
    """The network uses a feature the planner does not place; the YAML must give the keys."""


def _crop_words(net: Network, layer: Layer, sources: list[int], max_proc: int) -> int:
    """Words past its source's start where a layer with `in_crop` reads: the dropped top rows
    (HWC: one word per pixel and pass; a Conv1d row is one step)."""
    top = layer.in_crop[0]
    if not top and not layer.in_crop[1]:
        return 0
    if len(sources) != 1 or sources[0] in (NETWORK_INPUT, DATA_BUFFER):
        raise Unplaceable(
            f"{label(layer)} crops (`in_crop`) the network input or several inputs; automatic "
            "placement crops only the output of one layer.",
            file=net.spec.path,
        )
    source = net.layers[sources[0]]
    cols = 1 if source.is_1d else source.out_dim[1]
    return top * cols * output_passes(source, max_proc)


def _predecessors(net: Network) -> dict[int, int]:
    """The layer (or the network input) each layer reads when it names none: the one before it
    in the run the known answer follows (`simulated_sequence` may skip layers a snoop unit
    passes by), else the one before it in the hardware's order (layers the run skips are
    configured all the same)."""
    previous: dict[int, int] = {}
    for sequence in (net.order, net.sim_order):  # the run wins
        for position, index in enumerate(sequence):
            previous[index] = sequence[position - 1] if position else NETWORK_INPUT
    return previous


def _sources(net: Network, index: int, previous: dict[int, int]) -> list[int]:
    layer = net.layers[index]
    if layer.in_sequences:
        return list(layer.in_sequences)
    return [previous[index]]


def build_problem(net: Network, device: Device, options: RuleOptions) -> Problem:
    """The blocks, readers and kernel needs of `net`; `Unplaceable` for features not handled."""
    max_proc = options.max_proc or device.processors
    ctx = Context(net, device, options)
    order = net.order
    step = {index: i + 1 for i, index in enumerate(order)}
    final_step = len(order) + 1  # the host reads the outputs after the last layer
    channels, words, skip = _tensor_sizes(net, device, max_proc)
    buffer = _data_buffer(net, order, channels, words, skip, max_proc)
    readers, last_read = _readers(net, step, channels, words, max_proc, device)
    blocks, block_of = _blocks(
        net, readers, channels, words, skip, max_proc, device.processors_sharing_memory, buffer
    )
    _lifetimes(net, blocks, block_of, step, last_read, options, device)
    _streaming(net, ctx, readers, blocks, block_of, step)
    kernels = _kernel_uses(net, ctx, readers, blocks, block_of, channels, max_proc, options)
    problem = Problem(
        net=net,
        device=device,
        max_proc=max_proc,
        blocks=blocks,
        block_of=block_of,
        readers=readers,
        kernels=kernels,
        steps=final_step,
        passthrough=_tie_passthrough(net, readers, blocks, block_of),
        read_ahead=_read_ahead(net, ctx, device, max_proc),
        in_place=in_place_margins(net, ctx, readers, blocks, block_of, step, max_proc),
    )
    _fix_given(problem)
    return problem


def _tensor_sizes(
    net: Network, device: Device, max_proc: int
) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Per tensor (the input, each layer's output): the processors it occupies, its words per
    memory instance, and the words written before its offset."""
    shared = device.processors_sharing_memory
    channels: dict[int, int] = {}  # tensor -> processors it occupies
    words: dict[int, int] = {}
    skip: dict[int, int] = {}
    first = net.layers[net.order[0]]
    channels[NETWORK_INPUT] = input_processors_needed(first, max_proc, shared)
    words[NETWORK_INPUT] = 0
    skip[NETWORK_INPUT] = 0
    for index in net.order:
        layer = net.layers[index]
        channels[index] = output_processors_needed(layer, max_proc, shared)
        words[index] = ceil_div(output_bytes(layer, device, max_proc), 4)
        skip[index] = ceil_div(output_skip_bytes(layer, device), 4)
    return channels, words, skip


def _readers(
    net: Network,
    step: dict[int, int],
    channels: dict[int, int],
    words: dict[int, int],
    max_proc: int,
    device: Device,
) -> tuple[dict[int, Reader], dict[int, int]]:
    """How each layer reads its input, and the last step each tensor is read. A plain reader
    widens its source to what it reads; `read_gap` readers are checked once every tensor's
    layout is known."""
    shared = device.processors_sharing_memory
    readers: dict[int, Reader] = {}
    last_read: dict[int, int] = {}
    gap_readers: list[tuple[Layer, int]] = []
    previous = _predecessors(net)
    for index in net.order:
        layer = net.layers[index]
        sources = _sources(net, index, previous)
        for s in sources:
            if s not in (NETWORK_INPUT, DATA_BUFFER) and s not in step:
                raise Unplaceable(
                    f"{label(layer)} reads layer {s}, which does not run; automatic "
                    "placement needs every input to be produced by a running layer.",
                    file=net.spec.path,
                )
            last_read[s] = max(last_read.get(s, 0), step[index])
        need = input_processors_needed(layer, max_proc, shared)
        kind = _reader_kind(net, layer, sources, need, max_proc)
        extra = layer.buffer_shift + _crop_words(net, layer, sources, max_proc)
        readers[index] = Reader(index, kind, sources, extra_words=extra)
        if kind == SINGLE and layer.read_gap:
            gap_readers.append((layer, need))
        elif kind == SINGLE:
            s = sources[0]
            if channels[s] != need and s != NETWORK_INPUT:
                raise Unplaceable(
                    f"{label(layer)} reads {need} processors' worth of channels from a "
                    f"tensor that occupies {channels[s]}; automatic placement needs them equal.",
                    file=net.spec.path,
                )
            channels[s] = max(channels[s], need)
            words[s] = max(words[s], ceil_div(input_bytes(layer, max_proc), 4))
    interleaved = {  # tensor -> the parts it is interleaved with (its words per pixel)
        t: len(r.tensors) for r in readers.values() if r.kind in INTERLEAVED for t in r.tensors
    }
    for layer, need in gap_readers:
        _gap_reader(net, layer, readers[layer.index], need, channels, max_proc, interleaved)
    return readers, last_read


def _reader_kind(net: Network, layer: Layer, sources: list[int], need: int, max_proc: int) -> str:
    """SINGLE, ELTWISE, PASSES (checked: one part per pass) or CONCAT."""
    if len(sources) == 1:
        return SINGLE
    if layer.eltwise is not None:
        return ELTWISE
    if input_passes(layer, max_proc) > 1:
        _pass_parts(net, layer, sources, need, max_proc)
        return PASSES
    return CONCAT


def _lifetimes(
    net: Network,
    blocks: list[Block],
    block_of: dict[int, int],
    step: dict[int, int],
    last_read: dict[int, int],
    options: RuleOptions,
    device: Device,
) -> None:
    """Each block's first and last step, and the network input's FIFO map and layout."""
    order = net.order
    final_step = len(order) + 1
    first = net.layers[order[0]]
    # what the host reads after the run: the last layer, `output: true` layers, and the last
    # layer of the known-answer simulation (`simulated_sequence` may end elsewhere)
    run = {NETWORK_INPUT, *(net.sim_order or order)}
    outputs = {order[-1], *(i for i in order if net.layers[i].output)}
    if net.sim_order:
        outputs.add(net.sim_order[-1])
    for block in blocks:
        if block.index == block_of.get(DATA_BUFFER):
            block.born, block.dies = 0, final_step  # kept from one inference to the next
            continue
        block.born = min(0 if m.tensor == NETWORK_INPUT else step[m.tensor] for m in block.members)
        if not any(m.tensor in run or m.tensor in outputs for m in block.members):
            # only layers the run skips write it (a snoop unit passes them by): never read
            block.dies = block.born
            continue
        block.dies = max(
            final_step if m.tensor in outputs else last_read.get(m.tensor, final_step)
            for m in block.members
        )
        if any(m.tensor == NETWORK_INPUT for m in block.members):
            block.chw = first.data_format == "CHW"
            if options.uses_fifo:
                block.fixed_map = fifo_map(first.in_channels, block.chw, device)
            if options.fast_fifo_quad:  # layer 0 runs in all four quadrants at once
                per = device.processors_per_group
                block.copies = sum(block.fixed_map << g * per for g in range(1, 4))


def _kernel_uses(
    net: Network,
    ctx: Context,
    readers: dict[int, Reader],
    blocks: list[Block],
    block_of: dict[int, int],
    channels: dict[int, int],
    max_proc: int,
    options: RuleOptions,
) -> list[KernelUse]:
    """The kernel words each layer with weights needs in every processor it enables."""
    device, order = ctx.device, net.order
    shared = device.processors_sharing_memory
    kernels = []
    for index in order:
        layer = net.layers[index]
        out_map = (1 << channels[index]) - 1
        if layer.weight_source is not None:
            continue
        quad = options.fast_fifo_quad and index == order[0]
        need = kernel_words(layer, out_map, max_proc, shared, quad, hw_kernel(ctx, layer))
        if need:
            x4 = ctx.calcx4(layer) and device.supports_calcx4
            reader = readers[index]
            source = blocks[block_of[reader.tensors[0]]]
            enabled = reader.processors
            span = None if enabled is None else ceil_div(reader.skip + enabled, shared)
            first_only = source.fixed_map is None and (
                source.chw
                or (
                    len(source.members) == 1
                    and source.members[0].first_processor == 0
                    and (enabled or source.members[0].channels) == 1
                    and reader.skip == 0
                )
            )
            kernels.append(KernelUse(index, source.index, need, x4, span, first_only))
    return kernels


def _tie_passthrough(
    net: Network, readers: dict[int, Reader], blocks: list[Block], block_of: dict[int, int]
) -> list[int]:
    """Layers that move each channel within its quadrant (passthrough and depthwise layers);
    one reading a fixed map writes the same map."""
    passthrough = [
        i for i in net.order if net.layers[i].operation == "none" or net.layers[i].groups > 1
    ]
    for index in passthrough:
        source = blocks[block_of[readers[index].tensors[0]]]
        own = blocks[block_of[index]]
        if (
            source.fixed_map is not None
            and own.fixed_map is None
            and len(own.members) == 1
            and popcount(source.fixed_map) == own.members[0].channels
        ):
            own.fixed_map = source.fixed_map
    return passthrough


def _read_ahead(net: Network, ctx: Context, device: Device, max_proc: int) -> list[ReadAhead]:
    """The layers that read ahead, with their input and output sizes."""
    read_ahead = []
    if device.supports_read_ahead:
        for index in net.order:
            layer = net.layers[index]
            if not ctx.read_ahead(layer):
                continue
            rows, cols = hw_input_dim(layer, device)
            in_words = layer.operands * input_passes(layer, max_proc) * rows * cols
            out_words = output_passes(layer, max_proc) * output_pixels(layer, device)
            read_ahead.append(ReadAhead(index, in_words, out_words))
    return read_ahead


@dataclass
class BufferPlan:
    """The data buffer as a block: its map and offset are given; the layers that shift it or
    insert into it write inside it (tensor -> word from its start)."""

    processors: int
    word: int
    words: int
    members: dict[int, int]


def _data_buffer(
    net: Network,
    order: list[int],
    channels: dict[int, int],
    words: dict[int, int],
    skip: dict[int, int],
    max_proc: int,
) -> BufferPlan | None:
    buffer = buffer_of(net.spec)
    if buffer is None:
        return None
    size = buffer_words(buffer, net.spec)
    if buffer.channels > max_proc or buffer.offset % 4:
        raise Unplaceable(
            f"data buffer `{buffer.name}`: automatic placement places a buffer of at most "
            f"{max_proc} channels at a word offset; give the placement by hand.",
            file=net.spec.path,
            line=buffer.line,
            key="data_buffer",
        )
    channels[DATA_BUFFER] = popcount(buffer.processors)
    words[DATA_BUFFER] = size
    skip[DATA_BUFFER] = 0
    members = {DATA_BUFFER: 0}
    for index in order:
        layer = net.layers[index]
        if layer.buffer_shift:
            members[index] = 0
        elif layer.buffer_insert:
            members[index] = size - layer.buffer_insert
    return BufferPlan(buffer.processors, buffer.offset // 4, size, members)


def _pass_parts(net: Network, layer: Layer, sources: list[int], need: int, max_proc: int) -> None:
    """A concatenation wider than one pass: the layer reads pass `j` of every pixel from word
    `j` on all its `need` processors, so part `j` must be exactly one pass (a narrower part
    would leave words the layer reads unwritten), written with one word per pixel and
    `write_gap` = parts - 1 (the vendor's UNet decoders do this by hand)."""
    passes = input_passes(layer, max_proc)
    widths = [net.layers[s].out_channels if s >= 0 else -1 for s in sources]
    if min(sources) < 0 or len(sources) != passes or any(w != need for w in widths):
        raise Unplaceable(
            f"{label(layer)} concatenates {layer.in_channels} channels in {passes} passes of "
            f"{need} processors from parts of {', '.join(map(str, widths))} channels; automatic "
            "placement does not handle a concatenation wider than one pass unless each part "
            f"is exactly one pass ({need} channels) yet.",
            file=net.spec.path,
        )


def _gap_reader(
    net: Network,
    layer: Layer,
    reader: Reader,
    need: int,
    channels: dict[int, int],
    max_proc: int,
    interleaved: dict[int, int],
) -> None:
    """A layer with `read_gap` g reads every (g + 1)-th word of its source: on the source's
    first processors, the source's first pass of every pixel when g + 1 is the number of words
    per pixel the source's block holds (its passes, or the parts it is interleaved with: an
    element-wise operand read plainly too, as the vendor's MAX78002 residual networks do).
    Anything else reads words the network graph does not name."""
    source = reader.tensors[0]
    if source < 0:  # NETWORK_INPUT or DATA_BUFFER
        raise Unplaceable(
            f"{label(layer)} reads {tensor_name(net, source)} with `read_gap` {layer.read_gap}; "
            "automatic placement reads with a gap only from a layer's output.",
            file=net.spec.path,
        )
    producer = net.layers[source]
    parts = interleaved.get(source, 1)
    if parts > 1 and output_passes(producer, max_proc) > 1:
        raise Unplaceable(
            f"{label(layer)} reads with `read_gap` {layer.read_gap} the output of "
            f"{label(producer)}, which is both multi-pass and interleaved; automatic placement "
            "does not handle that yet.",
            file=net.spec.path,
        )
    per_pixel = output_passes(producer, max_proc) * parts
    skip = layer.spec.in_channel_skip or 0
    if layer.read_gap + 1 != per_pixel or skip + need > channels[source]:
        raise Unplaceable(
            f"`read_gap` {layer.read_gap} reads every {layer.read_gap + 1} words, but "
            f"{tensor_name(net, source)} writes {per_pixel} word(s) per pixel on "
            f"{channels[source]} processors; automatic placement does not handle a gap that "
            f"reads other than the first pass (`read_gap` {per_pixel - 1}, at most "
            f"{channels[source]} processors' worth of channels with `in_channel_skip`) yet.",
            file=net.spec.path,
            line=layer.spec.lines.get("read_gap", layer.spec.line),
            layer=layer.index,
            layer_name=layer.spec.name,
            key="read_gap",
        )
    reader.processors = need
    reader.skip = skip


def in_place_margins(
    net: Network,
    ctx: Context,
    readers: dict[int, Reader],
    blocks: list[Block],
    block_of: dict[int, int],
    step: dict[int, int],
    max_proc: int,
) -> dict[tuple[int, int], int]:
    """Layers that may write their output over their own input (the vendor's hand placements
    do this to fit large temporal networks on the MAX78000).

    The layer produces output pixels in raster order, each after reading the input it needs,
    and writes pixel p at word O + p x so (so: output words per pixel) while its input pixel q
    lies at I + q x si. For a stride-1 convolution that keeps the size (pad P on each side of a
    K = 2P + 1 kernel, W columns, no pooling), the outputs after p still read input pixels from
    p + 1 - P (W + 1) on. So writing pixel p never reaches input still to be read when
    O + (p + 1) so <= I + (p + 1 - P (W + 1)) si for every p, which for si >= so is
    O <= I - (P (W + 1) si - (si - so)): the output starts that margin below the input (or
    lower). Only when the layer is the input's last reader, one tensor in and one out (one
    output pass), HWC, no gaps, streaming or FIFO."""
    result: dict[tuple[int, int], int] = {}
    for index in net.order:
        layer = net.layers[index]
        reader = readers[index]
        source = reader.tensors[0]
        if reader.kind != SINGLE or source == DATA_BUFFER or reader.processors is not None:
            continue
        a, b = blocks[block_of[source]], blocks[block_of[index]]
        if a is b or len(a.members) != 1 or len(b.members) != 1:
            continue
        if a.chw or b.chw or a.skip_words or b.skip_words or a.fixed_map or b.fixed_map:
            continue
        if a.dies != step[index] or b.born != step[index] or ctx.options.uses_fifo:
            continue
        if layer.streaming or layer.read_gap or layer.write_gap or layer.operands != 1:
            continue
        cols = layer.in_dim[1]
        kh, kw = layer.kernel_size if not layer.is_1d else (layer.kernel_size[0], 1)
        pad_h, pad_w = layer.pad
        same = layer.out_dim == layer.in_dim and layer.pooled_dim == layer.in_dim
        if not same or layer.pool != (1, 1) or layer.stride != (1, 1):
            continue
        if layer.operation != "none" and (kh != 2 * pad_h + 1 or kw != 2 * pad_w + 1):
            continue
        si = input_passes(layer, max_proc)
        so = output_passes(layer, max_proc)
        if so != 1:  # one output word per pixel: the write order is the pixel order
            continue
        reach = 0 if layer.operation == "none" else max(pad_h, pad_w) * (cols + 1)
        result[a.index, b.index] = reach * si - (si - so)
    return result


def fifo_map(channels: int, chw: bool, device: Device) -> int:
    """The processors FIFO input reaches: FIFO `f` feeds the first processors of quadrant `f`,
    one channel each (CHW) or four channels packed in a word (HWC)."""
    per_fifo = 1 if chw else device.processors_sharing_memory
    result = 0
    for c in range(channels):
        result |= 1 << (device.processors_per_group * (c // per_fifo) + c % per_fifo)
    return result


def _streaming(
    net: Network,
    ctx: Context,
    readers: dict[int, Reader],
    blocks: list[Block],
    block_of: dict[int, int],
    step: dict[int, int],
) -> None:
    """Streaming layers run at the same time, each reading a circular buffer of its input.

    With FIFO input, a streaming layer keeps only `rollover` words of its input (the buffer is
    `rollover` + 1 words: the vendor's bound is inclusive); its output may not come closer to
    that buffer than the buffer's own size. Everything the streaming layers read or write is
    alive from the start until the last streaming layer is done.
    """
    streaming = [i for i in net.order if net.layers[i].streaming]
    if not streaming:
        return
    end = max(step[i] for i in streaming)
    buffers = {}
    for index in streaming:
        layer = net.layers[index]
        source = readers[index].tensors
        if len(source) != 1:
            raise Unplaceable(
                f"streaming {label(layer)} reads several tensors; automatic placement "
                "streams only single-input layers.",
                file=net.spec.path,
            )
        source_block = blocks[block_of[source[0]]]
        if ctx.options.uses_fifo:
            if len(source_block.members) != 1 or _read_by_others(readers, source[0], index):
                raise Unplaceable(
                    f"the input of streaming {label(layer)} is also read by another layer; "
                    "automatic placement needs a streaming layer's input for itself.",
                    file=net.spec.path,
                )
            buffers[index] = stream_rollover(ctx, layer) + 1
            source_block.words = buffers[index]
    touched = set()
    for index in streaming:
        source_block = blocks[block_of[readers[index].tensors[0]]]
        own = blocks[block_of[index]]
        own.words = max(own.words, buffers.get(index, 0))
        touched |= {source_block.index, own.index}
    for b in touched:  # the vendor's bounds are inclusive: keep one word between neighbours
        blocks[b].words += 1
        blocks[b].born = 0
        blocks[b].dies = max(blocks[b].dies, end)


def _read_by_others(readers: dict[int, Reader], tensor: int, layer: int) -> bool:
    return any(tensor in r.tensors for r in readers.values() if r.layer != layer)


def tensor_name(net: Network, tensor: int) -> str:
    if tensor == NETWORK_INPUT:
        return "the network input"
    if tensor == DATA_BUFFER:
        return f"the data buffer `{net.spec.data_buffer[0].name}`"
    return f"the output of {label(net.layers[tensor])}"


def _blocks(
    net: Network,
    readers: dict[int, Reader],
    channels: dict[int, int],
    words: dict[int, int],
    skip: dict[int, int],
    max_proc: int,
    shared: int,
    buffer: BufferPlan | None = None,
) -> tuple[list[Block], dict[int, int]]:
    """One block per group of tensors read together, one for the data buffer, one for every
    other tensor; and the block of each tensor."""
    groups, grouped = _reader_groups(net, readers, buffer)
    _check_plain_reads(net, readers, grouped)
    blocks: list[Block] = []
    block_of: dict[int, int] = {}

    def add(block: Block, tensors: list[int]) -> None:
        for t in tensors:
            block_of[t] = block.index
        blocks.append(block)

    for reader in groups:
        block = _group_block(net, reader, channels, words, skip, max_proc, shared, len(blocks))
        add(block, reader.tensors)
    if buffer is not None:
        add(_buffer_block(buffer, channels, len(blocks)), list(buffer.members))
    read = {t for r in readers.values() for t in r.tensors}
    for t in [NETWORK_INPUT, *net.order]:
        if t in block_of:
            continue
        # an output no layer reads keeps the write gap the YAML gives it (its words spaced)
        gap = (net.layers[t].spec.write_gap or 0) if t >= 0 and t not in read else 0
        block = Block(
            index=len(blocks),
            members=[Member(t, channels[t], 0, 0, gap)],
            chw=False,
            words=words[t] * (gap + 1),
            skip_words=skip[t],
            born=0,
            dies=0,
        )
        add(block, [t])
    return blocks, block_of


def _reader_groups(
    net: Network, readers: dict[int, Reader], buffer: BufferPlan | None
) -> tuple[list[Reader], dict[int, tuple[int, Reader]]]:
    """The readers of several tensors, one per group (a group read the same way by several
    layers counts once), and tensor -> (position, the reader grouping it). A tensor must be in
    one group, read one way."""
    grouped: dict[int, tuple[int, Reader]] = {}  # tensor -> (position, the reader grouping it)
    groups: list[Reader] = []
    for reader in readers.values():
        if reader.kind == SINGLE:
            continue
        if buffer is not None and any(t in buffer.members for t in reader.tensors):
            raise Unplaceable(
                f"{label(net.layers[reader.layer])} reads the data buffer together with other "
                "tensors; automatic placement reads the buffer only on its own.",
                file=net.spec.path,
            )
        same = [grouped[t][1] for t in reader.tensors if t in grouped]
        if (
            same
            and all(r.kind == reader.kind and r.tensors == reader.tensors for r in same)
            and len(same) == len(reader.tensors)
        ):
            continue  # another layer reads the same group the same way
        if same or len(set(reader.tensors)) != len(reader.tensors):
            layer = net.layers[reader.layer]
            raise Unplaceable(
                f"{label(layer)} reads a tensor that another layer reads in a different "
                "layout (concatenated or interleaved with other tensors); automatic placement "
                "needs each tensor in one layout.",
                file=net.spec.path,
            )
        groups.append(reader)
        for position, t in enumerate(reader.tensors):
            grouped[t] = (position, reader)
    return groups, grouped


def _check_plain_reads(
    net: Network, readers: dict[int, Reader], grouped: dict[int, tuple[int, Reader]]
) -> None:
    """No layer reads as one tensor what another reads interleaved (a `read_gap` reader does:
    `_gap_reader` checks it)."""
    for reader in readers.values():
        t = reader.tensors[0]
        gap = net.layers[reader.layer].read_gap  # checked against the parts by _gap_reader
        if reader.kind == SINGLE and t in grouped and grouped[t][1].kind in INTERLEAVED and not gap:
            layer, source = net.layers[reader.layer], tensor_name(net, t)
            raise Unplaceable(
                f"{label(layer)} reads {source} as it is, but "
                f"{label(net.layers[grouped[t][1].layer])} reads it interleaved with other "
                "element-wise operands; the hardware cannot read interleaved data as one "
                "tensor: add a passthrough layer (`op: none`) that copies it for one of them.",
                file=net.spec.path,
            )


def _group_block(
    net: Network,
    reader: Reader,
    channels: dict[int, int],
    words: dict[int, int],
    skip: dict[int, int],
    max_proc: int,
    shared: int,
    index: int,
) -> Block:
    """The block of the tensors one layer reads together: interleaved operands (or passes) on
    the same processors, or the parts of a concatenation each from a new memory instance."""
    layer = net.layers[reader.layer]
    members = []
    at = 0
    k = len(reader.tensors)
    if reader.kind == ELTWISE:
        counts = {channels[t] for t in reader.tensors}
        if len(counts) != 1:
            raise Unplaceable(
                f"{label(layer)} adds operands of different widths; element-wise "
                "operands need the same channel count.",
                file=net.spec.path,
            )
    for j, t in enumerate(reader.tensors):
        if reader.kind in INTERLEAVED:
            members.append(Member(t, channels[t], 0, j, k - 1))
        else:  # every part starts a memory instance: unaligned output maps waste kernels
            at = ceil_div(at, shared) * shared
            members.append(Member(t, channels[t], at, 0, 0))
            at += channels[t]
    if reader.kind == CONCAT and at > max_proc:
        widths = ", ".join(str(channels[t]) for t in reader.tensors)
        raise Unplaceable(
            f"{label(layer)} concatenates parts of {widths} channels; with each part "
            f"starting a memory instance ({shared} processors) they need {at} processors, "
            f"more than the {max_proc} there are; automatic placement does not handle "
            "unaligned parts yet.",
            file=net.spec.path,
        )
    size = max(words[t] for t in reader.tensors)
    size = size * k if reader.kind in INTERLEAVED else size
    size = max(size, ceil_div(input_bytes(layer, max_proc), 4))
    return Block(
        index=index,
        members=members,
        chw=False,
        words=size,
        skip_words=max(skip[t] for t in reader.tensors),
        born=0,
        dies=0,
    )


def _buffer_block(buffer: BufferPlan, channels: dict[int, int], index: int) -> Block:
    """The data buffer's block: its map and offset are given."""
    block = Block(
        index=index,
        members=[Member(t, channels[t], 0, w, 0) for t, w in buffer.members.items()],
        chw=False,
        words=buffer.words,
        skip_words=0,
        born=0,
        dies=0,
        fixed_map=buffer.processors,
        fixed_word=buffer.word,
    )
    block.fixed_by.append("`data_buffer`")
    return block


def _fix_given(problem: Problem) -> None:
    """Turn the keys the YAML gives into fixed block positions (and check they agree)."""
    net = problem.net
    for index in net.order:
        layer = net.layers[index]
        reader = problem.readers[index]
        first_block = problem.blocks[problem.block_of[reader.tensors[0]]]
        if layer.processors is not None:
            read = (
                first_block.members
                if reader.kind == CONCAT
                else [first_block.member(reader.tensors[0])]
            )
            _fix_map(problem, first_block, layer, "processors", layer.processors, read)
        if layer.in_offset is not None:
            word = first_block.member(reader.tensors[0]).word + reader.extra_words
            _fix_word(problem, first_block, layer, "in_offset", layer.in_offset, word)
        own = problem.blocks[problem.block_of[index]]
        member = own.member(index)
        if layer.output_processors is not None:
            _fix_map(problem, own, layer, "output_processors", layer.output_processors, [member])
        if layer.spec.out_offset is not None:
            _fix_word(problem, own, layer, "out_offset", layer.spec.out_offset, member.word)
        if layer.spec.write_gap is not None and layer.spec.write_gap != member.write_gap:
            raise _given_error(
                net,
                layer,
                "write_gap",
                f"{layer.spec.write_gap}, but this layer's output is "
                + (
                    f"part {member.word} of {member.write_gap + 1} interleaved parts (element-wise "
                    f"operands or passes), which needs `write_gap: {member.write_gap}`"
                    if member.write_gap
                    else "read as it is, which needs `write_gap: 0`"
                ),
            )
    if net.spec.output_map is not None:
        final = net.layers[net.order[-1]]
        own = problem.blocks[problem.block_of[final.index]]
        member = own.member(final.index)
        _fix_map(problem, own, final, "output_map", net.spec.output_map, [member])


def _given_error(net: Network, layer: Layer, key: str, message: str) -> EdgesynthError:
    return layer.error(
        message + "; change it or leave it out for edgesynth to choose.",
        key=key,
        file=net.spec.path,
    )


def _fix_map(
    problem: Problem, block: Block, layer: Layer, key: str, value: int, members: list[Member]
) -> None:
    """Fix `block`'s first processor so that `members` occupy exactly the map `value`."""
    shared = problem.shared
    relative = 0  # the members' map with the block at memory instance 0
    for m in members:
        relative |= member_map(shared, block, m, 0)
    shift = ffs(value) - ffs(relative)
    if shift < 0 or value != relative << shift or shift % shared:
        layout = "one processor per memory instance" if block.chw else "consecutive processors"
        raise Unplaceable(
            f"{label(layer)}: `{key}` {value:#018x}: automatic placement keeps a given map only "
            f"in the layout it uses ({layout}, {relative:#x} shifted by a multiple of {shared} "
            "processors); give every layer's placement by hand, or leave this key out.",
            file=problem.net.spec.path,
            line=layer.spec.lines.get(key, layer.spec.line),
        )
    if block.fixed_processor is not None and block.fixed_processor != shift:
        raise _given_error(
            problem.net,
            layer,
            key,
            f"{value:#018x} disagrees with {block.fixed_by[-1]}, which places the same data on "
            "other processors",
        )
    block.fixed_processor = shift
    block.fixed_by.append(f"`{key}` of {label(layer)}")


def member_map(shared: int, block: Block, member: Member, instance: int) -> int:
    """The processor map of one member when its block starts at memory `instance`."""
    if block.fixed_map is not None:
        return block.fixed_map
    if block.chw:
        first = instance + member.first_processor
        return sum(1 << (shared * (first + i)) for i in range(member.channels))
    first = instance * shared + member.first_processor
    return ((1 << member.channels) - 1) << first


def _fix_word(
    problem: Problem, block: Block, layer: Layer, key: str, value: int, relative: int
) -> None:
    if value % 4:
        raise _given_error(problem.net, layer, key, f"{value:#06x} is not a multiple of 4")
    word = value // 4 - relative
    if block.fixed_word is not None and block.fixed_word != word:
        raise _given_error(
            problem.net,
            layer,
            key,
            f"{value:#06x} disagrees with {block.fixed_by[-1]}, which places the same data at "
            f"{4 * (block.fixed_word + relative):#06x}",
        )
    block.fixed_word = word
    block.fixed_by.append(f"`{key}` of {label(layer)}")
