"""Behaviour of the vendor's tool (ai8x-synthesis) rather than of the silicon.

Each quirk is one named function whose docstring says what the vendor does and which corpus case
proves it. Nothing outside the code generator and its planner should need these.
"""
