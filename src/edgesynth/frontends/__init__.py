"""Front ends: each turns one input format into the network graph (`edgesynth.ir.graph`) and makes
no hardware decision. One folder per format."""

# The model files the front ends read, for messages and help texts (target packages add theirs:
# edgesynth.targets.registry.model_kinds).
MODEL_KINDS = ".onnx (float or integer ONNX)"
