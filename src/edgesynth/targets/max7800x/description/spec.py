"""The parsed YAML network description, before any device semantics are applied.

`yamlcfg.load_spec` fills these from the vendor's YAML schema. Every value is normalized
(hex strings to int, `3x3` to a pair, aliases to one spelling) but nothing is inferred:
a key the YAML does not set stays None. `lines` maps each canonical key to its YAML line so
later stages (device rules, weight matching) can point at the right place.
"""

from __future__ import annotations

from dataclasses import field

from edgesynth.lean_dataclass import dataclass

# Canonical spellings used throughout edgesynth.
OPERATIONS = ("conv1d", "conv2d", "convtranspose2d", "linear", "none")
ELTWISE_OPS = ("add", "sub", "xor", "or")
ACTIVATIONS = ("relu", "abs", "none")


@dataclass
class LayerSpec:
    """One layer entry of a YAML network description, its values canonical, with the line of each
    key given."""

    index: int
    line: int  # line of the layer's `- ` entry
    lines: dict[str, int] = field(default_factory=dict)  # canonical key -> line

    name: str | None = None
    sequence: int | None = None
    next_sequence: int | str | None = None  # int, layer name, or "stop" (-1 is "stop")
    processors: int | None = None
    output_processors: int | None = None
    out_offset: int | None = None
    in_offset: int | None = None
    output_width: int | None = None  # 8 or 32
    data_format: str | None = None  # "HWC" or "CHW"
    operation: str | None = None  # one of OPERATIONS
    eltwise: str | None = None  # one of ELTWISE_OPS
    dilation: tuple[int, int] | None = None  # conv1d: (d, 1)
    groups: int | None = None
    pool_first: bool | None = None
    operands: int | None = None
    activation: str | None = None  # one of ACTIVATIONS
    quantization: int | str | None = None  # 1, 2, 4, 8 or "binary"
    output_shift: int | None = None
    kernel_size: tuple[int, int] | None = None  # conv1d: (k, 1)
    stride: tuple[int, int] | None = None
    pad: tuple[int, int] | None = None
    max_pool: tuple[int, int] | None = None
    avg_pool: tuple[int, int] | None = None
    pool_dilation: tuple[int, int] | None = None
    pool_stride: tuple[int, int] | None = None
    in_channels: int | None = None
    in_dim: tuple[int, int] | None = None  # [H, W]; a single int means (n, 1)
    in_crop: tuple[int, int] | None = None  # rows dropped at (top, bottom)
    in_sequences: list[int | str] | None = None  # layer indices, names, or -1 for the input
    out_channels: int | None = None
    streaming: bool | None = None
    flatten: bool | None = None
    write_gap: int | None = None
    read_gap: int | None = None
    bias_group: int | list[int] | str | None = None  # quadrant number or list of quadrants
    output: bool | None = None
    weight_source: int | str | None = None  # layer index or name
    buffer_shift: int | None = None
    buffer_insert: int | None = None
    output_padding: tuple[int, int] | None = None
    bias_quadrant: int | None = None  # unused: the vendor's `bias_quadrant` is `bias_group`
    tcalc: bool | None = None
    bypass: bool | None = None
    calcx4: bool | None = None
    readahead: bool | None = None
    snoop_sequence: int | str | None = None
    simulated_sequence: int | str | None = None
    in_channel_skip: int | None = None
    cpu: bool | None = None  # edgesynth's own key: the layer runs on the Cortex-M4 (`cpu_marks`)
    extra: dict[str, object] = field(default_factory=dict)  # other accepted vendor keys


@dataclass
class DataBufferSpec:
    """One `data_buffer` entry of a YAML network description."""

    processors: int
    dim: int | tuple[int, int]
    channels: int
    offset: int
    name: str | None = None
    line: int = 0
    width: int | None = None  # 8 or 32


@dataclass
class NetworkSpec:
    """A YAML network description as read: its global keys, layers and data buffers, with their
    lines."""

    path: str  # the YAML file, as given
    arch: str | None = None
    dataset: str | None = None
    output_map: int | None = None
    unload: list[dict[str, object]] | None = None
    weights: str | None = None  # synthetic weights file stem (tests/<weights>.npy)
    bias: str | None = None  # synthetic bias file stem (tests/bias_<bias>.npy)
    snoop: list[int] | None = None  # MAX78002 snoop register values, as given
    data_buffer: list[DataBufferSpec] = field(default_factory=list)
    layers: list[LayerSpec] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # global key -> line
    extra: dict[str, object] = field(default_factory=dict)

    def leaves_placement_out(self, order: list[int]) -> bool:
        """Some executed layer (of `order`) leaves `processors` to edgesynth."""
        return any(self.layers[i].processors is None for i in order)
