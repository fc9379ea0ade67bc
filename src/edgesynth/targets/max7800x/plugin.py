"""What the MAX7800x package registers with edgesynth (entry point `max7800x` of the group
`edgesynth.targets`): the `max78000` and `max78002` targets, the `edgesynth max7800x ...`
commands (also at the top level: `izer`, `simulate`, `synth`, `plan`, `build`, `device`), and
the reader of the vendor's YAML network description for `edgesynth compile NET.yaml`."""

from edgesynth.targets.registry import ModelReader, TargetPlugin

PLUGIN = TargetPlugin(
    targets={
        "max78000": "edgesynth.targets.max7800x.target:Max78000",
        "max78002": "edgesynth.targets.max7800x.target:Max78002",
    },
    commands="edgesynth.targets.max7800x.cli:register",
    raw_commands={"izer": "edgesynth.targets.max7800x.cli:izer_main"},
    model_readers=(
        ModelReader(
            suffixes=(".yaml", ".yml"),
            function="edgesynth.targets.max7800x.yaml_model:read_model",
            kind="the vendor's network description",
        ),
    ),
)
