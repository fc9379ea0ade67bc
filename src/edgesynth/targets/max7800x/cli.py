"""The MAX7800x commands: `edgesynth izer` (the vendor's command line) and `edgesynth simulate`.

Only argparse here; the handlers import the synthesizer when they run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edgesynth.cliargs import device_name


def _izer(argv: list[str]) -> int:
    from edgesynth.targets.max7800x.izer import run_izer

    run_izer(argv)
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from edgesynth.targets.max7800x.simulate_cmd import run_simulate

    run_simulate(
        network=args.network,
        checkpoint=args.checkpoint,
        device=args.device,
        sample_input=args.sample_input,
        save=args.save,
        output=args.output,
        stop_after=args.stop_after,
        avg_pool_rounding=args.avg_pool_rounding,
        overwrite=args.overwrite,
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    izer = subparsers.add_parser(
        "izer",
        help="the vendor's ai8xize.py command line, unchanged (`edgesynth izer --help`)",
        add_help=False,
    )
    izer.set_defaults(raw_handler=_izer)

    sim = subparsers.add_parser(
        "simulate",
        help="simulate a network bit-exactly and print a per-layer summary",
        description="Simulate a MAX78000/MAX78002 network bit-exactly and print a per-layer "
        "summary (shapes, operations, weight bits, shift, min/max).",
    )
    sim.add_argument("network", type=Path, metavar="NETWORK", help="YAML network description")
    sim.add_argument(
        "checkpoint",
        type=Path,
        nargs="?",
        metavar="CHECKPOINT",
        help="quantized checkpoint (.pth.tar; omit for `arch: test`)",
    )
    sim.add_argument("--device", type=device_name, default="MAX78000", help="MAX78000 or MAX78002")
    sim.add_argument(
        "--sample-input",
        type=Path,
        metavar="NPY",
        help="sample .npy (default: tests/sample_<dataset>.npy)",
    )
    sim.add_argument(
        "--save",
        type=Path,
        metavar="FOLDER",
        help="folder to save every layer's output in, as layerNN.npy",
    )
    sim.add_argument(
        "--output", type=Path, metavar="NPY", help="save the network output (int64 .npy)"
    )
    sim.add_argument(
        "--overwrite",
        action="store_true",
        help="let --save replace the layerNN.npy files of a non-empty folder",
    )
    sim.add_argument("--stop-after", type=int, metavar="N", help="stop after this layer")
    sim.add_argument(
        "--avg-pool-rounding",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="round average pooling",
    )
    sim.set_defaults(handler=_simulate)
