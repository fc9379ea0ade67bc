"""`edgesynth validate`: how far a target's bit-exact model is from the float model on real
samples. `metrics` (the numbers), `samples` (the user's data), `reference` (the float model),
`core` (the comparison), `text` (the report), `cli` (the command)."""
