"""What the MAX7800x core is told: one typed, frozen options object (`Max7800xOptions`).

The builder, the device rules, the simulator, the planner and the project writer all take this
object; none of them sees a command line. `edgesynth izer` maps the vendor's command line into
it once (`izer.core_options`); Python callers build it directly, e.g.
`Max7800xOptions.for_device("MAX78002", plan=PlanOptions(mexpress=False))`.

It is made of one group per step, each a frozen dataclass whose fields are named after the
vendor's option they come from (`ai8xize.py`'s `dest` names, so the two vocabularies never
drift apart):

- `build` (`BuildOptions`): which layers exist, where the weights and the sample come from;
- `sim` (`SimOptions`): what changes the known-answer arithmetic;
- `rules` (`RuleOptions`): what is legal, and the accelerator features every layer uses
  (FIFOs, pipeline, PLL, link layer, streaming register tweaks);
- `plan` (`PlanOptions`, here): how kernel memory is laid out and which registers are written;
- `project` (`ProjectOptions`, here): the C project around the register writes.

Defaults are the vendor's defaults; the ones that depend on the device (pipeline and PLL where
the device has them, the load-switch delay) are filled in on construction.
"""

from __future__ import annotations

from dataclasses import field, replace

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.assemble_options import BuildOptions
from edgesynth.targets.max7800x.device import Device, get_device
from edgesynth.targets.max7800x.network_sim import SimOptions
from edgesynth.targets.max7800x.rules.options import RuleOptions


@dataclass(frozen=True)
class PlanOptions:
    """How the planner lays out kernel memory and which register writes it makes."""

    # Kernel memory
    weight_start: int = 0  # --weight-start: first kernel-memory word (per processor) for weights
    legacy_kernels: bool = False  # --legacy-kernels: the old kernel allocation (flatten layers)
    no_deduplicate_weights: bool = False  # --no-deduplicate-weights: no sharing of equal kernels
    mexpress: bool = True  # --mexpress: load kernels through the express (packed) interface
    zero_sram: bool = False  # --zero-sram: clear data/kernel memories (after a BIST) first
    # Register writes
    write_zero_registers: bool = False  # --write-zero-registers: write registers that stay 0
    init_tram: bool = False  # --init-tram: clear the TRAM before the layers run
    powerdown: bool = False  # --powerdown: power down the unused MRAM
    ext_rdy: bool = False  # --ext-rdy: set the external-ready bit in the control register
    snoop_loop: bool = False  # --snoop-loop: program the snoop registers for a snoop loop
    ready_sel: int | None = None  # --ready-sel: SRAM wait states (None: the device's)
    ready_sel_fifo: int | None = None  # --ready-sel-fifo: FIFO wait states
    ready_sel_aon: int | None = None  # --ready-sel-aon: always-on domain wait states
    # Streaming
    debug_new_streaming: bool = True  # --debug-new-streaming: the newer streaming equations
    # The known answer
    max_count: int | None = None  # --max-verify-length: check only this many output words


@dataclass(frozen=True)
class ProjectOptions:
    """The C project around the register writes: files, clocks, the Arm/RISC-V main program."""

    # Files
    config_file: str = "network.yaml"  # the network description the files cite
    c_filename: str = "main"  # --c-filename: the main program's base name
    api_filename: str = "cnn.c"  # --api-filename: the CNN library (cnn_load, cnn_start...)
    weight_filename: str = "weights.h"  # --weight-filename: the kernel image header
    sample_filename: str = "sampledata.h"  # --sample-filename: the sample input header
    result_filename: str | None = "sampleoutput.h"  # --sample-output-filename (None: none)
    log: bool = True  # --log: also write the per-layer configuration table
    log_filename: str = "log.txt"  # --log-filename
    board_name: str = "EvKit_V1"  # --board-name: the MSDK board the Makefile selects
    define: str = ""  # --define, formatted for the Makefile ("-DA -DB")
    # Clocks and power
    balance_speed: bool = True  # --balance-speed: load at a lower clock, run at full (PLL)
    clock_divider: int | None = None  # --clock-divider: CNN clock divider (None: automatic)
    clock_trim: tuple[int, int, int] | None = None  # --clock-trim: IBRO, ISO, IPO trims
    enable_delay: int | None = None  # --switch-delay: ms after cnn_enable() (None: device's)
    boost: tuple[int, int] | None = None  # --boost: (port, pin) driven during inference
    wfi: bool = True  # sleep (WFI) while the accelerator runs, instead of busy-waiting
    # The main program
    riscv_flash: bool = False  # --riscv-flash: RISC-V code in flash
    riscv_cache: bool = False  # --riscv-cache: RISC-V instruction cache
    riscv_debug: bool = False  # --riscv-debug: RISC-V debug interface
    riscv_exclusive: bool = False  # --riscv-exclusive: SRAM exclusive to the RISC-V core
    softmax: bool = False  # --softmax: a software softmax on the output
    unload: bool = True  # --unload: generate cnn_unload()
    generate_kat: bool = True  # the known-answer check (--no-kat: none)
    timer: int | None = None  # --timer: time the inference with this timer
    energy: bool = False  # --energy: energy-measurement instrumentation
    fifo_wait: bool = True  # wait for FIFO space before each push (--no-fifo-wait: do not)
    fixed_input: bool = False  # --fixed-input: alternating 0xaa/0x55 input instead of a sample
    forever: bool = False  # --forever: repeat the inference forever
    stop_start: bool = False  # --stop-start: stop and restart the accelerator
    mlator: bool = False  # --mlator: unload the output through the byte swapper
    unroll_mlator: int = 8  # --unroll-mlator: mlator reads per loop
    new_kernel_loader: bool = True  # --new-kernel-loader (--old-kernel-loader: False)
    verify_writes: bool = False  # --verify-writes: read back every register write
    verify_kernels: bool = False  # --verify-kernels: read back the kernels
    debugwait: int = 2  # --debugwait: seconds before the main program sleeps

    @property
    def verify_weights(self) -> bool:
        """Whether the kernels are read back after loading (--verify-kernels, or
        --verify-writes with the new kernel loader)."""
        return self.verify_kernels or (self.verify_writes and self.new_kernel_loader)


@dataclass(frozen=True)
class Max7800xOptions:
    """Everything the MAX7800x core is told about one network, one group per step.

    `write_for_write` true: the vendor's register writes, its firmware defects included
    (`edgesynth izer`); false: edgesynth's own path (`synth`, `compile`, `plan`), which
    writes what computes the known answer on the silicon.
    """

    build: BuildOptions
    sim: SimOptions = field(default_factory=SimOptions)
    rules: RuleOptions = field(default_factory=RuleOptions)
    plan: PlanOptions = field(default_factory=PlanOptions)
    project: ProjectOptions = field(default_factory=ProjectOptions)
    write_for_write: bool = False
    cpu_part: bool = False  # main.c runs cpu_part.c on the unloaded output (a split network)
    cpu_back: bool = False  # ... which hands its result to a second accelerator program

    def __post_init__(self) -> None:
        # The device's defaults for what was left open (None).
        dev = self.build.device
        rules = self.rules
        if rules.pipeline is None or rules.pll is None:
            rules = replace(
                rules,
                pipeline=dev.supports_pipeline if rules.pipeline is None else rules.pipeline,
                pll=dev.supports_pipeline if rules.pll is None else rules.pll,
            )
            object.__setattr__(self, "rules", rules)
        if self.project.enable_delay is None:
            project = replace(self.project, enable_delay=dev.switch_delay_ms)
            object.__setattr__(self, "project", project)

    @property
    def device(self) -> Device:
        return self.build.device

    @classmethod
    def for_device(cls, device: str | Device, **groups: object) -> Max7800xOptions:
        """The vendor's defaults for `device` (a part number or a `Device`), with the given
        groups (`rules=RuleOptions(fifo=True)`, `write_for_write=True`...) instead."""
        dev = get_device(device) if isinstance(device, str) else device
        build = groups.pop("build", None)
        if build is None:
            build = BuildOptions(device=dev)
        elif not isinstance(build, BuildOptions) or build.device != dev:
            raise ValueError(f"`build` must be the BuildOptions of the {dev.name}")
        return cls(build=build, **groups)  # type: ignore[arg-type]
