"""The options that change what is legal on the device (the `rules` group of
`options.Max7800xOptions`)."""

from __future__ import annotations

from edgesynth.lean_dataclass import dataclass


@dataclass(frozen=True)
class RuleOptions:
    """The options the rules depend on, and the accelerator features every layer uses (names
    follow the vendor's `ai8xize.py`; the planner reads the same fields)."""

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
    override_delta1: int | None = None  # --override-delta1 (the planner's; no rule reads it)
    override_delta2: int | None = None  # --override-delta2

    @property
    def uses_fast_fifo(self) -> bool:
        return self.fast_fifo or self.fast_fifo_quad

    @property
    def uses_fifo(self) -> bool:
        return self.fifo or self.uses_fast_fifo


def rule_options(options: RuleOptions | None) -> RuleOptions:
    """`options`, or the defaults when there are none."""
    return RuleOptions() if options is None else options
