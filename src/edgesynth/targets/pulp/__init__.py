"""The PULP/GAP8 target: integer ONNX networks to DORY-style tiled C (see docs/pulp.md)."""
