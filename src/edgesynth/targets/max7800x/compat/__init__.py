"""Behaviour of the vendor's tool (ai8x-synthesis) rather than of the silicon.

Each quirk is one named function whose docstring says what the vendor does and which corpus case
proves it (or that no case decides it). The izer's builder, simulator and code generator use
them; nothing here is what the silicon does.
"""
