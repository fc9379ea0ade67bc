"""Bit-exact integer reference of the accelerator's operators and of whole networks."""
