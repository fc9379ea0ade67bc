"""The vendor's description of hardware layers: the YAML network description, checkpoints,
synthetic weights, and the hardware layers (`Network`) the MAX7800x target plans.

`assemble` turns a parsed description, weights and a sample into the `Network` (its options:
`assemble_options`; its parts: `layer_config`, `weights`, `sequence`, `shapes`, `buffers`)."""
