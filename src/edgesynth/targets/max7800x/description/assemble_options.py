"""What the network builder is told: the vendor options that decide which layers exist, where
their weights come from and how the sample is read (`build.build_network`'s options, the
`build` group of `options.Max7800xOptions`).

It is its own module so that the builder's parts (`layer_config`, `weights`, `sequence`) read
the options without importing the builder that calls them.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.commands.option_names import VENDOR, OptionNames
from edgesynth.targets.max7800x.device import Device

ALL_LAYERS_NO_BIAS = 256  # `--no-bias` without a list: every layer


@dataclass(frozen=True)
class BuildOptions:
    """Which layers exist, where their weights and the sample come from (vendor defaults)."""

    device: Device
    checkpoint: str | None = None
    sample_input: str | None = None
    stop_after: int | None = None
    start_layer: int = 0
    no_bias: list[int] = field(default_factory=list)
    output_width: int | None = None  # --output-width: overrides the final layer's
    skip_checkpoint_layers: int = 0
    skip_yaml_layers: int = 0
    reshape_inputs: bool = False
    input_offset: int | None = None
    ignore_streaming: bool = False
    streaming_layers: list[int] = field(default_factory=list)
    base_dir: Path = Path(".")  # where implicit `tests/...` look-ups resolve
    ignore_activation: bool = False  # --ignore-activation
    ignore_bn: bool = False  # --ignore-bn: skip unfolded BatchNorm weights in the checkpoint
    test_bist: bool = False  # --test-bist with --(pretend-)zero-sram: every 7th kernel cleared
    weight_input: str | None = None  # --weight-input: synthetic weights file
    bias_input: str | None = None  # --bias-input: synthetic bias file
    synthesize_input: int | None = None  # --synthesize-input
    synthesize_words: int = 8  # --synthesize-words
    input_csv_format: int = 888  # --input-csv-format: 555/565 drop low bits of the sample
    cpu_layers: bool = False  # layers marked `cpu: true` run on the Cortex-M4 (else refused)
    names: OptionNames = VENDOR  # how the command spells the options messages name
