"""The JSON report: DRAM layout, every layer's instructions and a cycle estimate.

Cycle model (an estimate from the array geometry, not a timing simulation):

* CONV: per kernel iteration and channel iteration, 9 cycles to preload the 9x8 weight tiles,
  one cycle per output pixel (the 8 engines and 8 columns work in parallel), and 9 + 8 - 1
  cycles to fill and drain the systolic pipeline.
* FC: per 32-column pass, one cycle per input row (N) plus 32 cycles to drain: about
  N x (M / P) with P = 32.
* ELTWISE: per group of 8 channels, one cycle per pixel (the 8 channels side by side).
* Tail blocks are pipelined behind the array and add no cycles.
"""

from __future__ import annotations

from typing import Any

from edgesynth.targets.gati import device, isa
from edgesynth.targets.gati.host import host_contract
from edgesynth.targets.gati.layers import GatiLayer
from edgesynth.targets.gati.plan import CompiledProgram, LayerCode

PIPELINE_FILL = device.ENGINE_ROWS + device.ENGINE_COLS - 1


def layer_cycles(c: LayerCode) -> int:
    if c.engine == "eltwise":
        return c.kernel_itr * c.conv_shape[1] * c.conv_shape[2]
    if c.engine == "conv":
        pixels = c.conv_shape[1] * c.conv_shape[2]
        return c.kernel_itr * c.channel_itr * (device.ENGINE_ROWS + pixels + PIPELINE_FILL)
    n = c.weights.shape[1]
    return c.kernel_itr * (n + device.FC_WIDTH)


def layer_macs(c: LayerCode) -> int:
    if c.engine == "eltwise":
        return 0  # no multiply-accumulate: one operation per element
    if c.engine == "conv":
        kn, ic, kh, kw = c.weights.shape
        return kn * ic * kh * kw * c.conv_shape[1] * c.conv_shape[2]
    m, n = c.weights.shape
    return m * n


def _operands(c: LayerCode, g: GatiLayer) -> dict[str, Any]:
    """An element-wise layer's operand requantization (nothing for other layers)."""
    if c.engine != "eltwise":
        return {}
    return {"operand_scales": list(g.operand_scales), "operand_shifts": list(g.operand_shifts)}


def instruction_dict(inst: isa.Instruction, address: int) -> dict[str, Any]:
    return {
        "address": address,
        "opcode": inst.fmt.opcode,
        "name": inst.name,
        "hex": isa.encode_bytes(inst)[::-1].hex(),  # most significant byte first
        "fields": dict(inst.fields),
    }


def build_report(prog: CompiledProgram) -> dict[str, Any]:
    model = prog.model
    layers = []
    address = device.INST_ORIGIN
    total = 0
    for c, (fl, g) in zip(prog.layers, model.pairs(), strict=True):
        insts = []
        for inst in c.instructions:
            insts.append(instruction_dict(inst, address))
            address += isa.INST_BYTES
        cycles = layer_cycles(c)
        total += cycles
        layers.append(
            {
                "index": c.index,
                "name": c.name,
                "onnx_nodes": g.onnx_nodes,
                "operation": fl.operation,
                "engine": c.engine,
                "in_shape": list(c.in_shape),
                "conv_shape": list(c.conv_shape),
                "out_shape": list(c.out_shape),
                "activation": fl.activation,
                "pool": fl.pool
                and {
                    "type": fl.pool.type,
                    "kernel": list(fl.pool.kernel),
                    "stride": fl.pool.strides[0],
                },
                "channel_itr": c.channel_itr,
                "kernel_itr": c.kernel_itr,
                "on_chip_acc": c.on_chip_acc,
                "quant": {
                    "input_scale": g.in_scale,
                    "weight_scale": g.weight_scale,
                    "acc_scale": g.acc_scale,
                    "output_scale": g.out_scale,
                    "quant_en": g.quant_en,
                    "quant_scale": g.quant_scale if g.quant_en else None,
                    "quant_shift": g.quant_shift if g.quant_en else None,
                    "output_bits": 8 * g.out_bytes,
                    "bias_width": g.bias_width if c.bias is not None else None,
                    "act_param": g.act_param,
                    **_operands(c, g),
                },
                "regions": {k: r.as_dict() for k, r in c.regions.items()},
                "dispatch": c.dispatch,
                "dispatch_id": c.dispatch_id,
                "macs": layer_macs(c),
                "cycles": cycles,
                "instructions": insts,
            }
        )
    peak = device.ENGINES * device.ENGINE_ROWS * device.ENGINE_COLS
    return {
        "target": "gati",
        "model": model.chain.path,
        "opset": model.chain.opset,
        "array": {
            "engines": device.ENGINES,
            "engine_rows": device.ENGINE_ROWS,
            "engine_cols": device.ENGINE_COLS,
            "fc_width": device.FC_WIDTH,
            "conv_macs_per_cycle": peak,
        },
        "dram": {
            "bytes": prog.dram_bytes,
            "alignment": device.DRAM_ALIGN,
            "regions": [r.as_dict() for r in prog.regions],
        },
        "instruction_count": len(prog.blob) // isa.INST_BYTES,
        "stream_bytes": len(prog.stream),
        "layers": layers,
        "total_cycles": total,
        "warnings": prog.warnings,
        "host": host_contract(prog),
    }
