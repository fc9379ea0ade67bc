"""Checkpoint files in, checkpoint files out: what `edgesynth quantize` and `fuse-bn` do."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edgesynth.errors import EdgesynthError
from edgesynth.quant.bnfuse import fuse_bn_state
from edgesynth.quant.checkpoint import clean_state_dict, read_checkpoint, write_checkpoint
from edgesynth.quant.ptq import LayerReport, QuantizeOptions, quantize_state


def _distinct(src: Path, dst: Path) -> None:
    if src.resolve() == dst.resolve():
        raise EdgesynthError("the output must not replace the input checkpoint.", file=str(dst))


def quantize_file(
    src: Path,
    dst: Path,
    opts: QuantizeOptions,
    inputs: Sequence[Path | None] = (),
    overwrite: bool = False,
) -> list[LayerReport]:
    """Quantize checkpoint `src` into `dst` (vendor layout); returns the per-layer report.
    `dst` must not be `src` or one of the other `inputs`, nor an existing file unless
    `overwrite`."""
    _distinct(src, dst)
    ck = read_checkpoint(src)
    state, reports = quantize_state(clean_state_dict(ck["state_dict"]), opts)
    extras = dict(ck.get("extras") or {})
    extras["clipping_method"] = opts.clip_method or "MAX_BIT_SHIFT"
    if opts.clip_method == "SCALE":
        extras["clipping_scale"] = opts.scale
    if opts.clip_method == "STDDEV":
        extras["clipping_nstds"] = opts.stddev
    write_checkpoint(
        dst,
        arch=str(ck.get("arch") or ""),
        state_dict=state,
        epoch=int(ck.get("epoch", 0) or 0),
        extras=extras,
        inputs=[src, *inputs],
        overwrite=overwrite,
    )
    return reports


def fuse_file(src: Path, dst: Path, out_arch: str | None = None, overwrite: bool = False) -> int:
    """Fold the batchnorm layers of checkpoint `src` into `dst` (an existing file only with
    `overwrite`); returns how many."""
    _distinct(src, dst)
    ck = read_checkpoint(src)
    state, count = fuse_bn_state(clean_state_dict(ck["state_dict"]))
    if count == 0:
        raise EdgesynthError("the checkpoint has no batchnorm layers to fold.", file=str(src))
    write_checkpoint(
        dst,
        arch=out_arch or str(ck.get("arch") or ""),
        state_dict=state,
        epoch=int(ck.get("epoch", 0) or 0),
        extras=dict(ck.get("extras") or {}),
        inputs=[src],
        overwrite=overwrite,
    )
    return count
