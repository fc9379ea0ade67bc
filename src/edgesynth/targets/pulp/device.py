"""GAP8 as data: the memory levels, the cluster and the costs the planner's estimates use.

Sources: DORY's hardware description for PULP/GAP8 (`HW_description.json`: L1 64,000 bytes with
a 3,500-byte stack for core 0 and 3,400 bytes for each of cores 1-7, L2 512,000 bytes, L3
8,000,000 bytes, 8 cores at 100 MHz, 32 8-bit MACs per cycle at peak, L2 bandwidth 8 bytes per
cycle, L1 32 bytes per cycle) and the seed document (L3 is HyperRAM behind the I/O DMA, L2-L1
through the cluster DMA). The code reserve (L2 kept for the program) is set per network in
DORY's configurations; 132,000 bytes is the value most of its examples use.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgesynth.quant.requant_shift import FORMAT

# The number format float models are quantized to for GAP8 (`quantize.py`): the RequantShift
# dialect's (8-bit activations, unsigned after a ReLU; 8/4/2-bit weights per output channel;
# 32-bit bias and accumulators; mul < 2**16 and shift <= 40, the multiplier rounded up).
NUMBER_FORMAT = FORMAT


@dataclass(frozen=True)
class Device:
    name: str
    l1_bytes: int
    core0_stack: int
    other_core_stack: int
    cores: int
    l2_bytes: int
    l3_bytes: int
    code_reserve: int
    frequency_hz: int
    macs_per_cycle: int  # the cluster at peak, 8-bit operands
    l2_bytes_per_cycle: int  # cluster DMA between L2 and L1
    l3_bytes_per_cycle: float  # I/O DMA from HyperRAM
    dma_setup_cycles: int  # per DMA command
    tile_overhead_cycles: int  # per tile: fork, loop bookkeeping, waits

    @property
    def l1_tile_budget(self) -> int:
        """L1 left for tiles once every core has its stack."""
        return self.l1_bytes - self.core0_stack - self.other_core_stack * (self.cores - 1)


GAP8 = Device(
    name="gap8",
    l1_bytes=64_000,
    core0_stack=3_500,
    other_core_stack=3_400,
    cores=8,
    l2_bytes=512_000,
    l3_bytes=8_000_000,
    code_reserve=132_000,
    frequency_hz=100_000_000,
    macs_per_cycle=32,
    l2_bytes_per_cycle=8,
    l3_bytes_per_cycle=1.0,
    dma_setup_cycles=30,
    tile_overhead_cycles=400,
)
