"""The vendor's description of hardware layers: the YAML network description, checkpoints,
synthetic weights, and the hardware layers (`Network`) the MAX7800x target plans."""
