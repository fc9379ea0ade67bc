"""The network graph every target compiles: tensors, types, operators, passes."""
