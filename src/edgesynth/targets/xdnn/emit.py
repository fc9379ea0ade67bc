"""Write an xDNN program's files into a (staging) folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth import jsontext
from edgesynth.targets.xdnn.files import FILES
from edgesynth.targets.xdnn.filters import pack_filters
from edgesynth.targets.xdnn.imem import overlaps
from edgesynth.targets.xdnn.program import build, cmd_text, ddr_map, program_json
from edgesynth.targets.xdnn.script import encode, init_writes

if TYPE_CHECKING:
    from edgesynth.targets.xdnn.device import Engine
    from edgesynth.targets.xdnn.imem import ImemPlan
    from edgesynth.targets.xdnn.lower import Lowered


def emit(low: Lowered, plan: ImemPlan, engine: Engine, bits: int, folder: Path) -> list[str]:
    """The files of a lowered program planned by `plan` for `engine` with `bits`-wide numbers;
    returns their names."""
    bad = overlaps(plan)
    if bad:  # never expected: the planner is tested for it
        raise AssertionError(f"IMEM plan overlaps: {bad[:3]}")
    filters, offsets = pack_filters(low.layers)
    ddr = ddr_map(low, offsets)
    cmds, script = build(low, plan, ddr, bits)
    script.init = init_writes(0, 0)
    files = {
        FILES["cmd"]: cmd_text(low, cmds, plan, engine).encode(),
        FILES["json"]: (jsontext.dumps(program_json(low, cmds, engine, bits)) + "\n").encode(),
        FILES["script"]: encode(script),
        FILES["filters"]: filters,
        FILES["quant"]: (jsontext.dumps(low.quant.to_json()) + "\n").encode(),
        FILES["imem"]: (
            jsontext.dumps(
                {
                    **plan.to_json(
                        {t.name: t.shape for t in low.graph.tensors.values() if len(t.shape) == 3}
                    ),
                    "ddr": {
                        "image_region": {
                            "input_offset": ddr.input_offset,
                            "output_offset": ddr.output_offset,
                            "bytes": ddr.image_bytes,
                        },
                        "filters": {
                            k: {"weights": a, "per_channel": b} for k, (a, b) in ddr.filters.items()
                        },
                        "filter_bytes": len(filters),
                    },
                },
            )
            + "\n"
        ).encode(),
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return sorted(files)
