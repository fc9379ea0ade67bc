"""edgesynth: from PyTorch to ultra-low-power CNN accelerators, bit-exact."""

__version__ = "0.1.0"
