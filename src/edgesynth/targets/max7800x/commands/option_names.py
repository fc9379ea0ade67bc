"""How each command spells the options that the synthesizer's messages name: the vendor's
names for `izer`, edgesynth's own for `synth`, `simulate`, `plan`, `compile` and `train`."""

from __future__ import annotations

from edgesynth.lean_dataclass import dataclass


@dataclass(frozen=True)
class OptionNames:
    """How messages spell the options a run reads: the vendor's (`VENDOR`) or edgesynth's own
    (`NATIVE`)."""

    checkpoint: str = "--checkpoint-file"  # the trained weights
    sample: str = "--sample-input"  # the sample input (.npy)
    output: str = "--test-dir/--prefix"  # the project folder


VENDOR = OptionNames()  # `edgesynth izer`
NATIVE = OptionNames(checkpoint="CHECKPOINT (after the YAML)", output="-o")  # synth, plan, ...
COMPILE = OptionNames(checkpoint="--checkpoint", output="--output")  # compile, train, evaluate
