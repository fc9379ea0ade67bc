"""Training: the `edgesynth train` loop, dataset and model registries, checkpoints, logging."""
