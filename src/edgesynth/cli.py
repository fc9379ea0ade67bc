"""The `edgesynth` command line: one entry point; each package registers its own sub-commands.

Adding a command: in the package that owns it, write `register(subparsers)` that calls
`subparsers.add_parser(NAME, help=..., description=...)`, declares the arguments and ends with
`parser.set_defaults(handler=FUNCTION)`; `FUNCTION(args)` does the work, prints its results
and raises `EdgesynthError` for input it refuses. A generic command's module is listed in
`COMMAND_MODULES`; a target package's `register` is named by its entry point (`commands` of its
`TargetPlugin`, see `edgesynth.targets.registry`), so this file names no target.
A command module imports nothing heavy at module level (no torch, no onnx): handlers
import what they need, so `edgesynth izer` and `edgesynth simulate` never load PyTorch.
A command that parses its own command line (the vendor-compatible `izer`) sets
`raw_handler=FUNCTION(argv)` instead and gets every argument after its name unchanged; a
target package that names such a top-level command in its plugin's `raw_commands` has it run
without building the other commands' parsers (`edgesynth izer` starts in less time).

Exit status: 0 done; 1 input refused (one `edgesynth: error:` line naming the file, layer
or option); 2 usage error (argparse's usage line and message); 130 interrupted (Ctrl-C);
70 internal error (a bug: one line; the traceback only with EDGESYNTH_DEBUG=1).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from edgesynth import collector
from edgesynth.errors import EdgesynthError, UsageError, did_you_mean

# The generic commands (every target's commands come from the target packages' entry points)
COMMAND_MODULES = [
    "edgesynth.demo",  # demo
    "edgesynth.train.cli",  # train, quantize, fuse-bn, evaluate, export
    "edgesynth.flow_cli",  # compile, run, targets (every target)
    "edgesynth.validate.cli",  # validate (every target)
    "edgesynth.report.cli",  # report (every target)
]


def command_modules() -> list[str]:
    """Every module `edgesynth --help` imports: the generic ones, then the target packages'."""
    from edgesynth.targets.registry import command_modules as target_command_modules

    return [*COMMAND_MODULES, *target_command_modules()]


# Optional parts: the top-level module a command imports -> the extra that installs it.
EXTRAS = {
    "torch": "train",
    "tensorboard": "train",
    "sklearn": "train",
    "tqdm": "train",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "matplotlib": "plot",
}
# The dependencies every install has (pyproject.toml), by module: the package pip installs.
REQUIRED = {
    "numpy": "numpy",
    "yaml": "PyYAML",
    "rich": "rich",
    "jinja2": "Jinja2",
    "ortools": "ortools",
}

_NEGATIVE = re.compile(r"^-((\d+\.?\d*|\.\d+)(e[-+]?\d+)?|inf|nan)$", re.IGNORECASE)
_INVALID_CHOICE = re.compile(r"invalid choice: '(.*?)' \(choose from (.*)\)")

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 70, 130


class CommandParser(argparse.ArgumentParser):
    """argparse whose usage errors raise UsageError (printed by `main`) instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _parse_optional(self, arg_string: str) -> Any:
        """A negative number is an option's value (`--epochs -1`, refused by the option's type
        with its allowed range), even where the parser has an option such as `-8`."""
        if arg_string not in self._option_string_actions and _NEGATIVE.match(arg_string):
            return None
        return super()._parse_optional(arg_string)

    def error(self, message: str) -> NoReturn:
        if m := _INVALID_CHOICE.search(message):
            choices = [c.strip().strip("'") for c in m.group(2).split(",")]
            message += did_you_mean(m.group(1), choices)
        raise UsageError(message, prog=self.prog, usage=self.short_usage())

    def short_usage(self) -> str:
        """One line: required arguments spelled out, the rest as [options]."""
        words: list[str] = []
        optional = False
        for action in self._actions:
            if action.help == argparse.SUPPRESS:
                continue
            if isinstance(action, argparse._SubParsersAction):
                words.append(f"{action.metavar or '{' + ','.join(action.choices) + '}'} ...")
            elif not action.option_strings:
                name = str(action.metavar or action.dest.upper())
                words.append(f"[{name}]" if action.nargs in ("?", "*") else name)
            elif action.required:
                metavar = action.metavar or action.dest.upper()
                words.append(f"{action.option_strings[0]} {metavar}")
            else:
                optional = True
        if optional:
            words.append("[options]")
        return f"usage: {self.prog} {' '.join(words)}"


# The libraries that decide results, by distribution name -> the name --version prints.
RESULT_LIBRARIES = {
    "numpy": "numpy",
    "onnx": "onnx",
    "onnxruntime": "onnxruntime",
    "ortools": "OR-Tools",
    "torch": "torch",
}


def version() -> str:
    return _distribution_version("edgesynth") or "unknown (not installed)"


def _distribution_version(name: str) -> str | None:
    """An installed distribution's version, read from its metadata (nothing is imported)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version(name)
    except PackageNotFoundError:
        return None


def version_lines() -> list[str]:
    """`edgesynth X`, then the version of each result-deciding library that is installed."""
    lines = [f"edgesynth {version()}"]
    for distribution, label in RESULT_LIBRARIES.items():
        found = _distribution_version(distribution)
        if found is not None:
            lines.append(f"{label} {found}")
    return lines


class _VersionAction(argparse.Action):
    """`--version`: looks the versions up only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version (and the numpy, onnx, onnxruntime, OR-Tools and torch "
            "versions installed) and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print("\n".join(version_lines()))
        parser.exit()


def build_parser(commands: bool = True) -> CommandParser:
    """The command line; without `commands` only the top level (enough for --version, which
    then loads no command module)."""
    parser = CommandParser(
        prog="edgesynth",
        description="Take a CNN from PyTorch to ultra-low-power accelerators, bit-exact.",
        epilog="`edgesynth COMMAND --help` describes a command.",
    )
    parser.add_argument("--version", action=_VersionAction)
    if not commands:
        return parser
    subparsers = add_commands(parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    from edgesynth.targets.registry import load_object, plugins

    for package, plugin in plugins().items():
        if plugin.commands:
            load_object(plugin.commands, f"the commands of target package `{package}`")(subparsers)
    return parser


def add_commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """The top-level parser's sub-command group (`build_parser` adds every command to it; a
    target's `raw_commands` handler may add only its own)."""
    return parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _raw_handler(
    parser: argparse.ArgumentParser, argv: list[str]
) -> tuple[Callable[[list[str]], Any], list[str]] | None:
    """The command that parses its own arguments (`izer`, `max7800x izer`) and what follows
    its name, or None."""
    for i, word in enumerate(argv):
        sub = _subcommands(parser).get(word)
        if sub is None:
            return None
        raw = sub.get_default("raw_handler")
        if raw is not None:
            return raw, argv[i + 1 :]
        parser = sub
    return None


def _require_targets() -> None:
    """An unknown command where no target package is registered: say why (the installed
    metadata lacks the entry points) rather than `invalid choice`."""
    from edgesynth.targets.registry import plugins, target_names

    if not plugins():
        target_names()  # raises the message naming the missing entry points


def _declared_raw_handler(argv: list[str]) -> Callable[[list[str]], Any] | None:
    """The handler a target package declares for the top-level command `argv[0]` that reads
    its own command line (`raw_commands`, e.g. `izer`), or None: such a command runs without
    building (and importing) every other command's parser."""
    if not argv or argv[0].startswith("-"):
        return None
    from edgesynth.targets.registry import load_object, plugins

    for package, plugin in plugins().items():
        reference = plugin.raw_commands.get(argv[0])
        if reference is not None:
            what = f"the `{argv[0]}` command of target package `{package}`"
            handler: Callable[[list[str]], Any] = load_object(reference, what)
            return handler
    return None


def run(argv: Sequence[str]) -> int:
    """Parse `argv` and run the command; errors propagate (see `main` for how they print)."""
    argv = list(argv)
    declared = _declared_raw_handler(argv)
    if declared is not None:  # it starts the collector itself, once its modules are loaded
        return int(declared(argv[1:]) or 0)
    parser = build_parser(commands=argv != ["--version"])
    if not argv:
        raise UsageError("no command given", usage=parser.format_help())
    if not argv[0].startswith("-") and argv[0] not in _subcommands(parser):
        _require_targets()
    raw = _raw_handler(parser, argv)
    if raw is not None:
        handler, rest = raw
        return int(handler(rest) or 0)
    args = parser.parse_args(argv)
    collector.start()
    return int(args.handler(args) or 0)


def _missing_extra(err: ModuleNotFoundError, argv: Sequence[str]) -> str | None:
    top = (err.name or "").split(".")[0]
    extra, package = EXTRAS.get(top), REQUIRED.get(top)
    if extra is None and package is None:
        return None
    command = " ".join(a for a in argv[:2] if not a.startswith("-")) or "this command"
    if package is not None:  # a dependency pip installs with edgesynth, removed since
        return (
            f"`edgesynth {command}` needs {top}, a dependency of edgesynth that is not "
            f"installed: pip install {package} (or reinstall edgesynth)"
        )
    return (
        f"`edgesynth {command}` needs {top}, which is not installed: "
        f"pip install 'edgesynth[{extra}]'"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: every outcome is an exit status and at most one message, no traceback.
    Without `argv` (the program: the console script, `python -m edgesynth`) it reads
    sys.argv, and the garbage collector waits for the command's modules (see
    `edgesynth.collector`)."""
    one_blas_thread()
    if argv is not None:
        return guarded(lambda: run(list(argv)), argv)
    args = sys.argv[1:]
    collector.postpone()
    code = guarded(lambda: run(args), args)
    collector.finish()
    return code


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> None:
    """NumPy's BLAS (OpenBLAS) runs one thread unless the user sets a number: the simulators'
    matrix products are small, and OpenBLAS's threads cost more CPU than they save (izer on a
    streamed 190x120 frame, 2 cores: 0.83 -> 0.61 s CPU, 1.0 -> 0.7 s wall). It reads the
    setting when NumPy loads, which the commands do in their handlers, after this."""
    if not any(name in os.environ for name in BLAS_THREADS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def guarded(job: Callable[[], int], args: Sequence[str]) -> int:
    """Run `job`; every way it can end becomes an exit status and at most one message."""
    try:
        return job()
    except UsageError as err:
        print(err.report(), file=sys.stderr)
        return EXIT_USAGE
    except EdgesynthError as err:
        print(f"edgesynth: error: {err.render()}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("edgesynth: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # --help, --version
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_REFUSED)
    except BrokenPipeError:  # `edgesynth ... | head`: the reader left; say nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_REFUSED
    except ModuleNotFoundError as err:
        message = _missing_extra(err, args)
        if message is None:
            return _internal_error(err)
        print(f"edgesynth: error: {message}", file=sys.stderr)
        return EXIT_REFUSED
    except Exception as err:
        return _internal_error(err)


def _internal_error(err: Exception) -> int:
    if os.environ.get("EDGESYNTH_DEBUG"):
        import traceback

        traceback.print_exception(err)
    detail = str(err).splitlines()[0] if str(err) else ""
    print(
        f"edgesynth: internal error: {type(err).__name__}"
        + (f": {detail}" if detail else "")
        + " (a bug in edgesynth; rerun with EDGESYNTH_DEBUG=1 for the traceback and report it)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
