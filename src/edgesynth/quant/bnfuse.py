"""Batchnorm folding in a checkpoint's state dict (`edgesynth fuse-bn`), no model needed.

The arithmetic (and the folding of layers in memory, which quantization-aware training does
when it starts) is `edgesynth.nn.bnfold`'s.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from edgesynth.errors import EdgesynthError
from edgesynth.nn.bnfold import folded, fuse_bn_layers, fuse_layer

__all__ = ["folded", "fuse_bn_layers", "fuse_bn_state", "fuse_layer"]


def fuse_bn_state(state: dict[str, torch.Tensor]) -> tuple[OrderedDict[str, torch.Tensor], int]:
    """Fold batchnorm in a state dict (`<layer>.bn.*` into `<layer>.op.*`), no model needed.

    Returns the new state dict, in the same order without the `bn` entries, and the number
    of layers folded.
    """
    out: OrderedDict[str, torch.Tensor] = OrderedDict(state)
    count = 0
    for key in list(state):
        if not key.endswith(".bn.running_mean"):
            continue
        layer = key[: -len(".bn.running_mean")]
        wkey, bkey = f"{layer}.op.weight", f"{layer}.op.bias"
        if wkey not in state:
            raise EdgesynthError(
                f"layer `{layer}` has batchnorm but no `op.weight` to fold it into."
            )
        if state.get(f"{layer}.weight_bits", torch.zeros(1)).reshape(-1)[0] > 0 and not bool(
            state.get(f"{layer}.adjust_output_shift", torch.ones(1)).reshape(-1)[0]
        ):
            raise EdgesynthError(f"layer `{layer}` is already quantized; fold before quantizing.")
        w, b = folded(
            state[wkey],
            state.get(bkey),
            state[f"{layer}.bn.running_mean"],
            state[f"{layer}.bn.running_var"],
            1e-5,
            state.get(f"{layer}.bn.weight"),
            state.get(f"{layer}.bn.bias"),
        )
        out[wkey] = w
        if bkey in out:
            out[bkey] = b
        else:  # insert the new bias right after the weights, where the vendor keeps it
            items = list(out.items())
            at = [k for k, _ in items].index(wkey) + 1
            out = OrderedDict([*items[:at], (bkey, b), *items[at:]])
        for k in [k for k in out if k.startswith(f"{layer}.bn.")]:
            del out[k]
        count += 1
    return out, count
