"""Target-independent network description: YAML spec, checkpoints, samples, the network IR."""
