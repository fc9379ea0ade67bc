"""The part of a network the MAX7800x accelerator cannot run, as an integer program for the
chip's Cortex-M4: where the graph splits (`split`), the suffix quantized to CPU layers (`lower`,
`program`), their bit-exact NumPy model (`simulate`, `spatial`), the generated C and its cycle
estimate (`emit`), the SRAM and flash check (`memory`), the proof's host build of the C
(`host`), the whole network on the Cortex-M4 (`alone`, --cpu-only), and what the target calls
(`hook`).
"""
