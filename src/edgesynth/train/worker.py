"""One process of a data-parallel `edgesynth train --nproc-per-node N` run.

The launcher (`edgesynth.train.distributed.launch`) starts this module in every process with
the command line's settings as JSON; errors print as the `edgesynth` command prints them.
"""

from __future__ import annotations

import os
import sys

from edgesynth.cli import guarded
from edgesynth.train.command import train_args_from_json, train_main


def main(argv: list[str]) -> int:
    def run() -> int:
        train_main(train_args_from_json(argv[0]), log=lambda line: print(line, flush=True))
        return 0

    return guarded(run, ["train"])


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # End without the interpreter's teardown: Gloo's threads can still hold Python objects
    # then and abort the process (SIGABRT) after a run that succeeded. Everything the run
    # writes is closed by now; only the output streams need flushing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
