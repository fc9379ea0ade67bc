"""What the xDNN package registers with edgesynth (entry point `xdnn` of the group
`edgesynth.targets`): its target and its `edgesynth xdnn ...` commands, which run without
building the other commands' parsers."""

from edgesynth.targets.registry import TargetPlugin

PLUGIN = TargetPlugin(
    targets={"xdnn": "edgesynth.targets.xdnn.target:XdnnTarget"},
    commands="edgesynth.targets.xdnn.cli:register",
    raw_commands={"xdnn": "edgesynth.targets.xdnn.cli:xdnn_main"},
)
