"""Device rules for MAX78000 / MAX78002: every limit a network must respect to run on the chip.

`check_network(net, device, options)` runs every rule over the layers the network executes and
raises all violations together (`MultipleErrors`, or the single `EdgesynthError`). Each error
names the YAML file and line, the layer (index and name), the YAML key and the values that would
be accepted. `find_violations` returns the same list without raising. `check_spec(spec, device)`
runs the few rules that need only the YAML (layer count, offset ranges); call it before building
the network, as the vendor does, so a configuration too broken to build is refused for them.
`option_violations` runs only the global rules (options, device features).

The rules are small functions listed in `LAYER_RULES` (called once per executed layer) and
`NETWORK_RULES` (called once per network: whole-network resources, global options). Every rule
runs, so one pass reports every problem.

The derived quantities the hardware works with (passes, processors per pass, bytes per
data-memory instance, kernel words per processor, streaming buffer sizes) are public helper
functions so the resource planner and the code generator compute them the same way.

Modules: `options` (RuleOptions), `context` (what a rule sees), `sizes` (derived quantities),
`text` (message wording), `convolution`, `layers`, `processors`, `memory`, `streaming` with
`stream_geometry`, `features` (global rules), `network` (entry points and the rule registry).

Conventions of the IR this package relies on (see `build.py`):
- `in_channels` is the channel count of one operand (element-wise layers take `operands` inputs
  of that many channels), and for `flatten` layers the channel count before flattening;
- `processors`, `output_processors`, `in_offset` are as configured (None: not placed yet; rules
  that need them are skipped); `out_offset` defaults to 0;
- `output_shift` is the total shift (YAML/checkpoint value + 8 - weight bits).
"""

from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.hw_geometry import (
    emulated_1x1,
    hw_kernel,
    hw_padding,
    hw_pooled_dim,
)
from edgesynth.targets.max7800x.rules.memory import quadrants_used
from edgesynth.targets.max7800x.rules.network import (
    GEOMETRY_RULES,
    GLOBAL_RULES,
    LAYER_RULES,
    NETWORK_RULES,
    LayerRule,
    NetworkRule,
    avgpool_reset_layers,
    check_network,
    check_spec,
    find_violations,
    geometry_violations,
    option_violations,
    spec_violations,
)
from edgesynth.targets.max7800x.rules.options import RuleOptions, rule_options
from edgesynth.targets.max7800x.rules.sizes import (
    bias_bytes,
    dilated_conv1d_mode,
    ffs,
    fls,
    has_bias,
    hw_input_dim,
    input_bytes,
    input_passes,
    input_processors_needed,
    input_words_per_instance,
    kernel_words,
    memory_instances,
    output_bytes,
    output_overhang,
    output_passes,
    output_pixels,
    output_processors_needed,
    output_skip_bytes,
    output_words_per_instance,
    passes,
    popcount,
    processors_per_pass,
)
from edgesynth.targets.max7800x.rules.stream_geometry import (
    StreamBuffer,
    stream_buffers,
    stream_rollover,
)

__all__ = [
    "GEOMETRY_RULES",
    "GLOBAL_RULES",
    "LAYER_RULES",
    "NETWORK_RULES",
    "Context",
    "LayerRule",
    "NetworkRule",
    "RuleOptions",
    "StreamBuffer",
    "avgpool_reset_layers",
    "bias_bytes",
    "check_network",
    "check_spec",
    "dilated_conv1d_mode",
    "emulated_1x1",
    "ffs",
    "find_violations",
    "fls",
    "geometry_violations",
    "has_bias",
    "hw_input_dim",
    "hw_kernel",
    "hw_padding",
    "hw_pooled_dim",
    "input_bytes",
    "input_passes",
    "input_processors_needed",
    "input_words_per_instance",
    "kernel_words",
    "memory_instances",
    "option_violations",
    "output_bytes",
    "output_overhang",
    "output_passes",
    "output_pixels",
    "output_processors_needed",
    "output_skip_bytes",
    "output_words_per_instance",
    "passes",
    "popcount",
    "processors_per_pass",
    "quadrants_used",
    "rule_options",
    "spec_violations",
    "stream_buffers",
    "stream_rollover",
]
