"""`edgesynth pulp simulate | compile | run | report`: integer ONNX networks on PULP/GAP8.

Only argparse at import time; the handlers import the rest when they run. `register(subparsers)`
adds the `pulp` command to the main parser; the plain functions (`simulate`, `compile_network`,
`run_program`) are what the handlers and the tests call.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from edgesynth.cliargs import add_overwrite
from edgesynth.errors import EdgesynthError
from edgesynth.flow_cli import TargetCompile, add_target_compile
from edgesynth.wording import plural

_TILE = re.compile(r"^(\d+)=(\d+)x(\d+)x(\d+)$")


# -- plain functions ------------------------------------------------------------------------------


def simulate(
    model: Path,
    inputs: list[Any] | Path,
    input_types: list[str] | None = None,
    layout: str = "hwc",
) -> dict[str, Any]:
    """The reference (sim.graph.run on the graph the target computes): every layer's output
    (`out_layerK`) and every graph tensor (`tensor.<name>`)."""
    from edgesynth.sim.graph import run
    from edgesynth.targets.base import CompileOptions
    from edgesynth.targets.pulp.data import flatten, layer_key, load_inputs
    from edgesynth.targets.pulp.target import Gap8Target, parse_types, read_network

    graph = read_network(Path(model), parse_types(input_types))
    target = Gap8Target()
    program = target.lower(graph, CompileOptions(options={}))
    g = program.graph
    shapes = [g.tensors[n].shape for n in g.inputs]
    batches = load_inputs(inputs, g.inputs, shapes) if isinstance(inputs, Path) else inputs
    for name, batch in zip(g.inputs, batches, strict=True):
        qt = g.tensors[name].qtype
        lo, hi = int(batch.min()), int(batch.max())
        if lo < qt.lo or hi > qt.hi:
            raise EdgesynthError(
                f"input `{name}` holds {lo}..{hi}, outside its type {qt} ({qt.lo}..{qt.hi}); "
                "give its type with --input-type",
                key="--input",
            )
    values = run(g, dict(zip(g.inputs, batches, strict=True)))
    samples = batches[0].shape[0]
    out: dict[str, Any] = {}
    for layer in program.layers:
        data = values[layer.output]
        for s in range(samples):
            out[layer_key(layer.index, s, samples)] = flatten(data[s], layout)
    for name, data in values.items():
        out[f"tensor.{name}"] = data
    out["_layers"] = program.layers
    out["_warnings"] = program.warnings
    return out


def compile_network(
    model: Path,
    folder: Path,
    *,
    l1: int | None = None,
    l2: int | None = None,
    code_reserve: int | None = None,
    single_buffer: bool = False,
    prefetch: bool = True,
    tiles: dict[int, tuple[int, int, int]] | None = None,
    input_types: list[str] | None = None,
    saturate_additions: bool = False,
    overwrite: bool = False,
) -> Any:
    """Lower, check, plan and emit `model` into `folder` through the output-folder rules (staged;
    an existing non-empty folder needs `overwrite`, and then only these files are replaced).
    Returns the program (its `plan` holds the report)."""
    from edgesynth.flow import compile_to
    from edgesynth.targets.pulp.target import parse_types, read_network

    graph = read_network(Path(model), parse_types(input_types))
    options = gap8_options(
        l1=l1,
        l2=l2,
        code_reserve=code_reserve,
        single_buffer=single_buffer,
        prefetch=prefetch,
        tiles=tiles,
        saturate_additions=saturate_additions,
    )
    program, _ = compile_to(
        graph, "gap8", options=options, out=folder, overwrite=overwrite, inputs=[model]
    )
    return program


def gap8_options(
    *,
    l1: int | None = None,
    l2: int | None = None,
    code_reserve: int | None = None,
    single_buffer: bool = False,
    prefetch: bool = True,
    tiles: dict[int, tuple[int, int, int]] | None = None,
    saturate_additions: bool = False,
) -> dict[str, object]:
    """The gap8 target's options (`CompileOptions.options`) from `pulp compile`'s settings."""
    return {
        "l1": l1,
        "l2": l2,
        "code_reserve": code_reserve,
        "double_buffer": not single_buffer,
        "prefetch": prefetch,
        "tiles": dict(tiles or {}),
        "saturate_additions": saturate_additions,
    }


def run_program(
    folder: Path,
    inputs: list[Any] | Path,
    toolchain: str = "host",
    layout: str = "hwc",
    accumulators: bool = False,
) -> dict[str, Any]:
    """Build the generated C (host or rv32) and run it: every layer's output and checksum; with
    `accumulators`, also each layer's accumulators as `tensor.<name>` (N, C, H, W)."""
    from edgesynth.targets.base import read_manifest

    read_manifest(Path(folder))  # a folder compile wrote, or one clear message
    import numpy as np

    from edgesynth.targets.pulp.data import flatten, layer_key, load_inputs
    from edgesynth.targets.pulp.executor.build import build, execute, read_layout

    folder = Path(folder)
    layout_info = read_layout(folder)
    names = [e["tensor"] for e in layout_info["inputs"]]
    shapes = [tuple(e["shape_chw"]) for e in layout_info["inputs"]]
    batches = load_inputs(inputs, names, shapes) if isinstance(inputs, Path) else inputs
    binary = build(folder, toolchain)
    result = execute(folder, batches, toolchain, binary, accumulators=accumulators)
    samples = batches[0].shape[0]
    out: dict[str, Any] = {}
    for s in range(samples):
        for entry, value, checksum in zip(
            layout_info["layers"], result.outputs[s], result.checksums[s], strict=True
        ):
            out[layer_key(entry["index"], s, samples)] = flatten(value, layout)
            out[layer_key(entry["index"], s, samples, "checksum")] = checksum
    if accumulators:
        for name in result.accumulators[0]:
            out[f"tensor.{name}"] = np.stack([acc[name] for acc in result.accumulators])
    return out


# -- handlers -----------------------------------------------------------------------------------


def _print_warnings(warnings: list[str]) -> None:
    for w in warnings:
        print(f"edgesynth: warning: {w}", file=sys.stderr)


def simulate_cmd(args: argparse.Namespace) -> int:
    from edgesynth.outputs import check_output_file
    from edgesynth.targets.pulp.data import save_npz

    inputs = (args.model, args.input)
    check_output_file(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    result = simulate(args.model, args.input, args.input_type, args.layout)
    layers = result.pop("_layers")
    _print_warnings(result.pop("_warnings"))
    path = save_npz(args.output, result, overwrite=args.overwrite, inputs=inputs)
    print(
        f"{args.model.name}: {plural(len(layers), 'layer')}; wrote every layer's output to {path}"
    )
    return 0


def _tiles(values: list[str] | None) -> dict[int, tuple[int, int, int]]:
    out: dict[int, tuple[int, int, int]] = {}
    for v in values or []:
        m = _TILE.match(v)
        if not m:
            raise EdgesynthError(
                f"`{v}`: write LAYER=CxHxW, LAYER being the layer's index (0-based, the `#` "
                "column of the plan table), e.g. 3=32x8x16",
                key="--tile",
            )
        out[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return out


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--l1", type=int, help="L1 bytes for tiles (default 36700: 64000 - stacks)")
    p.add_argument("--l2", type=int, help="L2 bytes (default 512000)")
    p.add_argument("--code-reserve", type=int, help="L2 bytes kept for code (default 132000)")
    p.add_argument("--single-buffer", action="store_true", help="no double buffering")
    p.add_argument("--no-prefetch", action="store_true", help="no weight prefetch from L3")
    p.add_argument(
        "--tile",
        action="append",
        metavar="LAYER=CxHxW",
        help="force the tile shape (channels x rows x columns) of layer LAYER, its index "
        "(0-based, the `#` column of the plan table) (repeatable)",
    )
    p.add_argument(
        "--saturate-additions",
        action="store_true",
        help="store an unclipped addition of 8-bit values in 8 bits, saturated, as DORY does "
        "(not what the graph computes when the sum exceeds 8 bits)",
    )
    _type_option(p)


def _compile_options(args: argparse.Namespace) -> dict[str, object]:
    return gap8_options(
        l1=args.l1,
        l2=args.l2,
        code_reserve=args.code_reserve,
        single_buffer=args.single_buffer,
        prefetch=not args.no_prefetch,
        tiles=_tiles(args.tile),
        saturate_additions=args.saturate_additions,
    )


def _compile_report(args: argparse.Namespace, program: Any, files: list[str]) -> None:
    print(program.plan.table())
    print(
        f"wrote {args.output}: network.c and its kernels, HALs, main.c, Makefile, weights.bin, "
        "plan.json, report.txt"
    )


COMPILE = TargetCompile(
    target="gap8",
    description="Plan an integer ONNX network over L3/L2/L1 and write its tiled C into the "
    "output folder: `edgesynth compile -t gap8` with the gap8 options as flags.",
    arguments=_compile_arguments,
    options=_compile_options,
    report=_compile_report,
    model_help="integer ONNX network",
    reader_options=lambda args: {"input_types": args.input_type} if args.input_type else {},
)


def run_cmd(args: argparse.Namespace) -> int:
    from edgesynth.outputs import check_output_file
    from edgesynth.targets.pulp.data import save_npz

    inputs = (args.folder, args.input)
    check_output_file(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    result = run_program(
        args.folder, args.input, "rv32" if args.rv32 else "host", args.layout, args.accumulators
    )
    path = save_npz(args.output, result, overwrite=args.overwrite, inputs=inputs)
    layers = sum(1 for k in result if k.startswith("out_"))
    print(
        f"{args.folder}: ran the generated C ({'rv32 under qemu' if args.rv32 else 'host build'});"
        f" wrote {plural(layers, 'layer output')} and their checksums to {path}"
    )
    return 0


def report_cmd(args: argparse.Namespace) -> int:
    from edgesynth.targets.pulp.target import REPORT

    path = Path(args.folder) / REPORT
    if not path.is_file():
        raise EdgesynthError(f"{args.folder} has no {REPORT}; compile a network into it first")
    print(path.read_text(), end="")
    return 0


def _type_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input-type",
        action="append",
        metavar="TYPE",
        help="integer type of the network input (uint8, int8, uint4, int2, ...; repeat for "
        "several inputs; default uint8)",
    )


def register(subparsers: Any) -> None:
    pulp = subparsers.add_parser(
        "pulp",
        help="integer ONNX networks on PULP/GAP8 (DORY-style tiled C)",
        description="NEMO, Quantlab and RequantShift ONNX networks on PULP/GAP8: the bit-exact "
        "reference, L3/L2/L1 planning and tiling, generated C, and running it.",
    )
    sub = pulp.add_subparsers(dest="pulp_command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", help="every layer's output from the integer reference")
    p.add_argument("model", type=Path, help="integer ONNX network")
    p.add_argument("--input", type=Path, required=True, help="inputs (.npz or .npy)")
    p.add_argument("--output", type=Path, required=True, help="results (.npz)")
    add_overwrite(p, "the --output file")
    p.add_argument("--layout", choices=("hwc", "chw"), default="hwc", help="order of out_layerK")
    _type_option(p)
    p.set_defaults(handler=simulate_cmd)

    add_target_compile(sub, COMPILE, help="plan the network and generate its C")

    p = sub.add_parser("run", help="build the generated C and run it on inputs")
    p.add_argument("folder", type=Path, help="a folder `edgesynth pulp compile` wrote")
    p.add_argument("--input", type=Path, required=True, help="inputs (.npz or .npy)")
    p.add_argument("--output", type=Path, required=True, help="results (.npz)")
    add_overwrite(p, "the --output file")
    p.add_argument("--rv32", action="store_true", help="RV32IMC build under qemu-riscv32")
    p.add_argument(
        "--accumulators",
        action="store_true",
        help="also write each layer's accumulators (tensor.<name>), from a debug trace",
    )
    p.add_argument("--layout", choices=("hwc", "chw"), default="hwc", help="order of out_layerK")
    p.set_defaults(handler=run_cmd)

    p = sub.add_parser("report", help="print the plan of a compiled program")
    p.add_argument("folder", type=Path)
    p.set_defaults(handler=report_cmd)
