"""The part of a network the MAX7800x accelerator cannot run, as an integer program for the
chip's Cortex-M4: where the graph splits (`split`), the suffix quantized to CPU layers (`lower`),
their bit-exact NumPy model (`simulate`), and the generated C and its cycle estimate (`emit`).
"""
