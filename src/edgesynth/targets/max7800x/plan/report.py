"""The plan as the vendor's log shows it: per-layer configuration lists, in the vendor's spelling.

`configuration(plan)` returns the entries of the vendor's "Per-layer configuration" table (the
same keys and value formats as the corpus's plan.json), `render_table` the text `--verbose`
prints and the log keeps, followed by the layer register writes and the latency estimate.
"""

from __future__ import annotations

from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.plan.writes import Note, Write

_ACTIVATION = {"relu": "ReLU", "abs": "Abs", None: "no"}
_OPERATOR = {"none": "passthrough"}


def _lst(values) -> str:
    return "[" + ", ".join(values) + "]"


def _pairs(values) -> str:
    return _lst(f"[{a}, {b}]" for a, b in values)


def configuration(plan: Plan) -> dict[str, str]:
    """The vendor's per-layer lists, one entry per layer 0..final."""
    s = plan.settings
    hw = [s.by_index.get(i) for i in range(s.layer_count)]
    layers = [h for h in hw if h is not None]
    if len(layers) != len(hw):  # --start-layer: the vendor lists unconfigured layers too
        hw = layers

    def col(fn) -> list:
        return [fn(h) for h in hw]

    groups = s.chip.groups
    table: dict[str, str] = {
        "Quadrant map": str(
            col(lambda h: [g for g in range(groups) if s.chip.group_bits(h.processor_map, g)])
        ),
        "Input offset": _lst(col(lambda h: f"0x{h.in_offset:04x}")),
        "Streaming": str(col(lambda h: h.streaming)),
        "Input channels": str(col(lambda h: h.input_chan)),
        "Input dimensions": _pairs(col(lambda h: h.input_dim)),
        "Flatten": str(col(lambda h: h.flatten)),
    }
    if any(h.input_skip for h in hw):
        table["Input read gap"] = str(col(lambda h: h.input_skip))
    table["Input expansion"] = str(col(lambda h: h.in_expand))
    table["Expansion threshold"] = str(col(lambda h: h.in_expand_thresh))
    table["Pooling"] = _pairs(col(lambda h: h.pool))
    if any(h.pool_dilation != (1, 1) for h in hw):
        table["Pooling dilation"] = _pairs(col(lambda h: h.pool_dilation))
    table["Pooling stride"] = _pairs(col(lambda h: h.pool_stride))
    table["Pooled dimensions"] = _pairs(col(lambda h: h.pooled_dim))
    table["Processor map"] = _lst(col(lambda h: f"0x{h.processor_map:016x}"))
    table["Element-wise op"] = _lst(col(lambda h: h.eltwise or "none"))
    table["Operand expansion"] = str(col(lambda h: h.operands))
    table["Output channels"] = str(col(lambda h: h.output_chan))
    table["Output dimensions"] = _pairs(col(lambda h: h.output_dim))
    if any(h.write_gap for h in hw):
        table["Output write gap"] = str(col(lambda h: h.write_gap))
    table["Output expansion"] = str(col(lambda h: h.out_expand))
    table["Expansion threshold (out)"] = str(col(lambda h: h.out_expand_thresh))
    table["Output shift"] = str(col(lambda h: h.output_shift))
    table["Output processors"] = _lst(col(lambda h: f"0x{h.output_processor_map:016x}"))
    table["Output data bits"] = str(col(lambda h: h.output_width))
    table["Quadrant with bias"] = str(plan.bias_quadrants)
    table["Bias offset"] = str(plan.bias_offsets)
    table["Output offset"] = _lst(col(lambda h: f"0x{h.out_offset:04x}"))
    table["Operator"] = _lst(col(lambda h: _OPERATOR.get(h.operator, h.operator)))
    table["Activation"] = _lst(col(lambda h: _ACTIVATION[h.activation]))
    table["Kernel offset"] = str(plan.kernel_offsets)
    table["Kernel length"] = str(plan.kernel_lengths)
    table["Kernel count"] = str(plan.kernel_counts)
    table["Kernel dimensions"] = _pairs(col(lambda h: h.kernel_size))
    if any(h.dilation != (1, 1) for h in hw):
        table["Dilation"] = _pairs(col(lambda h: h.dilation))
    table["Kernel size (bits)"] = _lst(
        col(lambda h: "b" if h.quantization == -1 else str(h.quantization))
    )
    if any(h.bypass for h in hw):
        table["Kernel bypass"] = str(col(lambda h: h.bypass))
    table["Convolution groups"] = str(col(lambda h: h.groups))
    table["Padding"] = _pairs(col(lambda h: h.padding))
    table["Stride"] = _pairs(col(lambda h: h.stride))
    return table


def render_table(plan: Plan) -> str:
    """The per-layer configuration, the layer registers and the latency, as text."""
    s = plan.settings
    lines = [
        "Global configuration:",
        "---------------------",
        f"Used processors     = 0x{_used_processors(plan):016x}",
        f"Used quadrants      = {s.groups_used}",
        "",
        "Per-quadrant configuration:",
        "---------------------------",
        f"Used bias memory    = {plan.bias.used}",
        "",
        "Per-layer configuration:",
        "------------------------",
    ]
    for key, value in configuration(plan).items():
        lines.append(f"{key:<20}= {value}")
    lines += ["", "Layer register configuration:", "-----------------------------"]
    for item in plan.configure.items:
        if isinstance(item, Note):
            lines.append(f"// {item.text}")
        elif isinstance(item, Write):
            lines.append(f"({item.address:08x}): {item.value:08x} // {item.comment}")
    if plan.latency is not None:
        lines += ["", "ESTIMATED LATENCY", f"{'Startup':9}{1:18,}"]
        for index, cycles in plan.latency.layers:
            rough = " (est)" if s.by_index[index].streaming else ""
            lines.append(f"{'Layer ' + str(index):9}{cycles:18,}{rough}")
        total = f"{plan.latency.total:22,} cycles" + (" (est)" if plan.latency.rough else "")
        lines += ["                 ==========", f"Total{total}"]
    return "\n".join(lines) + "\n"


def _used_processors(plan: Plan) -> int:
    used = 0
    for h in plan.hw:
        used |= h.processor_map
    return used
