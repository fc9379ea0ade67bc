"""The Gati executor: the functional model that runs an emitted DWP stream (`machine.py`), with
its own stream and instruction decoders (`dwp.py`, `isa.py`, written from the Gati document,
never the encoder's), and the program read back from its files (`readback.py`)."""
