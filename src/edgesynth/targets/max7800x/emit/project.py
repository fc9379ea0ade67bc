"""Render a plan into the files of an MSDK project: one Jinja2 template per file.

Every number comes from the plan; the templates only lay the C out. Large arrays (the kernel
image, the sample input, the known answer) are formatted with NumPy (`carrays`).
"""

from __future__ import annotations

from dataclasses import field
from functools import lru_cache
from typing import Any

import numpy as np
from jinja2 import Environment, StrictUndefined

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x import regmap as rm
from edgesynth.targets.max7800x.emit.carrays import define
from edgesynth.targets.max7800x.emit.template_modules import CompiledLoader
from edgesynth.targets.max7800x.emit.unload import unload_runs
from edgesynth.targets.max7800x.options import Max7800xOptions
from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.plan.writes import Check, Fill, Note, Wait, Write, Writes

RISCV_FLASH = '__attribute__ ((section(".rvflash_section")))\n'
CLOCKS = {"MAX78000": {"ipo": 100, "pll": 0}, "MAX78002": {"ipo": 120, "pll": 200}}
MAX_NO_PIPELINE_MHZ = 50


@lru_cache(maxsize=1)
def _environment() -> Environment:
    return Environment(
        loader=CompiledLoader("edgesynth.targets.max7800x", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=StrictUndefined,
        autoescape=False,
    )


def render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)


def c_statements(writes: Writes, verify: bool = False) -> list[str]:
    """The writes as C statements (a register clear wait becomes a spin loop); with `verify`
    every readable register is read back (--verify-writes)."""
    lines = []
    for item in writes.items:
        if isinstance(item, Write):
            comment = f" // {item.comment}" if item.comment else ""
            target = f"*((volatile uint32_t *) 0x{item.address:08x})"
            lines.append(f"  {target} = 0x{item.value:08x};{comment}")
            if verify and item.verify:
                lines.append(f"  if ({target} != 0x{item.value:08x}) return CNN_FAIL;")
        elif isinstance(item, Wait):
            lines.append(
                f"  while ((*((volatile uint32_t *) 0x{item.address:08x}) & 0x{item.mask:x}) "
                f"!= 0x{item.value:x}); // {item.comment}"
            )
        elif isinstance(item, Check):
            lines.append(
                f"  if ((*((volatile uint32_t *) 0x{item.address:08x}) & 0x{item.mask:x}) "
                f"!= 0x{item.value:x}) return CNN_FAIL; // {item.comment}"
            )
        elif isinstance(item, Fill):
            lines.append(
                f"  memset((uint32_t *) 0x{item.address:08x}, 0, {item.size}); // {item.comment}"
            )
        elif isinstance(item, Note):
            lines.append(f"  // {item.text}")
    return lines


@dataclass
class Clocking:
    """The CNN clock a project runs with, and how cnn_enable() selects it."""

    source: str  # PCLK | IPLL
    name: str  # for comments
    divider: int  # the CNN clock divider the network runs with
    enable_divider: int  # the divider cnn_enable() selects
    switch: bool  # raise the clock only while the accelerator runs (PLL + pipeline)
    mhz: float  # the CNN clock the network runs at: the source's speed over `divider`


def clocking(opts: Max7800xOptions, device: str) -> Clocking:
    clocks = CLOCKS[device]
    apb = clocks["ipo"] // 2
    speed = clocks["pll"] if opts.rules.pll else apb
    divider = opts.project.clock_divider
    if divider is None:
        if opts.rules.pipeline:
            divider = 1
        else:
            divider = max(1, -(-speed // MAX_NO_PIPELINE_MHZ))
            divider = 1 << (divider - 1).bit_length()
    name = f"PLL ({clocks['pll']} MHz)" if opts.rules.pll else f"APB ({apb} MHz)"
    return Clocking(
        source="IPLL" if opts.rules.pll else "PCLK",
        name=name,
        divider=divider,
        enable_divider=4 if opts.rules.pll and opts.project.balance_speed else divider,
        switch=bool(opts.rules.pll and opts.rules.pipeline and opts.project.balance_speed),
        mhz=speed / divider,
    )


def _select_clock(divider: int) -> str:
    return (
        "MXC_GCR->pclkdiv = (MXC_GCR->pclkdiv & ~(MXC_F_GCR_PCLKDIV_CNNCLKDIV | "
        "MXC_F_GCR_PCLKDIV_CNNCLKSEL))\n"
        f"                     | MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV{divider} | "
        "MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL;"
    )


def layer_description(plan: Plan) -> list[str]:
    lines = [f"{len(plan.hw)} layers, input {'CHW' if plan.hw[0].big_data else 'HWC'}:"]
    for h in plan.hw:
        dims = "x".join(str(d) for d in (h.input_chan, *h.input_dim))
        pool = (
            f"{'avg' if h.pool_average else 'max'} pool {h.pool[0]}x{h.pool[1]} "
            f"stride {h.pool_stride[0]}"
            if h.pooling
            else "no pooling"
        )
        op = h.operator if h.operator != "none" else "passthrough"
        extra = ""
        if h.operator not in ("none", "linear"):
            extra = f" {h.kernel_size[0]}x{h.kernel_size[1]} pad {h.padding[0]}"
        if h.operands > 1:
            extra += f", {h.operands}-operand {h.eltwise}"
        out = "x".join(str(d) for d in (h.output_chan, *h.output_dim))
        act = f", {h.activation}" if h.activation else ""
        lines.append(f"Layer {h.index}: {dims} in, {pool}, {op}{extra}{act}, {out} out")
    return lines


def memory_summary(plan: Plan) -> list[str]:
    s = plan.settings
    kernel_words = int((s.kernels.owner >= 0).sum())
    weight_bytes = sum(
        int(h.kernel.size) * h.bits // 8
        for h in plan.hw
        if h.kernel is not None and h.kernel_source == h.index
    )
    bias_bytes = sum(int(v.size) for v in plan.bias.values)
    lines = [
        f"Weight memory: {kernel_words:,} kernel words used ({weight_bytes:,} bytes of weights)",
        f"Bias memory: {bias_bytes:,} bytes used per quadrant {plan.bias.used}",
    ]
    if plan.latency is not None:
        rough = " (rough: streaming layers)" if plan.latency.rough else ""
        lines.append(f"Estimated latency: {plan.latency.total:,} cycles{rough}")
    return lines


@dataclass
class Project:
    """A project's files, by name, as text."""

    files: dict[str, str] = field(default_factory=dict)


def generate(plan: Plan, opts: Max7800xOptions, name: str, config_file: str) -> Project:
    """Every file of the project, as text."""
    device = plan.settings.chip.device.name
    riscv = bool(opts.rules.riscv)
    common = _common_context(opts, name, device, config_file, riscv)
    api = opts.project.api_filename if opts.project.api_filename.lower() != "none" else "cnn.c"
    # --fixed-input (memory input): load_input() fills the input with a fixed pattern
    fixed_input = bool(opts.project.fixed_input) and not plan.inputs.fifo
    files: dict[str, str] = {}
    files[api] = _api_source(plan, opts, common, fixed_input)
    files["cnn.h"] = render(
        "cnn.h.j2",
        **common,
        summary=memory_summary(plan),
        num_outputs=int(np.prod(plan.output_shape)),
        timer=opts.project.timer,
        isr_name="CNN_IRQHandler" if riscv else "CNN_ISR",
    )
    files[opts.project.weight_filename] = _weights_header(plan, name)
    files[opts.project.sample_filename] = _sample_header(plan, name, fixed_input)
    kat = bool(opts.project.generate_kat) and opts.project.result_filename is not None
    if kat:
        from edgesynth.targets.max7800x.plan.kat import sample_output_array

        files[opts.project.result_filename] = render(
            "sampleoutput.h.j2",
            name=name,
            sample_output=define("SAMPLE_OUTPUT", sample_output_array(plan.kat)),
        )
    main = _main_source(plan, opts, common, fixed_input, kat)
    main_name = f"{opts.project.c_filename}.c"
    if riscv:
        files[f"{opts.project.c_filename}_riscv.c"] = main
        files[main_name] = _arm_main_source(opts, common, device)
    else:
        files[main_name] = main
    files["softmax.c"] = render("softmax.c.j2", name=name)
    return Project(files=files)


def _common_context(
    opts: Max7800xOptions, name: str, device: str, config_file: str, riscv: bool
) -> dict[str, Any]:
    """What every template is told: the project, the device, where code and data live, the
    header names."""
    return {
        "name": name,
        "device": device,
        "config_file": config_file,
        "riscv": riscv,
        "func_flash": RISCV_FLASH
        if opts.project.riscv_flash and not opts.project.riscv_cache
        else "",
        "data_flash": RISCV_FLASH if opts.project.riscv_flash else "",
        "energy": bool(opts.project.energy),
        "energy_gpio": bool(opts.project.energy) and device == "MAX78002",
        "weights_header": opts.project.weight_filename,
        "sample_header": opts.project.sample_filename,
        "result_header": opts.project.result_filename,
    }


def _isr_clear(opts: Max7800xOptions, plan: Plan) -> str:
    """The interrupt flags the CNN interrupt handler clears."""
    s = plan.settings
    if opts.rules.one_shot and s.chip.device.name == "MAX78002":
        return "1<<12"
    if any(h.streaming for h in s.hw):
        return "(1<<12) | (1<<14) | 1"
    return "(1<<12) | 1"


def _verify_weights(opts: Max7800xOptions) -> bool:
    return opts.project.verify_weights


def _api_source(
    plan: Plan, opts: Max7800xOptions, common: dict[str, Any], fixed_input: bool
) -> str:
    """cnn.c: the accelerator's functions (load, configure, start, unload...)."""
    s = plan.settings
    regs = s.chip.regs
    term = s.by_index[s.terminating]
    groups_mask = sum(1 << g for g in s.groups_used)
    stride = regs.mask_stride
    bias_groups = [
        {"group": g, "address": regs.apb_base + regs.bias(g), "length": int(v.size)}
        for g, v in enumerate(plan.bias.values)
        if v.size
    ]
    return render(
        "cnn.c.j2",
        **common,
        fixed_input=fixed_input,
        description=layer_description(plan),
        isr_declaration=(
            'void __attribute__((interrupt("machine"))) CNN_IRQHandler'
            if common["riscv"]
            else "void CNN_ISR"
        ),
        quadrant_controls=[regs.apb_base + regs.ctl(g, rm.REG_CTL) for g in s.groups_used],
        isr_clear=_isr_clear(opts, plan),
        master_control=regs.apb_base + regs.ctl(s.groups_used[0], rm.REG_CTL),
        mexpress=bool(opts.plan.mexpress),
        verify_weights=_verify_weights(opts),
        mexpress_base_mask=~(stride - 1) & 0xFFFFFFFF,
        mexpress_offset_mask=stride - 1,
        bias_groups=bias_groups,
        init=c_statements(plan.init, opts.project.verify_writes),
        configure=c_statements(plan.configure, opts.project.verify_writes),
        start=c_statements(plan.start, opts.project.verify_writes),
        go=c_statements(plan.go, opts.project.verify_writes),
        unload=unload_runs(plan, bool(opts.project.mlator), opts.project.unroll_mlator),
        generate_unload=bool(opts.project.unload),  # --no-unload: declared in cnn.h, not defined
        output_description="x".join(str(d) for d in plan.output_shape)
        + f", {term.output_width}-bit",
        quadrant_mask=groups_mask,
        quadrant_unmask=~groups_mask & 0xF,
        enable_delay=opts.project.enable_delay,
        pll_device=s.chip.device.supports_pll,
    )


def _weights_header(plan: Plan, name: str) -> str:
    """weights.h: the kernel image and each group's bias."""
    return render(
        "weights.h.j2",
        name=name,
        kernels=define("KERNELS", _kernel_table(plan)),
        bias=[
            define(f"BIAS_{g}", v, digits=2, per_line=16)
            for g, v in enumerate(plan.bias.values)
            if v.size
        ],
    )


def _sample_header(plan: Plan, name: str, fixed_input: bool) -> str:
    """sampledata.h: the sample input, block by block (none with a fixed input)."""
    sample_blocks = []
    for block in [] if fixed_input else plan.inputs.blocks:
        words = block.words
        if plan.inputs.synthesize is not None:
            words = words[: plan.inputs.synthesize_words]
        sample_blocks.append(define(f"SAMPLE_INPUT_{block.label}", words))
    return render("sampledata.h.j2", name=name, blocks=sample_blocks)


def _main_source(
    plan: Plan, opts: Max7800xOptions, common: dict[str, Any], fixed_input: bool, kat: bool
) -> str:
    """main.c (the RISC-V's with --riscv): clocks, loading, the run, the known-answer check."""
    s = plan.settings
    device = common["device"]
    riscv = common["riscv"]
    clock = clocking(opts, device)
    term = s.by_index[s.terminating]
    inputs = plan.inputs
    return render(
        "main.c.j2",
        **common,
        inputs=inputs,
        fixed_input=fixed_input,
        fifo=bool(opts.rules.fifo),
        fifo_wait=bool(opts.project.fifo_wait),
        fifo_words=max((b.words.size for b in inputs.blocks), default=0),
        kat=kat,
        kat_layers=", ".join(str(i) for i in _kat_layers(plan)),
        softmax=bool(opts.project.softmax),
        softmax_shift=(8 - term.bits) if not term.bypass else 0,
        unload=bool(opts.project.unload),
        cpu_part=opts.cpu_part,
        output_width=term.output_width,
        forever=bool(opts.project.forever),
        riscv_debug=bool(opts.project.riscv_debug),
        riscv_cache=bool(opts.project.riscv_cache),
        ipo_mhz=CLOCKS[device]["ipo"],
        pll=bool(opts.rules.pll),
        debugwait=opts.project.debugwait if not riscv else 0,
        clock_name=clock.name,
        clock_source=clock.source,
        enable_divider=clock.enable_divider,
        boost=opts.project.boost,
        zero_sram=bool(opts.plan.zero_sram),
        verify_weights=_verify_weights(opts),
        verify_writes=bool(opts.project.verify_writes),
        has_bias=s.any_bias,
        clock_switch=clock.switch,
        clock_fast=_select_clock(clock.divider),
        clock_slow=_select_clock(4),
        stop_start=bool(opts.project.stop_start),
        wfi=bool(opts.project.wfi),
        sleep_call=_sleep_call(opts),
        one_shot=s.terminating if opts.rules.one_shot else 0,
        clock_trim=opts.project.clock_trim,
    )


def _arm_main_source(opts: Max7800xOptions, common: dict[str, Any], device: str) -> str:
    """With --riscv, the Arm core's main.c: it starts the RISC-V and sleeps."""
    return render(
        "main_arm.c.j2",
        **common,
        wfi=bool(opts.project.wfi),
        pll=bool(opts.rules.pll),
        ipo_mhz=CLOCKS[device]["ipo"],
        riscv_cache=bool(opts.project.riscv_cache),
        riscv_exclusive=bool(opts.project.riscv_exclusive),
        debugwait=opts.project.debugwait,
        deepsleep=bool(opts.rules.deepsleep),
        sleep_call="MXC_LP_EnterLowPowerMode()"
        if opts.rules.deepsleep
        else "MXC_LP_EnterSleepMode()",
    )


def _sleep_call(opts: Max7800xOptions) -> str:
    if opts.rules.riscv:
        return 'asm volatile("wfi")'
    return "MXC_LP_EnterLowPowerMode()" if opts.rules.deepsleep else "MXC_LP_EnterSleepMode()"


def _kat_layers(plan: Plan) -> list[int]:
    s = plan.settings
    outputs = [h.index for h in s.hw if h.layer.output]
    if s.terminating not in outputs:
        outputs.append(s.terminating)
    return sorted(outputs)


def _kernel_table(plan: Plan) -> np.ndarray:
    parts: list[np.ndarray] = []
    for block in plan.kernels:
        parts.append(np.array([block.address, block.length], dtype=np.uint32))
        parts.append(block.words)
    parts.append(np.zeros(1, dtype=np.uint32))
    return np.concatenate(parts)
