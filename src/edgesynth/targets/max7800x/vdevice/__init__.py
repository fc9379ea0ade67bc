"""A virtual MAX78000/MAX78002: replays the writes firmware makes to the CNN accelerator.

Written from the hardware documentation (register descriptions of the user guides, the seed
documents, the register names in the vendor's public sources), never from edgesynth's encoder:
nothing here imports `targets/max7800x/{build,layer_config,weights,...}` (a test enforces it).
Where each register fact comes from: docs/vdevice.md and the `source` of every entry in
`regmap.py`.
"""
