"""`edgesynth device decode | run`: the virtual MAX78000/MAX78002 on the command line.

`register(subparsers)` adds the `device` command to `edgesynth` (called by the MAX7800x
commands, `targets/max7800x/cli.py`, under `edgesynth max7800x` and at the top level); the
handlers import `vdevice/commands.py`, the plain functions behind it, only when they run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edgesynth.targets.max7800x.device import device_name


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `device decode` and `device run` to an argparse sub-command set."""
    parser = subparsers.add_parser(
        "device",
        help="MAX7800x only: the virtual MAX78000/MAX78002: decode or run a firmware's "
        "accelerator writes",
        description="Replay the writes firmware makes to the CNN accelerator on a functional "
        "model written from the hardware documentation.",
    )
    commands = parser.add_subparsers(dest="device_command", metavar="COMMAND", required=True)

    dec = commands.add_parser("decode", help="print the accelerator state a trace leaves, by name")
    dec.add_argument("trace", type=Path, help="a devtrace recording (trace.bin)")
    dec.add_argument(
        "--device", type=device_name, help="MAX78000 or MAX78002 (default: from the trace)"
    )
    dec.add_argument("--no-memories", action="store_true", help="registers only, no memory summary")
    dec.add_argument(
        "--contents", action="store_true", help="every kernel word and bias entry's value"
    )
    dec.set_defaults(handler=_decode_main)

    run_p = commands.add_parser(
        "run", help="run a trace (or a generated project) and check its known answer"
    )
    run_p.add_argument(
        "project",
        nargs="?",
        type=Path,
        help="a generated project folder (compiled with the host cc and recorded)",
    )
    run_p.add_argument(
        "--trace", type=Path, help="a recorded trace (trace.bin) instead of a project"
    )
    run_p.add_argument(
        "--device", type=device_name, help="MAX78000 or MAX78002 (default: from the trace)"
    )
    run_p.add_argument("--kat", type=Path, help="known answer: kat.npz or sampleoutput.h")
    run_p.add_argument("--output", type=Path, help="save the last layer's output (C x H x W)")
    run_p.add_argument("--layers", type=Path, help="folder for every layer's output")
    run_p.add_argument(
        "--recorder",
        type=Path,
        help="a devtrace-style run.sh PROJECT TRACE to record with instead of edgesynth's "
        "recorder (also $EDGESYNTH_DEVTRACE)",
    )
    run_p.add_argument(
        "--reference", type=Path, help="a known-good trace: report the registers that differ"
    )
    run_p.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an existing --layers folder and replace an existing --output file",
    )
    run_p.set_defaults(handler=_run_main, usage_parser=run_p)
    return parser


def _decode_main(args: argparse.Namespace) -> int:
    from edgesynth.targets.max7800x.vdevice.commands import decode_trace

    print(decode_trace(args.trace, args.device, not args.no_memories, args.contents))
    return 0


def _run_main(args: argparse.Namespace) -> int:
    if (args.trace is None) == (args.project is None):
        args.usage_parser.error("give either a project folder or --trace TRACE")
    from edgesynth.targets.max7800x.vdevice.commands import run_device

    report = run_device(
        trace=args.trace,
        project=args.project,
        device=args.device,
        kat=args.kat,
        output=args.output,
        layers=args.layers,
        recorder=args.recorder,
        reference=args.reference,
        overwrite=args.overwrite,
    )
    print("\n".join(report.lines))
    return 0 if report.ok else 1
