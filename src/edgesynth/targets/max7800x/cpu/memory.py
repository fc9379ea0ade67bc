"""Does the CPU part fit the chip: its buffers (the unloaded accelerator output and one buffer
per layer, static) in the Cortex-M4's SRAM, its weights and tables in flash, each beside what
the rest of the project needs (`RESERVE`)."""

from __future__ import annotations

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.firmware import MEMORY
from edgesynth.targets.max7800x.cpu.program import CpuProgram

RESERVE = 16 * 1024  # SRAM for the stack and the rest of the program; flash for its code


def _words(size: int, bits: int) -> int:
    return (size * bits // 8 + 3) // 4 * 4


def check_memory(program: CpuProgram, device: str, cut: str) -> None:
    """Refuse a CPU part whose buffers or constants do not fit, naming the tensor that does not."""
    memory = MEMORY[device]
    sram = memory.sram_length - RESERVE
    used = _words(program.in_size, program.in_bits)
    tensors = [(cut, used)] + [(layer.name, _words(layer.size, layer.out_bits))
                               for layer in program.layers]  # fmt: skip
    total = 0
    for name, size in tensors:
        total += size
        if total > sram:
            raise EdgesynthError(
                f"tensor `{name}` ({size:,} bytes) does not fit the {device}'s SRAM: the "
                f"Cortex-M4 part's buffers need {total:,} bytes by then, of the {sram:,} "
                f"left beside the rest of the program ({memory.sram_length // 1024} KiB SRAM)"
            )
    flash, total = memory.flash_length - RESERVE, 0
    for layer in program.layers:
        for array in (layer.weight, layer.bias, layer.table):
            if array is not None:
                total += array.size * (4 if array is layer.bias else 1)
        if total > flash:
            raise EdgesynthError(
                f"the weights of `{layer.name}` do not fit the {device}'s flash: the Cortex-M4 "
                f"part's constants need {total:,} bytes by then, of the {flash:,} left beside "
                f"the rest of the program ({memory.flash_length // 1024} KiB flash)"
            )
