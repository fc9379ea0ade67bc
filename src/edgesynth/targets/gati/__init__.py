"""Gati: an FPGA CNN accelerator (8 engines of 9x8 weight-stationary PEs, a 1x32 FC engine)."""
