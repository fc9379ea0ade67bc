"""What the Gati package registers with edgesynth (entry point `gati` of the group
`edgesynth.targets`): its target and its `edgesynth gati ...` commands."""

from edgesynth.targets.registry import TargetPlugin

PLUGIN = TargetPlugin(
    targets={"gati": "edgesynth.targets.gati.target:GatiTarget"},
    commands="edgesynth.targets.gati.cli:register",
)
