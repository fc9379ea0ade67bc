"""Code generation for MAX78000/MAX78002: the MSDK project the vendor's tool writes."""

from edgesynth.targets.max7800x.emit.project import Project, generate

__all__ = ["Project", "generate"]
