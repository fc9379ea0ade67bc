"""The plan step: where every tensor lives in the image memory (IMEM), with reserved
download/upload regions where they fit (the planner itself: `imem.plan_imem`)."""

from __future__ import annotations

from typing import Any

from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.imem import ImemPlan, Step, plan_imem
from edgesynth.targets.xdnn.lower import Lowered


def plan_program(low: Lowered, engine: dev.Engine) -> tuple[ImemPlan, list[str]]:
    """IMEM plan with reserved download/upload regions; when that does not fit, one shared
    arena (with a warning)."""
    steps = [Step(lay.name, list(lay.inputs), lay.output) for lay in low.layers]
    shapes = {t.name: t.shape for t in low.graph.tensors.values() if len(t.shape) == 3}
    kw: dict[str, Any] = {
        "inputs": [low.input_name],
        "outputs": [low.output_name],
        "concats": low.concats,
    }
    from edgesynth.errors import EdgesynthError

    try:
        return plan_imem(engine, steps, shapes, reserve=True, **kw), []
    except EdgesynthError:
        plan = plan_imem(engine, steps, shapes, reserve=False, **kw)  # its overflow is final
        return plan, [
            "the reserved download/upload regions do not fit beside the network's tensors; "
            "one shared IMEM region is used (no download of the next image during this one)"
        ]
