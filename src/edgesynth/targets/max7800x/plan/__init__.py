"""The vendor's resource plan for a network, as an object: kernel and bias memory, registers,
data memory use, and the latency estimate."""
