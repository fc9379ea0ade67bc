"""What the PULP package registers with edgesynth (entry point `pulp` of the group
`edgesynth.targets`): the `gap8` target and its `edgesynth pulp ...` commands."""

from edgesynth.targets.registry import TargetPlugin

PLUGIN = TargetPlugin(
    targets={"gap8": "edgesynth.targets.pulp.target:Gap8Target"},
    commands="edgesynth.targets.pulp.cli:register",
)
