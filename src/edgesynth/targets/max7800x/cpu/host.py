"""The CPU part's C (`cpu_part.c`) built with this PC's gcc and run: the executor of its proof.

A generated driver includes `cpu_part.c` (so it sees every layer's output buffer), reads the
words `cnn_unload()` would leave from stdin, one input a line, calls `cpu_part_forward()` and
prints every layer's output, one layer a line. `prove_cpu_part` compares them, layer by layer,
with the simulator (`simulate.layer_outputs`) on the accelerator's output from the proof run and on
a few pseudo-random inputs over the whole input range.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.proof import Proof, ProofFailed, first_difference
from edgesynth.targets.max7800x.cpu.program import CpuProgram
from edgesynth.targets.max7800x.cpu.simulate import layer_outputs

CC = "gcc"
RANDOM_INPUTS = 15  # beside the accelerator's output: pseudo-random inputs, the whole range
FLAGS = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror"]
EXECUTOR = (
    f"the host build of project/cpu_part.c (every layer; its input from the proof and "
    f"{RANDOM_INPUTS} pseudo-random inputs)"
)
NO_GCC = (
    "the proof builds the Cortex-M4 part (project/cpu_part.c) with the host's gcc, which is "
    "not installed (on Debian: apt-get install gcc); pass --no-verify to write the project "
    "unproven"
)


def driver_source(program: CpuProgram) -> str:
    """The driver's C: every input line's layers, one output line each."""
    prints = "".join(
        f'    for (i = 0; i < {layer.size}; i++) printf("%d ", (int) out_{n}[i]);\n'
        '    printf("\\n");\n'
        for n, layer in enumerate(program.layers)
    )
    return (
        '#include "cpu_part.c"\n\n'
        "static uint32_t in_words[CPU_PART_INPUT_WORDS];\n\n"
        "int main(void)\n{\n  unsigned v;\n  int i;\n\n  for (;;) {\n"
        "    for (i = 0; i < CPU_PART_INPUT_WORDS; i++) {\n"
        '      if (scanf("%u", &v) != 1)\n        return i != 0;\n      in_words[i] = v;\n    }\n'
        f"    (void) cpu_part_forward(in_words);\n{prints}  }}\n}}\n"
    )


def unload_words(program: CpuProgram, x: np.ndarray) -> np.ndarray:
    """Inputs (N, in_size) as `cnn_unload()` leaves them: (N, in_words) 32-bit words."""
    x = np.asarray(x, dtype=np.int64).reshape(len(x), -1)
    if program.in_bits == 32:
        return (x & 0xFFFFFFFF).astype(np.uint64)
    padded = np.zeros((len(x), program.in_words * 4), np.int64)
    padded[:, : x.shape[1]] = x
    octets = (padded & 0xFF).astype(np.uint64).reshape(len(x), -1, 4)
    return (octets << np.array([0, 8, 16, 24], np.uint64)).sum(2)


def build(project: Path, program: CpuProgram, work: Path) -> Path:
    """The driver built in `work` from the project's cpu_part.c, .h and softmax.c; a build
    failure is ProofFailed with the compiler's first error."""
    compiler = shutil.which(CC)
    if compiler is None:
        raise EdgesynthError(NO_GCC)
    for name in ("cpu_part.c", "cpu_part.h", "softmax.c"):
        shutil.copy(project / name, work / name)
    from edgesynth.targets.max7800x.emit.project import render

    (work / "cnn.h").write_text(render("cnn_cpu.h.j2", name="host"))  # types, prototypes
    (work / "mxc.h").write_text("")
    (work / "driver.c").write_text(driver_source(program))
    binary = work / "cpu_part_driver"
    sources = [str(work / "driver.c"), str(work / "softmax.c")]
    command = [compiler, *FLAGS, f"-I{work}", *sources, "-o", str(binary)]
    env = {**os.environ, "LC_ALL": "C"}  # the compiler's messages in plain ASCII
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line]
        first = (errors or done.stderr.strip().splitlines() or ["no message"])[0]
        first = first.replace(str(work) + "/", "project/")
        raise ProofFailed(
            f"the Cortex-M4 part (project/cpu_part.c) does not build with the host's gcc "
            f"({' '.join(FLAGS)}): {first}"
        )
    return binary


def run_layers(binary: Path, program: CpuProgram, x: np.ndarray) -> list[np.ndarray]:
    """Every layer's output (N, size) for inputs `x` (N, in_size), from the built driver."""
    stdin = "\n".join(" ".join(map(str, row)) for row in unload_words(program, x).tolist())
    done = subprocess.run([str(binary)], input=stdin + "\n", capture_output=True, text=True)
    if done.returncode != 0:
        raise ProofFailed(
            f"the host build of project/cpu_part.c stopped with status {done.returncode}: "
            f"{done.stderr.strip()[-500:]}"
        )
    rows = [np.array(line.split(), dtype=np.int64) for line in done.stdout.splitlines()]
    count = len(program.layers)
    return [np.stack(rows[i::count]) if rows[i::count] else np.zeros((0, 0), np.int64)
            for i in range(count)]  # fmt: skip


def proof_inputs(program: CpuProgram, accelerator_output: np.ndarray) -> np.ndarray:
    """The accelerator's output (from the proof run) and `RANDOM_INPUTS` pseudo-random inputs
    over the input's range (8-bit codes; 32-bit accumulators within +-2**20)."""
    first = np.asarray(accelerator_output, np.int64).reshape(1, program.in_size)
    lo, hi = (-(2**20), 2**20) if program.in_bits == 32 else (-128, 127)
    rng = np.random.default_rng(0)
    return np.concatenate([first, rng.integers(lo, hi, (RANDOM_INPUTS, program.in_size),
                                                 endpoint=True)])  # fmt: skip


def prove_cpu_part(
    program: CpuProgram,
    project: Path,
    first: np.ndarray,
    remedy: str,
    what: str = "the accelerator's output from the proof run",
) -> Proof:
    """The host build of `project`'s cpu_part.c equals the simulator, layer by layer, value for
    value, on `first` (`what` it is) and pseudo-random inputs; else ProofFailed naming the first
    layer and index that differ (and `remedy`)."""
    x = proof_inputs(program, first)
    with tempfile.TemporaryDirectory(prefix="edgesynth-cpu-proof-") as tmp:
        try:
            got = run_layers(build(Path(project), program, Path(tmp)), program, x)
        except ProofFailed as err:
            raise ProofFailed(f"{err.message}. {remedy}") from None
    compared = 0
    every = zip(program.layers, got, layer_outputs(program, x), strict=True)
    for i, (layer, output, values) in enumerate(every):
        if output.shape != values.shape or not np.array_equal(output, values):
            node = layer.nodes[0] if layer.nodes else layer.name
            detail = (first_difference(values, output) if output.shape == values.shape
                      else f"an output of shape {output.shape}, not {values.shape}")  # fmt: skip
            raise ProofFailed(
                f"the Cortex-M4 part (project/cpu_part.c), built with the host's gcc, does not "
                f"compute the simulator's answer: CPU layer {i} (`{node}`, {layer.kind}) "
                f"is the first to differ: {detail} (index (input, value); input 0 is {what}, "
                f"1-{RANDOM_INPUTS} pseudo-random inputs). {remedy}"
            )
        compared += output.size
    return Proof(EXECUTOR, compared, compared, "values")
