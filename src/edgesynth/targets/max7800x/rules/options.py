"""The command-line options that change what is legal on the device."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


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


def rule_options(options: Any) -> RuleOptions:
    if options is None:
        return RuleOptions()
    if isinstance(options, RuleOptions):
        return options
    return RuleOptions.from_args(options)  # e.g. izer_args.IzerOptions
