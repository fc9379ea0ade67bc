"""The xDNN executor: the functional model that runs an emitted `script.bin` on its
`filters.bin` (`machine.py`), reading the script with its own decoder (`decode.py`: its own
register map, opcodes and header, never the encoder's)."""
