"""edgesynth's recorder of a generated MAX7800x project's accelerator writes (record.py), with
its C source (recorder.c) and the address map it is compiled with (mapgen.py)."""
