"""The one exception type for errors a user can cause, and how it names their source."""

from __future__ import annotations

from collections.abc import Iterable


class EdgesynthError(Exception):
    """An error in the user's input: printed as one message, no traceback, exit status 1.

    `file` (and `line`) name where the problem comes from; `layer` the layer index and name;
    `key` the YAML key or the command-line option.
    """

    exit_status = 1

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        layer: int | None = None,
        layer_name: str | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.layer = layer
        self.layer_name = layer_name
        self.key = key
        super().__init__(self.render())

    def render(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        if self.layer is not None:
            name = f" ({self.layer_name})" if self.layer_name else ""
            parts.append(f"layer {self.layer}{name}")
        if self.key:
            parts.append(f"`{self.key}`")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class UsageError(EdgesynthError):
    """A malformed command line (unknown option, missing or bad argument): exit status 2.

    Printed the way argparse does: a short usage line, then `PROG: error: MESSAGE`.
    """

    exit_status = 2

    def __init__(self, message: str, *, prog: str = "edgesynth", usage: str | None = None) -> None:
        self.prog = prog
        self.usage = usage
        super().__init__(message)

    def report(self) -> str:
        usage = f"{self.usage.rstrip()}\n" if self.usage else ""
        return f"{usage}{self.prog}: error: {self.render()}"


class MultipleErrors(EdgesynthError):
    """Several independent problems found in one pass, reported together."""

    def __init__(self, errors: Iterable[EdgesynthError]) -> None:
        self.errors = list(errors)
        lines = [e.render() for e in self.errors]
        header = f"{len(lines)} problems found:" if len(lines) > 1 else ""
        super().__init__("\n".join(([header] if header else []) + lines))

    def render(self) -> str:  # the joined message already names every source
        return self.message


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' Did you mean `x`?' for the closest choice, or '' when nothing is close."""
    from difflib import get_close_matches  # (loaded for a message only: every command imports this)

    match = get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean `{match[0]}`?" if match else ""


def warn(message: str) -> None:
    """A problem that does not stop the run, on stderr as one `edgesynth: warning:` line."""
    import sys

    print(f"edgesynth: warning: {message}", file=sys.stderr)
