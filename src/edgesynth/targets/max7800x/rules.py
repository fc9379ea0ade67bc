"""Device rules for MAX78000 / MAX78002: every limit a network must respect to run on the chip.

`check_network(net, device, options)` runs every rule over the layers the network executes and
raises all violations together (`MultipleErrors`, or the single `EdgesynthError`). Each error
names the YAML file and line, the layer (index and name), the YAML key and the values that would
be accepted. `find_violations` returns the same list without raising. `check_spec(spec, device)`
runs the few rules that need only the YAML (layer count, offset ranges); call it before building
the network, as the vendor does, so a configuration too broken to build is refused for them.
`option_violations` runs only the global rules (options, device features).

The rules are small functions registered in `LAYER_RULES` (called once per executed layer) and
`NETWORK_RULES` (called once per network: whole-network resources, global options). Every rule
runs, so one pass reports every problem.

The derived quantities the hardware works with (passes, processors per pass, bytes per
data-memory instance, kernel words per processor, streaming buffer sizes) are public helper
functions so the resource planner and the code generator compute them the same way.

Conventions of the IR this module relies on (see `build.py`):
- `in_channels` is the channel count of one operand (element-wise layers take `operands` inputs
  of that many channels), and for `flatten` layers the channel count before flattening;
- `processors`, `output_processors`, `in_offset` are as configured (None: not placed yet; rules
  that need them are skipped); `out_offset` defaults to 0;
- `output_shift` is the total shift (YAML/checkpoint value + 8 - weight bits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir.network import NETWORK_INPUT, Layer, Network
from edgesynth.ir.spec import LayerSpec, NetworkSpec
from edgesynth.targets.max7800x.device import Device

# ------------------------------------------------------------------------------------------------
# Options that change what is legal


@dataclass(frozen=True)
class RuleOptions:
    """The command-line options the rules depend on (names follow the vendor's `ai8xize.py`)."""

    fifo: bool = False  # --fifo
    fast_fifo: bool = False  # --fast-fifo (implies --fifo)
    fast_fifo_quad: bool = False  # --fast-fifo-quad (implies --fast-fifo)
    start_layer: int = 0  # --start-layer
    avg_pool_rounding: bool = False  # --avg-pool-rounding (no restriction; kept for callers)
    simple1b: bool = False  # --simple1b (no restriction; kept for callers)
    calcx4: bool = False  # --calcx4: every layer
    rd_ahead: bool = False  # --read-ahead: every layer
    link_layer: bool = False  # --link-layer
    fifo_go: bool = False  # --fifo-go
    one_shot: bool = False  # --one-shot
    pipeline: bool | None = None  # --pipeline / --no-pipeline (None: device default)
    pll: bool | None = None  # --pll / --no-pll
    riscv: bool = False  # --riscv
    deepsleep: bool = False  # --deepsleep
    allow_streaming: bool = False  # --allow-streaming (streaming without a FIFO)
    max_proc: int | None = None  # --max-proc
    repeat_layers: int = 1  # --repeat-layers
    ignore_bias_groups: bool = False  # --ignore-bias-groups
    overwrite_ok: bool = False  # --overlap-data: streaming buffers may overlap
    no_error_stop: bool = False  # --no-error-stop: overlapping streaming input/output allowed
    ignore_hw_limits: bool = False  # --ignore-hw-limits
    increase_start: int = 2  # --increase-start (streaming prefill, MAX78000)
    increase_delta1: int = 0  # --increase-delta1
    increase_delta2: int = 0  # --increase-delta2
    override_start: int | None = None  # --override-start
    override_rollover: int | None = None  # --override-rollover
    override_delta2: int | None = None  # --override-delta2

    @classmethod
    def from_args(cls, args: Any) -> RuleOptions:
        """Take every field that `args` (e.g. izer_args.IzerOptions, a Namespace) has."""
        values = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
        return cls(**{k: v for k, v in values.items() if v is not None or k in _NULLABLE})

    @property
    def uses_fast_fifo(self) -> bool:
        return self.fast_fifo or self.fast_fifo_quad

    @property
    def uses_fifo(self) -> bool:
        return self.fifo or self.uses_fast_fifo


_NULLABLE = {
    "pipeline",
    "pll",
    "max_proc",
    "override_start",
    "override_rollover",
    "override_delta2",
}


# ------------------------------------------------------------------------------------------------
# Bit helpers


def popcount(value: int) -> int:
    return bin(value).count("1")


def ffs(value: int) -> int:
    """Index of the lowest set bit (-1 for 0)."""
    return (value & -value).bit_length() - 1


def fls(value: int) -> int:
    """Index of the highest set bit (-1 for 0)."""
    return value.bit_length() - 1


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _hex(value: int) -> str:
    return f"0x{value:04x}"


def _map(value: int) -> str:
    return f"0x{value:016x}"


def _plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}{suffix}"


def _dims(dim: tuple[int, int], layer: Layer) -> str:
    return str(dim[0]) if layer.is_1d else f"{dim[0]}x{dim[1]}"


def memory_instances(processor_map: int, shared: int = 4) -> int:
    """Bit map of the data-memory instances the processors in `processor_map` read from."""
    result = 0
    p = 0
    while processor_map >> p:
        if processor_map >> p & 1:
            result |= 1 << p // shared
        p += 1
    return result


# ------------------------------------------------------------------------------------------------
# Derived quantities (shared with the planner and the code generator)


def passes(channels: int, max_proc: int = 64) -> int:
    """Passes ("multi-pass expansion") needed to process `channels` on `max_proc` processors."""
    return max(1, _ceil_div(channels, max_proc))


def processors_per_pass(channels: int, max_proc: int = 64, shared: int = 4) -> int:
    """Processors a map must enable for `channels` channels: one per channel and pass.

    With more channels than processors, each pass uses a multiple of 4 processors (one memory
    instance's worth), at most `max_proc`.
    """
    expand = passes(channels, max_proc)
    per_pass = _ceil_div(channels, expand)
    if channels > max_proc:
        per_pass = min(_ceil_div(per_pass, shared) * shared, max_proc)
    return per_pass


def input_passes(layer: Layer, max_proc: int = 64) -> int:
    return passes(layer.in_channels, max_proc)


def output_passes(layer: Layer, max_proc: int = 64) -> int:
    return passes(layer.out_channels, max_proc)


def input_processors_needed(layer: Layer, max_proc: int = 64) -> int:
    return processors_per_pass(layer.in_channels, max_proc)


def output_processors_needed(layer: Layer, max_proc: int = 64) -> int:
    return processors_per_pass(layer.out_channels, max_proc)


def dilated_conv1d_mode(layer: Layer, device: Device) -> str:
    """How the hardware runs a conv1d layer with `dilation` > 1.

    "none": not dilated; "stretch": the kernel is stretched with zeros (span below 9);
    "conv2d": the data is folded into `dilation` columns and run as a 3x3 conv2d (kernel length
    up to 3); "unsupported": neither works.
    """
    if not layer.is_1d or layer.dilation[0] <= 1:
        return "none"
    k, d = layer.kernel_size[0], layer.dilation[0]
    if (k - 1) * d < device.max_dilated_1d_span:
        return "stretch"
    if k <= device.max_dilation_1d_kernel:
        return "conv2d"
    return "unsupported"


def hw_input_dim(layer: Layer, device: Device) -> tuple[int, int]:
    """Input rows x columns as the hardware reads them."""
    if dilated_conv1d_mode(layer, device) == "conv2d":
        d = layer.dilation[0]
        return (_ceil_div(layer.in_dim[0], d), d)
    return layer.in_dim


def output_overhang(layer: Layer, device: Device) -> int:
    """Extra output pixels written by a dilated conv1d folded onto 3x3 hardware."""
    if dilated_conv1d_mode(layer, device) != "conv2d":
        return 0
    rows, cols = hw_input_dim(layer, device)
    return rows * cols - layer.out_dim[0]


def output_skip_bytes(layer: Layer, device: Device) -> int:
    """Bytes before `out_offset` a dilated conv1d (kernel 3) folded onto 3x3 hardware writes."""
    if dilated_conv1d_mode(layer, device) == "conv2d" and layer.kernel_size[0] == 3:
        return 4 * layer.dilation[0] * output_passes(layer, device.processors)
    return 0


def output_bytes(layer: Layer, device: Device, max_proc: int | None = None) -> int:
    """Bytes of one data-memory instance the layer's output occupies from `out_offset`.

    The output is always HWC: one 32-bit word holds 4 channels (8-bit output) or one channel
    (32-bit output), each memory instance serves 4 processors, and every output pass stores
    its own copy of the pixels.
    """
    mp = max_proc or device.processors
    pixels = layer.out_dim[0] * layer.out_dim[1] + output_overhang(layer, device)
    return pixels * output_passes(layer, mp) * 4 * layer.output_width // 8


def output_words_per_instance(layer: Layer, device: Device, max_proc: int | None = None) -> int:
    return output_bytes(layer, device, max_proc) // 4


def input_bytes(layer: Layer, max_proc: int = 64) -> int:
    """Bytes of one data-memory instance the layer's input occupies from `in_offset`.

    HWC packs 4 channels per 32-bit word (one word per pixel and pass); CHW gives each channel
    its own memory instance, 4 pixels per word. Element-wise operands are interleaved.
    """
    per_pixel = 1 if layer.data_format == "CHW" else 4
    return (
        layer.in_dim[0]
        * layer.in_dim[1]
        * input_passes(layer, max_proc)
        * layer.operands
        * per_pixel
    )


def input_words_per_instance(layer: Layer, max_proc: int = 64) -> int:
    return _ceil_div(input_bytes(layer, max_proc), 4)


def kernel_words(
    layer: Layer,
    output_map: int,
    max_proc: int = 64,
    quad: bool = False,
    kernel: tuple[int, int] | None = None,
) -> int:
    """Kernel-memory words (72 bits each) the layer needs in every processor it enables.

    `kernel` is the kernel as the hardware runs it (see `hw_kernel`; default: the layer's).
    Kernels for 1-, 2- and 4-bit weights pack 8, 4 and 2 to a byte position; the kernels of
    every output processor from the first (rounded down to its memory instance when there are
    several output passes) to the last are stored, once per input and output pass.
    """
    if layer.operation == "none" or layer.spec.bypass or output_map <= 0:
        return 0
    in_exp = input_passes(layer, max_proc)
    out_exp = output_passes(layer, max_proc)
    first = ffs(output_map)
    if out_exp > 1:
        first -= first % 4
    span = 1 + fls(output_map) - first
    if layer.flatten:
        per_kernel = (
            layer.in_channels
            * layer.pooled_dim[0]
            * layer.pooled_dim[1]
            // processors_per_pass(layer.in_channels, max_proc)
        )
        count = span * out_exp - (out_exp * popcount(output_map) - layer.out_channels)
        count *= per_kernel
    elif layer.groups == 1:
        count = span * out_exp * in_exp
    else:
        count = in_exp
    bits = layer.quantization
    qfactor = 8 // bits
    kh, kw = kernel or layer.kernel_size
    ksize = kh * kw
    padding_bits = (count % qfactor) * ksize * (qfactor - 1)
    words = (count * ksize * bits + padding_bits + 71) // 72
    return _ceil_div(words, 4) if quad else words


def has_bias(layer: Layer) -> bool:
    return layer.bias is not None and bool((layer.bias != 0).any())


def bias_bytes(layer: Layer, output_map: int, device: Device, max_proc: int = 64) -> int:
    """Bytes of one quadrant's bias memory a (non-depthwise) layer's bias values take."""
    if not has_bias(layer):
        return 0
    size = layer.out_channels + ffs(output_map) % 4 * output_passes(layer, max_proc)
    if layer.index == 0 and layer.streaming and not device.supports_stream_bias:
        size += 1  # the vendor's work-around for a streaming first layer on MAX78000
    return size


# ------------------------------------------------------------------------------------------------
# What a rule sees


@dataclass
class Context:
    net: Network
    device: Device
    options: RuleOptions

    @cached_property
    def max_proc(self) -> int:
        return self.options.max_proc or self.device.processors

    @cached_property
    def order(self) -> list[int]:
        return self.net.order or list(range(len(self.net.layers)))

    @property
    def start(self) -> int:
        return self.order[0]

    @property
    def final(self) -> int:
        return self.order[-1]

    @cached_property
    def previous(self) -> dict[int, int]:
        """Layer index -> the layer executed before it (-1 for the first)."""
        return {index: (self.order[i - 1] if i else -1) for i, index in enumerate(self.order)}

    @cached_property
    def layers(self) -> list[Layer]:
        """The executed layers, in execution order."""
        return [self.net.layers[i] for i in self.order]

    def layer(self, index: int) -> Layer:
        return self.net.layers[index]

    def streaming(self, index: int) -> bool:
        return 0 <= index < len(self.net.layers) and self.net.layers[index].streaming

    def calcx4(self, layer: Layer) -> bool:
        return bool(layer.spec.calcx4) or self.options.calcx4

    def read_ahead(self, layer: Layer) -> bool:
        return bool(layer.spec.readahead) or self.options.rd_ahead

    def in_offset(self, layer: Layer) -> int | None:
        if layer.in_offset is not None:
            return layer.in_offset
        if layer.index == self.start:
            return 0
        previous = self.previous.get(layer.index, -1)
        return self.net.layers[previous].out_offset if previous >= 0 else None

    def output_map(self, layer: Layer) -> int | None:
        """The output processor map the layer writes, with the vendor's defaults."""
        if layer.index == self.final:
            if self.net.spec.output_map is not None:
                return self.net.spec.output_map
            if layer.output_processors is not None:
                return layer.output_processors
            return (1 << output_processors_needed(layer, self.max_proc)) - 1
        if layer.output_processors is not None:
            return layer.output_processors
        following = layer.next_sequence
        if following is not None and 0 <= following < len(self.net.layers):
            return self.net.layers[following].processors
        return None

    def output_map_origin(self, layer: Layer) -> tuple[str, str]:
        """(YAML key, how the output map was chosen) for messages."""
        if layer.index == self.final and self.net.spec.output_map is not None:
            return "output_map", "the global `output_map`"
        if layer.output_processors is not None:
            return "output_processors", "`output_processors`"
        following_index = layer.next_sequence
        if layer.index == self.final or following_index is None or following_index < 0:
            return "output_processors", "the default output map of the final layer"
        following = self.net.layers[following_index]
        return (
            "output_processors",
            f"`output_processors` (not set, so the `processors` of layer "
            f"{_layer_name(following)}, which reads this output)",
        )

    def error(
        self, layer: Layer, key: str | None, message: str, line: int | None = None
    ) -> EdgesynthError:
        if line is None:
            line = layer.spec.lines.get(key, layer.spec.line) if key else layer.spec.line
        return EdgesynthError(
            message,
            file=self.net.spec.path,
            line=line,
            layer=layer.index,
            layer_name=layer.spec.name,
            key=key,
        )

    def global_error(self, key: str | None, message: str) -> EdgesynthError:
        line = self.net.spec.lines.get(key) if key else None
        return EdgesynthError(message, file=self.net.spec.path, line=line, key=key)


def _layer_name(layer: Layer) -> str:
    return f"{layer.index} ({layer.spec.name})" if layer.spec.name else str(layer.index)


LayerRule = Callable[[Context, Layer], Iterable[EdgesynthError]]
NetworkRule = Callable[[Context], Iterable[EdgesynthError]]

LAYER_RULES: list[LayerRule] = []
NETWORK_RULES: list[NetworkRule] = []


def layer_rule(fn: LayerRule) -> LayerRule:
    LAYER_RULES.append(fn)
    return fn


def network_rule(fn: NetworkRule) -> NetworkRule:
    NETWORK_RULES.append(fn)
    return fn


# ------------------------------------------------------------------------------------------------
# Entry points


def _rule_options(options: Any) -> RuleOptions:
    if options is None:
        return RuleOptions()
    if isinstance(options, RuleOptions):
        return options
    return RuleOptions.from_args(options)  # e.g. izer_args.IzerOptions


def find_violations(
    net: Network, device: Device, options: RuleOptions | Any | None = None
) -> list[EdgesynthError]:
    """Every violated device rule, in layer order, without raising.

    `options` is a `RuleOptions`, or any object with the same attribute names (such as the
    parsed vendor command line, `izer_args.IzerOptions`).
    """
    ctx = Context(net, device, _rule_options(options))
    found: list[EdgesynthError] = []
    for rule in NETWORK_RULES:
        found.extend(rule(ctx))
    for layer in ctx.layers:
        for layer_check in LAYER_RULES:
            found.extend(layer_check(ctx, layer))
    found.sort(key=lambda e: -1 if e.layer is None else e.layer)
    return found


def check_network(net: Network, device: Device, options: RuleOptions | Any | None = None) -> None:
    """Raise every violated device rule at once (nothing when the network fits the device)."""
    errors = find_violations(net, device, options)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MultipleErrors(errors)


def spec_violations(spec: NetworkSpec, device: Device) -> list[EdgesynthError]:
    """The rules that need only the YAML (before weights and shapes are known).

    The vendor checks these first, so a network too broken to build is still refused for them:
    the number of layers and the `out_offset`/`in_offset` ranges.
    """
    found: list[EdgesynthError] = []
    if len(spec.layers) > device.max_layers:
        found.append(
            _spec_error(
                spec,
                spec.layers[device.max_layers],
                None,
                _too_many_layers(len(spec.layers), device),
            )
        )
    for ls in spec.layers:
        for key in ("out_offset", "in_offset"):
            value = getattr(ls, key)
            if value is not None and not 0 <= value < device.max_out_offset:
                found.append(_spec_error(spec, ls, key, _offset_message(value, device)))
    return found


def check_spec(spec: NetworkSpec, device: Device) -> None:
    """Raise the `spec_violations` (call before building the network)."""
    errors = spec_violations(spec, device)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MultipleErrors(errors)


def _spec_error(spec: NetworkSpec, ls: LayerSpec, key: str | None, message: str) -> EdgesynthError:
    line = ls.lines.get(key, ls.line) if key else ls.line
    return EdgesynthError(
        message, file=spec.path, line=line, layer=ls.index, layer_name=ls.name, key=key
    )


def _too_many_layers(count: int, device: Device) -> str:
    return (
        f"the network describes {count} layers, but the {device.name} runs at most "
        f"{device.max_layers} (layers 0 to {device.max_layers - 1}); merge pooling and "
        "element-wise operations into neighbouring convolutions, or drop layers."
    )


def _offset_message(value: int, device: Device) -> str:
    limit = device.max_out_offset
    return (
        f"{_hex(value)} is outside the {device.name}'s data memory; offsets run from 0x0000 to "
        f"{_hex(limit - 1)} (and a layer's data must also fit in one "
        f"{device.instance_bytes:,}-byte memory instance from there)."
    )


def option_violations(
    net: Network, device: Device, options: RuleOptions | Any | None = None
) -> list[EdgesynthError]:
    """Only the global rules: options and network-wide features the device may lack."""
    ctx = Context(net, device, _rule_options(options))
    found: list[EdgesynthError] = []
    for rule in GLOBAL_RULES:
        found.extend(rule(ctx))
    return found


# ================================================================================================
# Layer rules: layer count and sequence


@network_rule
def yaml_layer_count(ctx: Context) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_layers
    if len(ctx.net.layers) > limit:
        layer = ctx.net.layers[limit]
        yield ctx.error(layer, None, _too_many_layers(len(ctx.net.layers), ctx.device))


def avgpool_reset_layers(ctx: Context) -> list[int]:
    """Layers before which the MAX78002 inserts a hidden layer (average pool after eltwise)."""
    if not ctx.device.requires_avgpool_reset_after_eltwise:
        return []
    result = []
    for layer in ctx.layers:
        previous = ctx.previous.get(layer.index, -1)
        if (
            layer.index > 0
            and previous >= 0
            and ctx.layer(previous).operands > 1
            and layer.pool_type == "avg"
        ):
            result.append(layer.index)
    return result


@network_rule
def hardware_layer_count(ctx: Context) -> Iterator[EdgesynthError]:
    hidden = len(avgpool_reset_layers(ctx))
    repeat = max(1, ctx.options.repeat_layers)
    used = repeat * (ctx.final + hidden)
    if used > ctx.device.max_layers and len(ctx.net.layers) <= ctx.device.max_layers:
        extra = (
            f" plus {hidden} hidden layer(s) the device inserts to reset average pooling after "
            "an element-wise layer"
            if hidden
            else ""
        )
        times = f", repeated {repeat} times" if repeat > 1 else ""
        yield ctx.error(
            ctx.layer(ctx.final),
            None,
            f"the network ends at layer {ctx.final}{extra}{times}, which needs {used} hardware "
            f"layers; the {ctx.device.name} has {ctx.device.max_layers}.",
        )


@layer_rule
def sequence_support(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if ctx.device.supports_link_layer:
        return
    following = layer.next_sequence
    if following not in (None, -1, layer.index + 1):
        yield ctx.error(
            layer,
            "next_sequence",
            f"jumps to layer {following}, but the {ctx.device.name} runs layers in order "
            f"only; remove `next_sequence` (the next layer is {layer.index + 1}) or use the "
            "MAX78002.",
        )
    later = [i for i in layer.in_sequences if i != NETWORK_INPUT and i >= layer.index]
    if later:
        yield ctx.error(
            layer,
            "in_sequences",
            f"reads the output of layer {later[0]}, which runs after this one on the "
            f"{ctx.device.name}; `in_sequences` may only name earlier layers (or -1 for the "
            "input) on this device.",
        )


# ------------------------------------------------------------------------------------------------
# Operators: kernels, padding, stride, dilation, groups


@layer_rule
def kernel_size(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    kh, kw = layer.kernel_size
    if layer.operation == "conv2d" and (kh, kw) not in ((1, 1), (3, 3)):
        yield ctx.error(
            layer,
            "kernel_size",
            f"{kh}x{kw} is not a Conv2d kernel size the hardware has; use 1x1 or 3x3 (stack "
            "3x3 layers for a larger receptive field).",
        )
    elif layer.operation == "convtranspose2d" and (kh, kw) != (3, 3):
        yield ctx.error(
            layer,
            "kernel_size",
            f"{kh}x{kw} is not supported for ConvTranspose2d; the only kernel size is 3x3.",
        )
    elif layer.is_1d and not 1 <= kh <= ctx.device.max_kernel_1d:
        yield ctx.error(
            layer,
            "kernel_size",
            f"{kh} is not a Conv1d kernel length the hardware has; use 1 to "
            f"{ctx.device.max_kernel_1d}.",
        )


@layer_rule
def padding(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    ph, pw = layer.pad
    shown = str(ph) if layer.is_1d else f"{ph}" if ph == pw else f"[{ph}, {pw}]"
    if layer.operation == "none":
        if ph or pw:
            yield ctx.error(
                layer,
                "pad",
                f"{shown}: a layer without convolution (passthrough/element-wise) cannot pad; "
                "set `pad: 0`.",
            )
        return
    if max(ph, pw) > ctx.device.max_pad:
        yield ctx.error(
            layer,
            "pad",
            f"{shown} is more padding than the hardware supports; use 0 to {ctx.device.max_pad}.",
        )
        return
    if layer.operation == "convtranspose2d":
        return
    kh, kw = layer.kernel_size
    if ph >= kh or (not layer.is_1d and pw >= kw):
        kernel = str(kh) if layer.is_1d else f"{kh}x{kw}"
        yield ctx.error(
            layer,
            "pad",
            f"{shown} is not smaller than the {kernel} kernel; use at most {kh - 1}"
            + (" (a 1x1 kernel takes `pad: 0`)." if kh == 1 else "."),
        )


@layer_rule
def transpose_padding(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.operation == "convtranspose2d":
        hw_pads = [layer.dilation[a] * (layer.kernel_size[a] - 1) - layer.pad[a] for a in (0, 1)]
        allowed = ctx.device.supported_transpose_pads
        if any(p not in allowed for p in hw_pads):
            yield ctx.error(
                layer,
                "pad",
                f"{layer.pad[0]} is not supported for ConvTranspose2d with a 3x3 kernel; use "
                f"0, 1 or 2.",
            )
        out_pads = ctx.device.supported_transpose_output_pads
        if any(p not in out_pads for p in layer.output_padding):
            yield ctx.error(
                layer,
                "output_padding",
                f"{layer.output_padding[0]} is not supported for ConvTranspose2d; the output "
                f"padding is fixed to {', '.join(map(str, out_pads))}.",
            )
    elif any(layer.output_padding):
        yield ctx.error(
            layer,
            "output_padding",
            f"{layer.output_padding[0]}: output padding exists only for ConvTranspose2d; "
            "remove it.",
        )


@layer_rule
def stride(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    sh, sw = layer.stride
    if layer.operation == "convtranspose2d":
        if (sh, sw) != (2, 2):
            yield ctx.error(
                layer,
                "stride",
                f"{sh}: ConvTranspose2d always upsamples with stride 2; remove `stride`.",
            )
        return
    if sh != 1 or (not layer.is_1d and sw != 1):
        shown = str(sh) if layer.is_1d or sh == sw else f"{sh}x{sw}"
        yield ctx.error(
            layer,
            "stride",
            f"{shown}: the hardware convolves with stride 1 only; use `pool_stride` (with "
            "pooling) to subsample, or a stride-1 layer followed by pooling.",
        )


@layer_rule
def dilation(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    dh, dw = layer.dilation
    if not layer.is_1d:
        if dh > 1 or dw > 1:
            what = (
                "a layer without convolution"
                if layer.operation == "none"
                else (f"{_op_name(layer)}")
            )
            yield ctx.error(
                layer,
                "dilation",
                f"{dh if dh == dw else f'{dh}x{dw}'} on {what}: dilation > 1 is supported "
                "for Conv1d only; use `dilation: 1` (stack layers or pool for a larger "
                "receptive field).",
            )
        return
    if dh <= 1:
        return
    k = layer.kernel_size[0]
    if k == 1:
        yield ctx.error(
            layer,
            "dilation",
            f"{dh} with a kernel of length 1 has no effect the hardware can run; use a kernel "
            "length of 2 or more, or `dilation: 1`.",
        )
    mode = dilated_conv1d_mode(layer, ctx.device)
    if mode == "unsupported":
        yield ctx.error(
            layer,
            "dilation",
            f"{dh} with kernel length {k} spans {(k - 1) * dh + 1} samples; the hardware "
            f"stretches kernels up to a span of {ctx.device.max_dilated_1d_span} and runs longer "
            f"spans only for kernels of length {ctx.device.max_dilation_1d_kernel} or less. "
            f"Use a kernel length of at most {ctx.device.max_dilation_1d_kernel}, or a dilation "
            f"of at most {max(1, (ctx.device.max_dilated_1d_span - 1) // max(1, k - 1))}.",
        )
    elif mode == "conv2d":
        yield from _folded_dilation_limits(ctx, layer)


def _folded_dilation_limits(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    dh = layer.dilation[0]
    why = f"with dilation {dh} (the layer runs on 3x3 hardware)"
    if layer.pool[0] != 1:
        yield ctx.error(
            layer,
            "max_pool" if layer.pool_type == "max" else "avg_pool",
            f"pooling is not possible {why}; pool in a separate layer.",
        )
    if layer.pad[0] > ctx.device.max_dilation_1d_pad:
        yield ctx.error(
            layer,
            "pad",
            f"{layer.pad[0]}: padding must be {ctx.device.max_dilation_1d_pad} {why}.",
        )
    if layer.operands != 1:
        yield ctx.error(
            layer,
            "operands",
            f"element-wise inputs are not possible {why}; use a separate layer.",
        )
    for key, on in (
        ("bypass", bool(layer.spec.bypass)),
        ("flatten", layer.flatten),
        ("readahead", ctx.read_ahead(layer)),
        ("streaming", layer.streaming),
    ):
        if on:
            yield ctx.error(layer, key, f"`{key}` must be off {why}.")
    if dh > ctx.device.max_dilation_1d:
        yield ctx.error(
            layer,
            "dilation",
            f"{dh} exceeds the largest Conv1d dilation of the {ctx.device.name}, "
            f"{ctx.device.max_dilation_1d}.",
        )
    skip = output_skip_bytes(layer, ctx.device)
    if layer.out_offset is not None and layer.out_offset < skip:
        yield ctx.error(
            layer,
            "out_offset",
            f"{_hex(layer.out_offset)}: {why} the hardware writes {skip} bytes before the "
            f"output; set `out_offset` to at least {_hex(skip)}.",
        )


def _op_name(layer: Layer) -> str:
    return {
        "conv1d": "Conv1d",
        "conv2d": "Conv2d",
        "convtranspose2d": "ConvTranspose2d",
        "linear": "Linear",
        "none": "a passthrough layer",
    }.get(layer.operation, layer.operation)


@layer_rule
def groups(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    g = layer.groups
    if g <= 1:
        return
    if not ctx.device.supports_depthwise:
        yield ctx.error(
            layer,
            "groups",
            f"{g}: grouped and depthwise convolutions are not supported on the "
            f"{ctx.device.name}; use `groups: 1` (or the MAX78002, which supports "
            "depthwise convolutions with groups = input channels = output channels).",
        )
    if layer.in_channels % g or layer.out_channels % g:
        yield ctx.error(
            layer,
            "groups",
            f"{g} does not divide the {layer.in_channels} input channels and "
            f"{layer.out_channels} output channels.",
        )
    elif ctx.device.supports_depthwise and (g != layer.in_channels or g != layer.out_channels):
        yield ctx.error(
            layer,
            "groups",
            f"{g}: the hardware runs only full (`groups: 1`) or depthwise convolutions, where "
            f"groups = input channels = output channels; this layer has {layer.in_channels} "
            f"input and {layer.out_channels} output channels.",
        )
    if layer.flatten:
        yield ctx.error(layer, "flatten", f"cannot be combined with `groups: {g}`.")
    if layer.bias_group is not None:
        yield ctx.error(
            layer,
            "bias_group",
            "cannot be chosen for a depthwise layer (its bias values are spread over all of "
            "its quadrants); remove `bias_group`.",
        )
    yield from _depthwise_alignment(ctx, layer)


def _depthwise_alignment(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    out_map = ctx.output_map(layer)
    if out_map and ffs(out_map) % 4:
        key, origin = ctx.output_map_origin(layer)
        yield ctx.error(
            layer,
            key,
            f"{_map(out_map)} (from {origin}) starts at processor {ffs(out_map)}; a depthwise "
            "layer's output must start at a multiple of 4 (0, 4, 8, ...).",
        )
    pmap = layer.processors
    if pmap and ffs(pmap) % 4 and (pmap >> ffs(pmap)) >> ctx.device.processors_per_group:
        yield ctx.error(
            layer,
            "processors",
            f"{_map(pmap)} spans quadrants but starts at processor {ffs(pmap)}; a depthwise "
            "layer spanning quadrants must start at a multiple of 4.",
        )


@layer_rule
def weight_format(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.binary and not ctx.device.supports_binary_weights:
        yield ctx.error(
            layer,
            "quantization",
            f"binary (-1/+1) weights are not supported on the {ctx.device.name}; use "
            "`quantization` 1, 2, 4 or 8.",
        )
    if (
        layer.has_weights
        and not layer.binary
        and layer.quantization == 1
        and any(other.binary for other in ctx.layers)
    ):
        yield ctx.error(
            layer,
            "quantization",
            "1-bit weights (0/-1) cannot be used in a network that also has binary (-1/+1) "
            "weights: the device interprets all 1-bit weights one way; use 2-bit weights here.",
        )
    if layer.spec.bypass and not ctx.device.supports_kernel_bypass:
        yield ctx.error(
            layer,
            "bypass",
            f"kernel bypass is not supported on the {ctx.device.name}; remove `bypass`.",
        )


@layer_rule
def output_shift(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_output_shift
    if layer.operation == "none":
        if layer.output_shift:
            yield ctx.error(
                layer,
                "output_shift",
                f"{layer.output_shift}: a layer without convolution cannot shift its output; "
                "remove `output_shift`.",
            )
        return
    if not -limit <= layer.output_shift <= limit:
        implicit = 0 if layer.spec.bypass else 8 - layer.quantization
        bits = "binary" if layer.binary else f"{layer.quantization}-bit"
        yield ctx.error(
            layer,
            "output_shift",
            f"{layer.output_shift - implicit} is outside the range {bits} weights allow, "
            f"[{-limit - implicit}, +{limit - implicit}] (the hardware shifts by at most "
            f"{limit}, and {bits} weights already add {implicit}).",
        )


# ------------------------------------------------------------------------------------------------
# Pooling, element-wise, flatten, passthrough


@layer_rule
def pooling(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    key = "max_pool" if layer.pool_type == "max" else "avg_pool"
    ph, pw = layer.pool
    dh, dw = layer.pool_dilation
    if (ph - 1) * dh >= ctx.device.max_pool or (pw - 1) * dw >= ctx.device.max_pool:
        yield ctx.error(
            layer,
            key,
            f"{ph if layer.is_1d else f'{ph}x{pw}'} (dilation {dh}) is larger than the "
            f"hardware pools; pooling windows span at most {ctx.device.max_pool} rows and "
            "columns.",
        )
    sh, sw = layer.pool_stride
    if max(sh, sw) > ctx.device.max_pool_stride:
        yield ctx.error(
            layer,
            "pool_stride",
            f"{sh}: pooling strides can be 1 to {ctx.device.max_pool_stride}.",
        )
    if not layer.is_1d and sh != sw:
        yield ctx.error(
            layer,
            "pool_stride",
            f"{sh}x{sw}: 2D pooling needs the same stride in both dimensions.",
        )
    if (dh, dw) != (1, 1) and layer.pool == (1, 1) and layer.pool_type is None:
        yield ctx.error(
            layer,
            "pool_dilation",
            "needs pooling in the same layer (`max_pool` or `avg_pool`); remove it.",
        )
    limit = ctx.device.max_pool_dilation
    if min(dh, dw) < 1 or max(dh, dw) > limit:
        shown = dh if dh == dw else f"{dh}x{dw}"
        yield ctx.error(
            layer,
            "pool_dilation",
            f"{shown}: pooling dilation can be 1 to {limit} on the {ctx.device.name}."
            if limit > 1
            else f"{shown}: the {ctx.device.name} pools without dilation; remove `pool_dilation` "
            "(dilated pooling needs the MAX78002).",
        )


@layer_rule
def eltwise(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    n = layer.operands
    pooled = layer.pool != (1, 1)
    if n > 1 and not 2 <= n <= ctx.device.max_operands:
        yield ctx.error(
            layer,
            "operands",
            f"{n}: element-wise operations take 2 to {ctx.device.max_operands} inputs.",
        )
    if n > 1 and layer.is_1d:
        yield ctx.error(
            layer,
            "eltwise",
            "element-wise operations cannot be combined with Conv1d; use a separate "
            "passthrough layer (`op: add`...) before the Conv1d.",
        )
    if not layer.pool_first:
        if n == 1 or not pooled:
            yield ctx.error(
                layer,
                "pool_first",
                "`pool_first: false` (pool after the element-wise operation) needs both "
                "pooling and an element-wise operation in this layer; remove it.",
            )
        elif n > ctx.device.max_pool_last_operands:
            yield ctx.error(
                layer,
                "operands",
                f"{n}: pooling after an element-wise operation (`pool_first: false`) works with "
                f"at most {ctx.device.max_pool_last_operands} inputs.",
            )
    yield from _eltwise_inputs(ctx, layer)


def _eltwise_inputs(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.operands <= 1 or len(layer.in_sequences) < 2:
        return
    channels = {
        i: (
            ctx.net.input_shape[0] // layer.operands
            if i == NETWORK_INPUT
            else ctx.layer(i).out_channels
        )
        for i in layer.in_sequences
    }
    if len(set(channels.values())) > 1:
        shown = ", ".join(f"layer {i}: {c}" for i, c in channels.items())
        yield ctx.error(
            layer,
            "in_sequences",
            f"the inputs of an element-wise operation must have the same channel count ({shown}).",
        )
    maps = {}
    for i in layer.in_sequences:
        m = ctx.layer(0).processors if i == NETWORK_INPUT else ctx.output_map(ctx.layer(i))
        if m is not None:
            maps[i] = m
    if len(set(maps.values())) > 1:
        shown = ", ".join(f"layer {i}: {_map(m)}" for i, m in maps.items())
        yield ctx.error(
            layer,
            "in_sequences",
            "the inputs of an element-wise operation must be written by the same output "
            f"processors ({shown}); give the producing layers the same `output_processors`.",
        )


def _emulated_eltwise(ctx: Context, layer: Layer) -> bool:
    """Multi-pass element-wise operations the MAX78000 runs as a plain data move."""
    n, p = layer.operands, input_passes(layer, ctx.max_proc)
    return ctx.device.emulates_multipass_eltwise and n > 1 and p > 1 and n * p != n + p


@layer_rule
def multipass_eltwise(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    n = layer.operands
    p = input_passes(layer, ctx.max_proc)
    if _emulated_eltwise(ctx, layer) and (
        layer.operation != "none" or layer.pool != (1, 1) or layer.pool_stride != (1, 1)
    ):
        yield ctx.error(
            layer,
            "operation",
            f"a {n}-input element-wise operation on {layer.in_channels} channels ({p} passes) "
            f"runs as a separate data move on the {ctx.device.name} and cannot pool or "
            "convolve in the same layer (only 2 inputs x 2 passes can); move the pooling or "
            "convolution to its own layer.",
        )
    if (
        not ctx.device.supports_multipass_eltwise_conv_bias
        and n > 1
        and layer.operation != "none"
        and has_bias(layer)
        and layer.groups == 1
    ):
        yield ctx.error(
            layer,
            "eltwise",
            f"on the {ctx.device.name}, an element-wise operation cannot share a layer with a "
            "convolution that has a bias; put the element-wise operation in its own "
            "passthrough layer, or train the convolution without bias.",
        )


@layer_rule
def flatten(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not layer.flatten:
        return
    if layer.operation == "none":
        yield ctx.error(
            layer,
            "flatten",
            "needs a convolution or linear operation; a passthrough layer cannot flatten.",
        )
    if layer.pool != (1, 1):
        yield ctx.error(
            layer,
            "flatten",
            "cannot be combined with pooling in the same layer; pool in the layer before.",
        )
    if layer.streaming:
        yield ctx.error(layer, "flatten", "cannot be combined with `streaming`.")
    pixels = layer.pooled_dim[0] * layer.pooled_dim[1]
    if pixels > ctx.device.max_flatten_pixels:
        yield ctx.error(
            layer,
            "flatten",
            f"folds {layer.pooled_dim[0]}x{layer.pooled_dim[1]} = {pixels:,} pixels into "
            f"channels; the hardware flattens at most {ctx.device.max_flatten_pixels} pixels "
            "(e.g. 16x16); pool further before flattening.",
        )


@layer_rule
def passthrough(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.operation != "none":
        return
    if layer.activation is not None:
        yield ctx.error(
            layer,
            "activation",
            f"{layer.activation}: a layer without convolution cannot apply an activation; "
            "remove `activation` (or apply it in the producing convolution).",
        )
    if layer.output_width != 8:
        yield ctx.error(
            layer,
            "output_width",
            f"{layer.output_width}: a layer without convolution writes 8-bit data only.",
        )
    p = input_passes(layer, ctx.max_proc)
    if layer.pool != (1, 1) and p > ctx.device.max_pool_passes and layer.pooled_dim != (1, 1):
        yield ctx.error(
            layer,
            "max_pool" if layer.pool_type == "max" else "avg_pool",
            f"pooling {layer.in_channels} channels ({p} passes) without a convolution is not "
            f"possible on the {ctx.device.name} (at most {ctx.device.max_pool_passes} pass, "
            f"i.e. {ctx.max_proc * ctx.device.max_pool_passes} channels); pool inside the "
            "following convolution layer, or pool down to 1x1.",
        )
    yield from _passthrough_maps(ctx, layer)


def _passthrough_maps(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    in_map, out_map = layer.processors, ctx.output_map(layer)
    if in_map is None or out_map is None:
        return
    per_group = ctx.device.processors_per_group
    mask = (1 << per_group) - 1
    for group in range(ctx.device.groups):
        wanted = (1 << popcount(in_map >> group * per_group & mask)) - 1
        got = out_map >> group * per_group & mask
        if got:
            got >>= ffs(got)
        if got != wanted:
            key, origin = ctx.output_map_origin(layer)
            yield ctx.error(
                layer,
                key,
                f"{_map(out_map)} (from {origin}): a passthrough layer writes each quadrant's "
                "channels to consecutive processors of the same quadrant, so in every quadrant "
                "the output processors must be as many as the input processors, without gaps "
                f"(`processors` {_map(in_map)}, quadrant {group}: "
                f"{popcount(in_map >> group * per_group & mask)} input processors, output "
                f"{_map(out_map >> group * per_group & mask)}); e.g. use "
                f"{_map(_packed_map(in_map, per_group, ctx.device.groups))}.",
            )
            return


def _packed_map(in_map: int, per_group: int, groups: int) -> int:
    mask = (1 << per_group) - 1
    result = 0
    for group in range(groups):
        n = popcount(in_map >> group * per_group & mask)
        result |= ((1 << n) - 1) << group * per_group
    return result


@layer_rule
def output_width(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.output_width not in (8, 32):
        yield ctx.error(layer, "output_width", f"{layer.output_width}: use 8 or 32.")
    elif layer.index == ctx.final and layer.output_width != 8 and layer.activation:
        yield ctx.error(
            layer,
            "output_width",
            f"32-bit output is the raw accumulator and cannot go through the "
            f"{layer.activation} activation; remove the activation (`activation: None`) or "
            "use `output_width: 8`.",
        )


# ------------------------------------------------------------------------------------------------
# Sizes, channels, processors


@layer_rule
def dimensions(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_row_col
    for what, dim, key in (("input", layer.in_dim, "in_dim"), ("output", layer.out_dim, None)):
        if max(dim) > limit:
            yield ctx.error(
                layer,
                key,
                f"the {what} is {_dims(dim, layer)}, larger than the {limit} rows/columns the "
                f"{ctx.device.name} handles; downscale or fold the data (more channels, fewer "
                "pixels).",
            )
    frame = layer.in_dim[0] * layer.in_dim[1] * input_passes(layer, ctx.max_proc)
    if frame >= ctx.device.max_frame_words:
        yield ctx.error(
            layer,
            "in_dim",
            f"the input ({_dims(layer.in_dim, layer)} x {input_passes(layer, ctx.max_proc)} "
            f"passes = {frame:,} words) exceeds the hardware's frame counter "
            f"({ctx.device.max_frame_words:,}).",
        )


@layer_rule
def channel_counts(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_channels
    if layer.in_channels > limit:
        before = " (before flattening)" if layer.flatten else ""
        yield ctx.error(
            layer,
            "in_channels",
            f"the layer has {layer.in_channels:,} input channels{before}; the "
            f"{ctx.device.name} handles at most {limit:,} (64 processors x 16 passes).",
        )
    if layer.out_channels > limit:
        yield ctx.error(
            layer,
            "out_channels",
            f"the layer has {layer.out_channels:,} output channels; the {ctx.device.name} "
            f"handles at most {limit:,} (64 processors x 16 passes).",
        )
    p = input_passes(layer, ctx.max_proc)
    if (
        not layer.flatten
        and layer.in_channels <= limit
        and p > ctx.device.max_passes
        and not (layer.operation == "none" and _emulated_eltwise(ctx, layer))
    ):
        yield ctx.error(
            layer,
            "in_channels",
            f"{layer.in_channels} input channels on {ctx.max_proc} processors need {p} "
            f"passes; the hardware counts at most {ctx.device.max_passes}.",
        )


@layer_rule
def input_processors(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    pmap = layer.processors
    if pmap is None:
        return
    need = input_processors_needed(layer, ctx.max_proc)
    have = popcount(pmap)
    if have != need:
        p = input_passes(layer, ctx.max_proc)
        before = " (before flattening)" if layer.flatten else ""
        operands = (
            f" per operand ({layer.operands} element-wise inputs share the same processors)"
            if layer.operands > 1
            else ""
        )
        layout = (
            "one processor per channel" if p == 1 else f"{need} processors per pass, {p} passes"
        )
        yield ctx.error(
            layer,
            "processors",
            f"{_map(pmap)} enables {_plural(have, 'processor')}, but the layer's "
            f"{_plural(layer.in_channels, 'input channel')}{before}{operands} need exactly "
            f"{need} ({layout}); set `processors` to a map with {need} bits, e.g. "
            f"{_map(_suggest_map(need, layer.data_format, ctx, pmap))}"
            + _also_output_of(ctx, layer)
            + ".",
        )


def _also_output_of(ctx: Context, layer: Layer) -> str:
    """Note the producers whose output map defaults to this layer's (wrong) `processors`."""
    producers = [
        other
        for other in ctx.layers
        if other.next_sequence == layer.index
        and other.output_processors is None
        and other.index != ctx.final
        and layer.processors is not None
        and popcount(layer.processors) != output_processors_needed(other, ctx.max_proc)
    ]
    if not producers:
        return ""
    shown = " and ".join(
        f"layer {_layer_name(p)} ({_plural(p.out_channels, 'output channel')})" for p in producers
    )
    return f" (the same map receives the output of {shown}, which has no `output_processors`)"


def _suggest_map(count: int, data_format: str, ctx: Context, current: int = 0) -> int:
    """A processor map with `count` processors, starting where `current` starts if it fits."""
    step = ctx.device.processors_sharing_memory if data_format == "CHW" else 1
    first = ffs(current) if current else 0
    if first + (count - 1) * step >= ctx.device.processors:
        first = 0
    result = 0
    for i in range(count):
        if first + i * step < ctx.device.processors:
            result |= 1 << first + i * step
    return result


@layer_rule
def output_processors(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    out_map = ctx.output_map(layer)
    if out_map is None:
        return
    need = output_processors_needed(layer, ctx.max_proc)
    have = popcount(out_map)
    if have != need and not _reported_by_next_layer(ctx, layer, out_map):
        p = output_passes(layer, ctx.max_proc)
        key, origin = ctx.output_map_origin(layer)
        layout = "one per channel" if p == 1 else f"{need} per pass, {p} passes"
        yield ctx.error(
            layer,
            key,
            f"the output goes to {_map(out_map)} (from {origin}), "
            f"{_plural(have, 'processor')}, but {_plural(layer.out_channels, 'output channel')} "
            f"need exactly {need} ({layout}); set `output_processors` (or the next layer's "
            f"`processors`) to a map with {need} bits.",
            line=ctx.net.spec.lines.get("output_map") if key == "output_map" else None,
        )


def _reported_by_next_layer(ctx: Context, layer: Layer, out_map: int) -> bool:
    """The output map is the next layer's `processors`, and that layer reports its bit count."""
    if layer.output_processors is not None or layer.index == ctx.final:
        return False
    following = ctx.layer(layer.next_sequence)
    return (
        following.processors == out_map
        and following.index in ctx.previous
        and popcount(out_map) != input_processors_needed(following, ctx.max_proc)
    )


@layer_rule
def data_format(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.data_format != "CHW":
        return
    if layer.index != ctx.start:
        yield ctx.error(
            layer,
            "data_format",
            "CHW: only the first layer can read CHW data (every layer writes HWC); remove "
            "`data_format` here.",
        )
    pmap = layer.processors
    if pmap is None:
        return
    shared = ctx.device.processors_sharing_memory
    for instance in range(ctx.device.processors // shared):
        bits = pmap >> instance * shared & (1 << shared) - 1
        if popcount(bits) > 1:
            first = instance * shared
            yield ctx.error(
                layer,
                "processors",
                f"{_map(pmap)} enables {popcount(bits)} of processors {first}-{first + 3}, which "
                "share one data-memory instance; with CHW input every channel needs its own "
                "instance: enable at most one processor in each group of 4 (e.g. "
                f"{_map(_suggest_map(popcount(pmap), 'CHW', ctx, pmap))}), or use HWC.",
            )
            return


# ------------------------------------------------------------------------------------------------
# Data memory: offsets and sizes


@network_rule
def offset_ranges(ctx: Context) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_out_offset
    for layer in ctx.net.layers:
        for key in ("out_offset", "in_offset"):
            value = getattr(layer, key)
            if value is not None and not 0 <= value < limit:
                yield ctx.error(layer, key, _offset_message(value, ctx.device))


def _fits_instance(ctx: Context, start: int, size: int) -> bool:
    return start + size <= ctx.device.instance_bytes


@layer_rule
def input_memory(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    offset = ctx.in_offset(layer)
    if layer.streaming or offset is None:
        return
    size = input_bytes(layer, ctx.max_proc)
    if _fits_instance(ctx, offset, size):
        return
    instance = ctx.device.instance_bytes
    chw = layer.data_format == "CHW"
    packing = "CHW, one channel per memory instance" if chw else "HWC, 4 channels per 32-bit word"
    p = input_passes(layer, ctx.max_proc)
    extra = (f" x {p} passes" if p > 1 else "") + (
        f" x {layer.operands} operands" if layer.operands > 1 else ""
    )
    room = instance - size
    fix = (
        f"lower `in_offset` to at most {_hex(room)}"
        if room >= 0
        else "the input alone is too large: reduce its size (pool, fold into channels) or use "
        "`streaming`"
    )
    yield ctx.error(
        layer,
        "in_offset",
        f"the {_dims(layer.in_dim, layer)} input ({packing}{extra}) takes {size:,} bytes "
        f"({_ceil_div(size, 4):,} words) per memory instance; from `in_offset` {_hex(offset)} it "
        f"ends at {_hex(offset + size)}, past the {instance:,}-byte ({instance // 4:,}-word) "
        f"data-memory instance of the {ctx.device.name}; {fix}.",
    )


@layer_rule
def output_memory(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    offset = layer.out_offset
    if offset is None or (layer.streaming and layer.index != ctx.final):
        return
    size = output_bytes(layer, ctx.device, ctx.max_proc)
    if _fits_instance(ctx, offset, size):
        return
    instance = ctx.device.instance_bytes
    p = output_passes(layer, ctx.max_proc)
    packing = (
        "32-bit output, one channel per word"
        if layer.output_width == 32
        else "HWC, 4 channels per 32-bit word"
    )
    extra = f" x {p} passes" if p > 1 else ""
    room = instance - size
    fix = (
        f"lower `out_offset` to at most {_hex(room)}"
        if room >= 0
        else "the output alone is too large: reduce it (pooling, fewer pixels"
        + (", 8-bit output" if layer.output_width == 32 else "")
        + (", or fewer channels per layer" if p > 1 else "")
        + ")"
    )
    yield ctx.error(
        layer,
        "out_offset",
        f"{_hex(offset)} + the {layer.out_channels}-channel {_dims(layer.out_dim, layer)} "
        f"output ({packing}{extra}) = {size:,} bytes ({size // 4:,} words) per memory instance "
        f"ends at {_hex(offset + size)}, past the {instance:,}-byte ({instance // 4:,}-word) "
        f"data-memory instance of the {ctx.device.name}; {fix}.",
    )


@layer_rule
def padded_multipass_conv1d(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if (
        layer.is_1d
        and layer.pad[0] > 0
        and input_passes(layer, ctx.max_proc) > 1
        and not ctx.device.supports_multipass_padded_conv1d
        and not ctx.options.ignore_hw_limits
    ):
        yield ctx.error(
            layer,
            "pad",
            f"{layer.pad[0]}: the {ctx.device.name} cannot pad a Conv1d with more than "
            f"{ctx.max_proc} input channels ({layer.in_channels} channels = "
            f"{input_passes(layer, ctx.max_proc)} passes); use `pad: 0` (pad the data "
            f"beforehand), or at most {ctx.max_proc} input channels.",
        )


@layer_rule
def read_gap(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not layer.read_gap:
        return
    if not ctx.device.supports_read_gap:
        yield ctx.error(
            layer,
            "read_gap",
            f"{layer.read_gap}: `read_gap` is not supported on the {ctx.device.name}; use 0.",
        )
    elif input_passes(layer, ctx.max_proc) > 1 and not ctx.device.supports_multipass_read_gap:
        yield ctx.error(
            layer,
            "read_gap",
            f"{layer.read_gap}: `read_gap` works only when the input fits in one pass "
            f"({ctx.max_proc} channels or fewer); this layer has {layer.in_channels}.",
        )


@layer_rule
def calcx4_multipass(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if (
        ctx.calcx4(layer)
        and ctx.device.supports_calcx4
        and not ctx.device.supports_multipass_calcx4_partial_quad
        and output_passes(layer, ctx.max_proc) > 1
        and ctx.max_proc != ctx.device.processors
        and not ctx.options.ignore_hw_limits
    ):
        yield ctx.error(
            layer,
            "calcx4",
            f"`calcx4` with multi-pass output needs all {ctx.device.processors} processors, but "
            f"--max-proc limits them to {ctx.max_proc}.",
        )


@layer_rule
def read_ahead_instances(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not ctx.read_ahead(layer) or not ctx.device.supports_read_ahead:
        return
    in_off = ctx.in_offset(layer)
    out_off = layer.out_offset
    if in_off is None or out_off is None:
        return
    per = ctx.device.instance_bytes // ctx.device.instance_banks
    rows, cols = hw_input_dim(layer, ctx.device)
    in_end = in_off + 4 * layer.operands * input_passes(layer, ctx.max_proc) * rows * cols - 1
    out_pixels = layer.out_dim[0] * layer.out_dim[1] + output_overhang(layer, ctx.device)
    out_end = out_off + 4 * output_passes(layer, ctx.max_proc) * out_pixels - 1
    ins, outs = (in_off // per, in_end // per), (out_off // per, out_end // per)
    if ins[0] == outs[0] or ins[1] == outs[1]:
        yield ctx.error(
            layer,
            "readahead",
            f"with read-ahead, input and output must lie in different memory banks of "
            f"{per:,} bytes: the input ({_hex(in_off)}-{_hex(in_end)}) is in bank(s) "
            f"{ins[0]}-{ins[1]}, the output ({_hex(out_off)}-{_hex(out_end)}) in "
            f"{outs[0]}-{outs[1]}; move `out_offset` or `in_offset` to another bank.",
        )


# ------------------------------------------------------------------------------------------------
# Streaming


@layer_rule
def streaming_sequence(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not layer.streaming:
        return
    previous = ctx.previous.get(layer.index, -1)
    if layer.index != ctx.start and previous >= 0 and not ctx.layer(previous).streaming:
        yield ctx.error(
            layer,
            "streaming",
            f"layer {previous}, which runs before this one, does not stream; streaming layers "
            "must be the first layers of the network, one after another.",
        )
    if layer.index >= ctx.device.max_stream_layers:
        yield ctx.error(
            layer,
            "streaming",
            f"only the first {ctx.device.max_stream_layers} layers (0 to "
            f"{ctx.device.max_stream_layers - 1}) can stream; stream fewer layers, or pool "
            "earlier so that later layers fit in data memory.",
        )
    following = layer.next_sequence
    if layer.index <= ctx.device.max_stream_layers and following not in (None, -1, layer.index + 1):
        yield ctx.error(
            layer,
            "next_sequence",
            f"{following}: a streaming layer must be followed by layer {layer.index + 1}.",
        )
    if (
        layer.operation == "none"
        and not ctx.device.supports_streaming_passthrough
        and layer.index <= ctx.device.max_stream_layers
    ):
        yield ctx.error(
            layer,
            "streaming",
            f"a layer without convolution cannot stream on the {ctx.device.name}; only "
            "Conv1d, Conv2d and ConvTranspose2d layers can.",
        )
    if (
        not ctx.device.supports_stream_nonpad_final
        and _is_last_streaming(ctx, layer)
        and layer.index <= ctx.device.max_stream_layers
    ):
        pad = hw_padding(ctx, layer)
        if pad[0] == 0 or pad[1] == 0:
            yield ctx.error(
                layer,
                "pad",
                f"{layer.pad[0]}: on the {ctx.device.name} the last streaming layer must pad "
                "its input (`pad: 1` or 2).",
            )


def _is_last_streaming(ctx: Context, layer: Layer) -> bool:
    following = layer.next_sequence
    return following in (None, -1) or not ctx.streaming(following)


def emulated_1x1(ctx: Context, layer: Layer) -> bool:
    """A streamed 1x1 Conv2d runs as a 3x3 kernel with padding 1 (first streaming layers)."""
    previous = ctx.previous.get(layer.index, -1)
    return (
        ctx.device.emulates_1x1_streaming
        and layer.index <= ctx.device.max_stream_layers
        and layer.kernel_size == (1, 1)
        and layer.operation in ("conv2d", "convtranspose2d")
        and (layer.streaming or (previous >= 0 and ctx.layer(previous).streaming))
    )


def hw_padding(ctx: Context, layer: Layer) -> tuple[int, int]:
    """Padding as the hardware applies it."""
    if emulated_1x1(ctx, layer) or dilated_conv1d_mode(layer, ctx.device) == "conv2d":
        return (1, 1)
    if layer.operation == "convtranspose2d":
        return (2 - layer.pad[0], 2 - layer.pad[1])
    return layer.pad


def hw_kernel(ctx: Context, layer: Layer) -> tuple[int, int]:
    """Kernel rows x columns as the hardware runs them."""
    if emulated_1x1(ctx, layer) or dilated_conv1d_mode(layer, ctx.device) == "conv2d":
        return (3, 3)
    if dilated_conv1d_mode(layer, ctx.device) == "stretch":
        return ((layer.kernel_size[0] - 1) * layer.dilation[0] + 1, 1)
    return layer.kernel_size


def hw_pooled_dim(ctx: Context, layer: Layer) -> tuple[int, int]:
    if dilated_conv1d_mode(layer, ctx.device) == "conv2d":
        return hw_input_dim(layer, ctx.device)
    return layer.pooled_dim


@dataclass(frozen=True)
class StreamBuffer:
    """The circular input buffer of a streaming layer (FIFO input), in bytes from `start`."""

    layer: int
    start: int
    end: int  # start + rollover words x 4 (the vendor's inclusive bound)
    rollover: int  # words
    instances: int  # bit map of the data-memory instances its processors read


def stream_rollover(ctx: Context, layer: Layer) -> int:
    """Words of input a streaming layer keeps (the FIFO rollover / buffer size)."""
    if layer.index == ctx.start and ctx.options.override_rollover is not None:
        return ctx.options.override_rollover
    if ctx.device.uses_new_streaming:
        return _rollover_new(ctx, layer)
    return _rollover_old(ctx, layer)


def _stream_start_old(ctx: Context, layer: Layer) -> int:
    rows, cols = hw_input_dim(layer, ctx.device)
    if layer.index == ctx.start:
        if ctx.options.override_start is not None:
            return ctx.options.override_start
        if layer.streaming:
            start = (layer.pool[0] - 1) * cols + layer.pool[1]
        else:
            start = rows * cols
            if layer.data_format == "CHW":
                start = _ceil_div(start, 4)
        return start * layer.pool[0]
    previous = ctx.layer(ctx.previous[layer.index])
    p_cols = hw_pooled_dim(ctx, previous)[1]
    p_pad = hw_padding(ctx, previous)[1]
    p_kernel = hw_kernel(ctx, previous)
    return (
        (p_cols + 2 * p_pad) * (p_kernel[0] - 1 + layer.pool[0] - 1)
        + p_kernel[1]
        - 1
        + layer.pool[1]
        + ctx.options.increase_start
    )


def _rollover_old(ctx: Context, layer: Layer) -> int:
    if layer.data_format == "CHW":
        value = 12
    else:
        cols = hw_input_dim(layer, ctx.device)[1]
        value = (
            _stream_start_old(ctx, layer)
            + (layer.pool[0] - 1) * cols
            + max(layer.stride[1], layer.pool_stride[1], layer.pool[1])
        )
    p = input_passes(layer, ctx.max_proc)
    return _ceil_div(value, p) * p


def _stream_geometry(ctx: Context, layer: Layer) -> dict[str, int]:
    rows, cols = hw_input_dim(layer, ctx.device)
    pad = hw_padding(ctx, layer)[1]
    row_inc = max(layer.pool[0] * layer.pool_dilation[0], layer.pool_stride[0])
    col_inc = max(layer.pool[1] * layer.pool_dilation[1], layer.pool_stride[1])
    row_prim = pad or layer.pool_stride[0]
    if layer.index > 0:
        effective = cols // col_inc
        if effective * layer.pool_stride[1] + layer.pool[1] > cols:
            effective -= 1
        col_adjust = 0 if col_inc == 1 else cols - effective * col_inc
    else:
        effective = cols // layer.pool_stride[1]
        if effective * layer.pool_stride[1] + layer.pool[1] - 1 > cols:
            effective -= 1
        col_adjust = cols - effective * col_inc
    return {
        "rows": rows,
        "cols": cols,
        "pad": pad,
        "row_inc": row_inc,
        "col_inc": col_inc,
        "row_prim": row_prim,
        "effective": effective,
        "col_adjust": col_adjust,
    }


def _stream_start_new(ctx: Context, layer: Layer) -> int:
    """The prefill (in HWC words) before a streaming layer starts (MAX78002 equations)."""
    g = _stream_geometry(ctx, layer)
    cols, pad, col_inc = g["cols"], g["pad"], g["col_inc"]
    if layer.index == ctx.start:
        if ctx.options.override_start is not None:
            return ctx.options.override_start
        if not layer.streaming:
            return g["rows"] * cols
        if layer.pool_stride[0] == 1 and layer.pool[0] == 1:
            return col_inc
        start = (g["row_inc"] * (cols + 2 * pad) + pad + 2 * col_inc) * layer.operands
    else:
        first = g["row_prim"] if layer.index > 0 else pad
        start = (
            first * (cols + 2 * pad)
            + (g["row_inc"] * (cols + 2 * pad) + pad + 2 * col_inc) * layer.operands
        )
        if _is_last_streaming(ctx, layer) and layer.index > 0:
            start += g["col_adjust"] * layer.pool_stride[1]
    if ctx.read_ahead(layer):
        start += layer.pool_stride[1]
    return start


def _rollover_new(ctx: Context, layer: Layer) -> int:
    g = _stream_geometry(ctx, layer)
    start = _stream_start_new(ctx, layer)
    chw = layer.data_format == "CHW"
    if layer.index == ctx.start:
        value = start + g["col_inc"] + (layer.pool_stride[1] - 1) * (g["cols"] + 2 * g["pad"])
        return value * layer.pool_stride[1] * 4 if chw else value
    p = input_passes(layer, ctx.max_proc)
    value = start + (p - 1) * (g["row_inc"] * g["cols"] + g["pad"] + g["col_inc"]) + g["col_inc"]
    value = _ceil_div(value, p) * p
    return _ceil_div(value, 4) if chw else value


def stream_buffers(ctx: Context) -> dict[int, StreamBuffer]:
    """The input buffer of every streaming layer (only with FIFO input)."""
    if not ctx.options.uses_fifo:
        return {}
    result: dict[int, StreamBuffer] = {}
    for layer in sorted(ctx.layers, key=lambda x: x.index):
        offset = ctx.in_offset(layer)
        if not layer.streaming or layer.processors is None or offset is None:
            continue
        rollover = stream_rollover(ctx, layer)
        pmap = layer.processors
        if ctx.options.fast_fifo_quad and layer.index == 0:
            pmap |= 0x0001000100010001
        result[layer.index] = StreamBuffer(
            layer.index,
            offset,
            offset + rollover * 4,
            rollover,
            memory_instances(pmap, ctx.device.processors_sharing_memory),
        )
    return result


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Closed ranges [a0, a1] and [b0, b1] share a byte (touching counts, like the vendor)."""
    return a[0] <= b[1] and b[0] <= a[1]


@network_rule
def streaming_buffers(ctx: Context) -> Iterator[EdgesynthError]:
    buffers = stream_buffers(ctx)
    for index, buf in buffers.items():
        layer = ctx.layer(index)
        yield from _stream_buffer_vs_output(ctx, layer, buf)
        if buf.end >= ctx.device.instance_bytes and not ctx.options.no_error_stop:
            yield ctx.error(
                layer,
                "in_offset",
                f"the streaming input buffer ({buf.rollover:,} words) from {_hex(buf.start)} "
                f"ends at {_hex(buf.end)}, past the {ctx.device.instance_bytes:,}-byte memory "
                f"instance; lower `in_offset` (the previous layer's `out_offset`) to below "
                f"{_hex(ctx.device.instance_bytes - buf.rollover * 4)}.",
            )
        for other in buffers.values():
            if other.layer >= index:
                break
            if (
                other.instances & buf.instances
                and _overlap((buf.start, buf.end), (other.start, other.end))
                and not ctx.options.overwrite_ok
            ):
                yield ctx.error(
                    layer,
                    "in_offset",
                    f"the streaming input buffer {_hex(buf.start)}-{_hex(buf.end)} "
                    f"(processors {_map(layer.processors or 0)}) overlaps the buffer of "
                    f"streaming layer {_layer_name(ctx.layer(other.layer))} "
                    f"({_hex(other.start)}-{_hex(other.end)}, processors "
                    f"{_map(ctx.layer(other.layer).processors or 0)}) in a shared memory "
                    "instance; give the streaming layers disjoint `out_offset` ranges or "
                    "processors in different memory instances.",
                )
            if ctx.read_ahead(layer) and _bank(ctx, buf.start) == _bank(ctx, other.start):
                yield ctx.error(
                    layer,
                    "readahead",
                    f"with read-ahead, every streaming layer needs its own memory bank; this "
                    f"layer's buffer shares bank {_bank(ctx, buf.start)} with layer "
                    f"{_layer_name(ctx.layer(other.layer))}.",
                )
        if _is_last_streaming(ctx, layer):
            yield from _final_stream_output(ctx, layer, buffers)


def _bank(ctx: Context, offset: int) -> int:
    return offset // (ctx.device.instance_bytes // ctx.device.instance_banks)


def _stream_buffer_vs_output(
    ctx: Context, layer: Layer, buf: StreamBuffer
) -> Iterator[EdgesynthError]:
    """A streaming layer's output must not run into its own input buffer."""
    out_map = ctx.output_map(layer)
    if out_map is None or not out_map & (layer.processors or 0) or ctx.options.no_error_stop:
        return
    out_offset = layer.out_offset or 0
    out_start = out_offset - output_skip_bytes(layer, ctx.device)
    if buf.start < out_start:
        if buf.end >= out_start:
            yield ctx.error(
                layer,
                "out_offset",
                f"{_hex(out_offset)}: the output would overwrite this layer's streaming input "
                f"buffer ({_hex(buf.start)}-{_hex(buf.end)}, {buf.rollover:,} words); raise "
                f"`out_offset` above {_hex(buf.end)}.",
            )
        return
    if out_offset + buf.rollover * 4 >= buf.start:
        yield ctx.error(
            layer,
            "out_offset",
            f"{_hex(out_offset)}: the output runs into this layer's streaming input buffer at "
            f"{_hex(buf.start)} ({buf.rollover:,} words); move `out_offset` more than "
            f"{buf.rollover * 4:,} bytes below `in_offset`, or above the buffer.",
        )
    if layer.index == ctx.final:
        pixels = layer.out_dim[0] * layer.out_dim[1] + output_overhang(layer, ctx.device)
        size = pixels * output_passes(layer, ctx.max_proc) * 4
        if out_offset + size >= buf.start:
            yield ctx.error(
                layer,
                "out_offset",
                f"{_hex(out_offset)}: the {_dims(layer.out_dim, layer)} output ({size:,} bytes) "
                f"runs into this layer's streaming input buffer at {_hex(buf.start)}.",
            )


def _final_stream_output(
    ctx: Context, layer: Layer, buffers: dict[int, StreamBuffer]
) -> Iterator[EdgesynthError]:
    out_map = ctx.output_map(layer)
    if out_map is None or layer.out_offset is None or ctx.options.overwrite_ok:
        return
    instances = memory_instances(out_map, ctx.device.processors_sharing_memory)
    pixels = layer.out_dim[0] * layer.out_dim[1] + output_overhang(layer, ctx.device)
    end = layer.out_offset + pixels * 4 * layer.output_width // 8
    for other in buffers.values():
        if other.layer > layer.index:
            break
        if other.instances & instances and _overlap(
            (layer.out_offset, end), (other.start, other.end)
        ):
            yield ctx.error(
                layer,
                "out_offset",
                f"the output of the last streaming layer ({_hex(layer.out_offset)}-{_hex(end)}, "
                f"output processors {_map(out_map)}) overlaps the streaming input buffer of "
                f"layer {_layer_name(ctx.layer(other.layer))} ({_hex(other.start)}-"
                f"{_hex(other.end)}); move `out_offset` past {_hex(other.end)}.",
            )


@network_rule
def streaming_delta(ctx: Context) -> Iterator[EdgesynthError]:
    """The row-skip counter of each streaming layer must fit its register."""
    limit = 1 << ctx.device.stream_delta2_bits
    for layer in ctx.layers:
        if not layer.streaming:
            continue
        delta2 = _stream_delta2(ctx, layer)
        if delta2 >= limit:
            yield ctx.error(
                layer,
                "pool_stride",
                f"streaming this {_dims(layer.in_dim, layer)} input with pooling stride "
                f"{layer.pool_stride[0]} skips {delta2:,} words per row, more than the "
                f"streaming counter holds ({limit - 1:,}); reduce pooling or the input width.",
            )


def _stream_delta2(ctx: Context, layer: Layer) -> int:
    cols = hw_input_dim(layer, ctx.device)[1]
    chw = layer.data_format == "CHW"
    stride_r, stride_c = layer.pool_stride
    if not ctx.device.uses_new_streaming:
        if layer.index == ctx.start:
            if ctx.options.override_delta2 is not None:
                return ctx.options.override_delta2
            return (layer.pool[0] - 1) * cols * layer.operands
        return (
            (stride_r - 1)
            * (
                hw_pooled_dim(ctx, ctx.layer(ctx.previous[layer.index]))[1]
                + 2 * hw_padding(ctx, ctx.layer(ctx.previous[layer.index]))[1]
            )
            + layer.pool[1] * layer.operands
            + ctx.options.increase_delta2
        )
    g = _stream_geometry(ctx, layer)
    delta1 = stride_c * layer.operands
    if layer.index == ctx.start:
        if ctx.options.override_delta2 is not None:
            return ctx.options.override_delta2
        if stride_r == 1 and layer.pool[0] == 1:
            delta1 -= 1
    if chw:
        delta1 = _ceil_div(delta1, 4)
    if layer.index != ctx.start:
        delta1 += ctx.options.increase_delta1
    if layer.index > 0:
        delta2 = (
            delta1 + g["col_adjust"] if stride_r == 1 else ((stride_r - 1) * cols + g["col_adjust"])
        )
    else:
        skipped = max(0, cols - g["effective"] * stride_c)
        delta2 = (
            delta1 + skipped
            if stride_r == 1
            else ((stride_r - 1) * cols + skipped + layer.pool[1] - 1)
        )
    if chw:
        delta2 = _ceil_div(delta2, 4)
    if layer.index == ctx.start:
        pipeline = (
            ctx.device.supports_pipeline if ctx.options.pipeline is None else (ctx.options.pipeline)
        )
        if pipeline and delta2 > 0:
            delta2 += 1
    else:
        delta2 += ctx.options.increase_delta2
    return delta2


# ------------------------------------------------------------------------------------------------
# Whole-network resources: quadrants, kernel memory, bias memory


def quadrants_used(ctx: Context) -> list[int]:
    used = 0
    for layer in ctx.layers:
        used |= layer.processors or 0
    final_map = ctx.output_map(ctx.layer(ctx.final)) or 0
    per = ctx.device.processors_per_group
    mask = (1 << per) - 1
    return [g for g in range(ctx.device.groups) if (used | final_map) >> g * per & mask]


@network_rule
def quadrant_zero(ctx: Context) -> Iterator[EdgesynthError]:
    if any(layer.processors is None for layer in ctx.layers):
        return
    used = quadrants_used(ctx)
    if 0 not in used:
        yield ctx.error(
            ctx.layer(ctx.start),
            "processors",
            f"no layer uses quadrant 0 (processors 0-15); the network uses quadrants "
            f"{used}, but quadrant 0 controls the accelerator and must be used by at least one "
            "layer.",
        )


def _bias_groups(layer: Layer) -> list[int] | None:
    value = layer.bias_group
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    return [value] if isinstance(value, int) else list(value)


@network_rule
def bias_group_quadrants(ctx: Context) -> Iterator[EdgesynthError]:
    if ctx.options.ignore_bias_groups or any(layer.processors is None for layer in ctx.layers):
        return
    used = quadrants_used(ctx)
    for layer in ctx.layers:
        chosen = _bias_groups(layer)
        bad = [g for g in chosen or [] if g not in used]
        if bad:
            yield ctx.error(
                layer,
                "bias_group",
                f"names quadrant {bad[0]}, which no layer of this network uses; choose one of "
                f"the used quadrants {used}.",
            )


@network_rule
def kernel_memory(ctx: Context) -> Iterator[EdgesynthError]:
    """Every processor's kernel memory must hold the kernels of all layers that use it."""
    needed = [0] * ctx.device.processors
    users: list[list[int]] = [[] for _ in range(ctx.device.processors)]
    first_over: dict[int, int] = {}
    for layer in sorted(ctx.layers, key=lambda x: x.index):
        if layer.weight_source is not None or layer.processors is None:
            continue
        out_map = ctx.output_map(layer)
        if out_map is None:
            continue
        quad = ctx.options.fast_fifo_quad and layer.index == ctx.start
        words = kernel_words(layer, out_map, ctx.max_proc, quad, hw_kernel(ctx, layer))
        if not words:
            continue
        pmap = layer.processors & (0xFFFF if quad else -1)
        for p in range(ctx.device.processors):
            if pmap >> p & 1:
                needed[p] += words
                users[p].append(layer.index)
                if needed[p] > _kernel_capacity(ctx.device, p):
                    first_over.setdefault(p, layer.index)
    if not first_over:
        return
    worst = max(first_over, key=lambda p: needed[p] - _kernel_capacity(ctx.device, p))
    capacity = _kernel_capacity(ctx.device, worst)
    layer = ctx.layer(first_over[worst])
    shown = ", ".join(_layer_name(ctx.layer(i)) for i in users[worst])
    others = len(first_over) - 1
    yield ctx.error(
        layer,
        "processors",
        f"the kernels do not fit: processor {worst} holds {capacity:,} kernel words (one 3x3 "
        f"kernel of 8-bit weights each), but layers {shown} need at least "
        f"{needed[worst]:,} of them"
        + (f" ({others} more processors overflow too)" if others else "")
        + "; use fewer or narrower layers, 1x1/smaller kernels, fewer weight bits "
        "(`quantization`), or spread layers over other processors.",
    )


def _kernel_capacity(device: Device, processor: int) -> int:
    large = processor % device.processors_per_group == 0
    return device.mask_width_large if large else device.mask_width_small


@network_rule
def bias_memory(ctx: Context) -> Iterator[EdgesynthError]:
    capacity = ctx.device.bias_words_per_group
    total = 0
    for layer in ctx.layers:
        if layer.groups > 1 or layer.weight_source is not None:
            continue
        out_map = ctx.output_map(layer)
        if out_map is None:
            continue
        if ctx.options.fast_fifo_quad and layer.index == ctx.start:
            continue
        size = bias_bytes(layer, out_map, ctx.device, ctx.max_proc)
        total += size
        if size > capacity:
            yield ctx.error(
                layer,
                "out_channels",
                f"the layer's {layer.out_channels:,} bias values ({size:,} bytes) do not fit in "
                f"one quadrant's bias memory ({capacity:,} bytes); use at most {capacity:,} "
                "output channels with bias, or train this layer without bias.",
            )
    if any(layer.processors is None for layer in ctx.layers):
        return
    quadrants = len(quadrants_used(ctx))
    if total > capacity * quadrants:
        yield ctx.error(
            ctx.layer(ctx.final),
            None,
            f"the network's bias values need {total:,} bytes, but the {quadrants} quadrant(s) "
            f"it uses hold {capacity * quadrants:,} ({capacity:,} each); use more quadrants, "
            "fewer biased output channels, or train some layers without bias.",
        )


# ================================================================================================
# Global rules: options and network-wide features

GLOBAL_RULES: list[NetworkRule] = []


def global_rule(fn: NetworkRule) -> NetworkRule:
    GLOBAL_RULES.append(fn)
    NETWORK_RULES.append(fn)
    return fn


@global_rule
def device_features(ctx: Context) -> Iterator[EdgesynthError]:
    dev = ctx.device
    for key, supported, flag in (
        ("calcx4", dev.supports_calcx4, ctx.options.calcx4),
        ("readahead", dev.supports_read_ahead, ctx.options.rd_ahead),
    ):
        if supported:
            continue
        option = "--calcx4" if key == "calcx4" else "--read-ahead"
        users = [layer for layer in ctx.layers if getattr(layer.spec, key)]
        if users:
            yield ctx.error(
                users[0],
                key,
                f"`{key}` is not supported on the {dev.name}; remove it"
                + (
                    f" (also set in layers {', '.join(str(u.index) for u in users[1:])})"
                    if len(users) > 1
                    else ""
                )
                + ".",
            )
        elif flag:
            yield ctx.global_error(None, f"`{option}` is not supported on the {dev.name}.")
    if ctx.net.spec.snoop is not None and not dev.supports_snoop:
        yield ctx.global_error("snoop", f"`snoop` is not supported on the {dev.name}; remove it.")
    for option, on, supported in (
        ("--link-layer", ctx.options.link_layer, dev.supports_link_layer),
        ("--fifo-go", ctx.options.fifo_go, dev.supports_fifo_go),
        ("--one-shot", ctx.options.one_shot, dev.supports_oneshot),
        ("--pipeline", bool(ctx.options.pipeline), dev.supports_pipeline),
        ("--pll", bool(ctx.options.pll), dev.supports_pll),
    ):
        if on and not supported:
            yield ctx.global_error(None, f"`{option}` is not supported on the {dev.name}.")


@global_rule
def start_layer(ctx: Context) -> Iterator[EdgesynthError]:
    start = ctx.options.start_layer
    if start == 0:
        return
    dev = ctx.device
    if not dev.supports_link_layer:
        yield ctx.global_error(
            None, f"`--start-layer` is not supported on the {dev.name} (networks start at 0)."
        )
    elif start > dev.max_start_layer:
        yield ctx.global_error(
            None,
            f"`--start-layer {start}`: the {dev.name} can start at layers 0 to "
            f"{dev.max_start_layer}.",
        )
    if any(layer.streaming for layer in ctx.layers):
        yield ctx.global_error(None, "`--start-layer` must be 0 when layers stream.")
    if ctx.options.uses_fifo:
        yield ctx.global_error(None, "`--start-layer` must be 0 when the input uses a FIFO.")


@global_rule
def fifo_input(ctx: Context) -> Iterator[EdgesynthError]:
    first = ctx.layer(ctx.start)
    opts = ctx.options
    if not opts.uses_fifo:
        if first.streaming and not opts.allow_streaming:
            yield ctx.error(
                first,
                "streaming",
                "a streaming first layer reads its input from the FIFOs; add `--fifo` (or "
                "`--fast-fifo`).",
            )
        return
    chw = first.data_format == "CHW"
    channels = first.in_channels
    limit = ctx.device.fifo_channels_chw if chw else ctx.device.fifo_channels_hwc
    if channels > limit or channels > ctx.device.fifo_channels_hwc:
        yield ctx.error(
            first,
            "in_channels",
            f"the input has {channels} channels; the FIFOs take at most "
            f"{ctx.device.fifo_channels_chw} (CHW) or {ctx.device.fifo_channels_hwc} (HWC).",
        )
    allowed = ctx.device.fifo_processors_chw if chw else ctx.device.fifo_processors_hwc
    if first.processors is not None and first.processors & ~allowed:
        yield ctx.error(
            first,
            "processors",
            f"{_map(first.processors)}: FIFO input reaches only processors "
            + ("0, 16, 32 and 48 (CHW)" if chw else "0-3, 16-19, 32-35 and 48-51 (HWC)")
            + f", i.e. a subset of {_map(allowed)}.",
        )
    if opts.uses_fast_fifo:
        yield from _fast_fifo_input(ctx, first)


def _fast_fifo_input(ctx: Context, first: Layer) -> Iterator[EdgesynthError]:
    chw = first.data_format == "CHW"
    limit = ctx.device.fast_fifo_channels_chw if chw else ctx.device.fast_fifo_channels_hwc
    if first.in_channels > limit:
        yield ctx.error(
            first,
            "in_channels",
            f"the fast FIFO takes {_plural(limit, 'input channel')} "
            f"({'CHW' if chw else 'HWC'}); this input has {first.in_channels}.",
        )
    if first.output_width != 8:
        yield ctx.error(
            first,
            "output_width",
            f"{first.output_width}: with the fast FIFO the first layer must write 8-bit output.",
        )
    if first.operation == "none":
        yield ctx.error(
            first,
            "operation",
            "with the fast FIFO the first layer must convolve (not a passthrough).",
        )
    if not ctx.options.riscv:
        yield ctx.global_error(None, "`--fast-fifo` requires `--riscv`.")
