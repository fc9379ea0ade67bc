"""Code generation on every vendor case of the reference corpus.

For every `expect: ok` case, `edgesynth izer <case args>` writes the project, and
- the plan equals the vendor's plan.json: every per-layer list of its log (processor maps,
  offsets, kernel offsets/lengths/counts, bias quadrants/offsets, ...) and, on the MAX78000,
  the latency estimate cycle for cycle;
- sampleoutput.h holds exactly the words of kat.npz;
- for cases with a trace.bin (what the reference recorder ../shared/tools/devtrace records
  of the vendor's project), the project recorded by edgesynth's own recorder (recorder/) is
  byte-identical to trace.bin (every write of cnn_init, the weights, the bias, the
  configuration, the input and cnn_start, in order); for the others (the vendor's
  --debug-snoop code does not build under the recorder), the reference recorder records the
  project too and the two traces are byte-identical, and the recorded writes run on the
  virtual device and reproduce the known answer, with the layer sequence the snoop units
  decide and the accumulator values the vendor's test expects of them. The project is
  compiled once with devtrace's commands (run.sh: -O0, one store per C assignment) for the
  reference recorder and:
- the PC harness (../max7800x/harness): with the output words in data memory, check_output()
  passes and fails after single bit flips, cnn_unload() decodes to exactly
  expected_output.npy, and the softmax equals the NumPy reference;
- `edgesynth build` links the Arm program (and compiles the RISC-V one) with
  -Wall -Wextra -Werror using Debian's cross compilers: for one case of every distinct
  (device, command-line options, network features) combination (264 of the 520; the C differs
  between the others only in its data), or for every case with EDGESYNTH_BUILD_ALL=1.
Every case must pass; a missing compiler (gcc, arm-none-eabi-gcc, riscv64-unknown-elf-gcc)
fails the tests that need it with the apt-get line (tests/needs.py).
benchmarks/codegen_scoreboard.py gives the same comparison as a per-phase table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.firmware import build_project
from edgesynth.targets.max7800x.commands.izer import core_options, run_izer
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.emit.softmax import softmax_q17p14_q15
from edgesynth.targets.max7800x.emit.unload import output_layers
from edgesynth.targets.max7800x.plan.kat import expected_words
from edgesynth.targets.max7800x.plan.plan import make_plan
from edgesynth.targets.max7800x.plan.report import configuration
from edgesynth.targets.max7800x.plan.trace import phase_matches, read_trace
from edgesynth.targets.max7800x.recorder.record import record_project
from edgesynth.targets.max7800x.vdevice.knownanswer import load_kat
from edgesynth.targets.max7800x.vdevice.runner import check_kat, network_output, run_trace_file
from known_answer_misses import MISSES_KNOWN_ANSWER

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared"
CORPUS = SHARED / "corpus" / "cases"
DEVTRACE = SHARED / "tools" / "devtrace"
HARNESS = HERE.parent / "max7800x" / "harness" / "kat_harness.c"
CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)
CC = shutil.which("gcc") or "gcc"
CROSS = ("arm-none-eabi-gcc", "riscv64-unknown-elf-gcc")
PATH_OPTIONS = {
    "--checkpoint-file",
    "--config-file",
    "--sample-input",
    "--weight-input",
    "--bias-input",
}


def _signature(case: Path) -> tuple:
    info = json.loads((case / "case.json").read_text())
    flags = sorted(a for a in info["args"] if a.startswith("--") and a not in PATH_OPTIONS)
    features = sorted(f for f in info["features"] if not f.endswith("L"))  # not layer counts
    return (case.parent.name, tuple(flags), tuple(features))


def _cross_built() -> set[Path]:
    """The cases the cross compilers build: the first of each signature (or all)."""
    if os.environ.get("EDGESYNTH_BUILD_ALL"):
        return set(CASES)
    first: dict[tuple, Path] = {}
    for case in CASES:
        first.setdefault(_signature(case), case)
    return set(first.values())


CROSS_BUILT = _cross_built()

pytestmark = pytest.mark.corpus


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _header_words(text: str, name: str) -> np.ndarray:
    body = text[text.index(f"#define {name} {{") :]
    body = body[body.index("{") + 1 : body.index("}")]
    return np.array([int(v, 16) for v in re.findall(r"0x[0-9a-f]+", body)], dtype=np.uint64)


def _kat_words(case: Path) -> np.ndarray:
    kat = np.load(case / "kat.npz")
    parts, at = [], 0
    for addr, mask, length in zip(kat["addr"], kat["mask"], kat["length"], strict=True):
        parts += [int(addr), int(mask), int(length)]
        parts += kat["data"][at : at + int(length)].astype(np.uint64).tolist()
        at += int(length)
    return np.array([*parts, 0], dtype=np.uint64)


def _compile_host(project: Path, work: Path) -> list[Path]:
    """The project's objects exactly as devtrace's run.sh compiles them."""
    include = DEVTRACE / "include"
    main = project / "main_riscv.c" if (project / "main_riscv.c").exists() else project / "main.c"
    (work / "main_host.c").write_text(
        re.sub(r'asm volatile *\( *"wfi" *\)', "(void) 0", main.read_text())
    )
    (work / "cnn_host.c").write_text(
        (project / "cnn.c").read_text().replace('__attribute__((interrupt("machine")))', "")
    )
    flags = ["-O0", "-w", "-fno-builtin", f"-I{include}", f"-I{project}"]
    objects = []
    for src, extra in (
        (work / "main_host.c", ["-Dmain=generated_main"]),
        (work / "cnn_host.c", []),
        (project / "softmax.c", []),
    ):
        obj = work / (src.stem + ".o")
        subprocess.run([CC, *flags, *extra, "-c", str(src), "-o", str(obj)], check=True)
        objects.append(obj)
    return objects


@pytest.fixture(scope="session")
def recorder(tmp_path_factory) -> Path:
    """devtrace.c compiled once (as run.sh compiles it)."""
    needs.devtrace()
    obj = tmp_path_factory.mktemp("devtrace") / "devtrace.o"
    subprocess.run(
        [
            CC,
            "-O0",
            f"-I{DEVTRACE / 'include'}",
            "-c",
            str(DEVTRACE / "devtrace.c"),
            "-o",
            str(obj),
        ],
        check=True,
    )
    return obj


def _assert_snoop_accumulators(units, words: list[int]) -> None:  # type: ignore[no-untyped-def]
    """The vendor's `--debug-snoop` check: words 24-31 of `snoop` are each unit's ACC, HIT,
    MAX and AM after the run (a unit the firmware leaves off keeps the values written)."""
    names = ("ACC", "HIT", "MAX", "AM")
    master = min(u.group for u in units.units) if units.units else 0
    by_unit = {u.unit: u.regs for u in units.units if u.group == master}
    for n in (1, 2):
        written = dict(zip(names, words[12 * (n - 1) + 8 : 12 * (n - 1) + 12], strict=True))
        got = [by_unit.get(n, written)[name] for name in names]
        assert got == words[24 + 4 * (n - 1) : 28 + 4 * (n - 1)], f"snoop unit {n}"


def _record(objects: list[Path], recorder: Path, work: Path) -> Path:
    binary = work / "devtrace"
    subprocess.run(
        [CC, "-no-pie", "-o", str(binary), str(recorder), *map(str, objects), "-lm"], check=True
    )
    trace = work / "reference.trace"
    subprocess.run([str(binary), str(trace)], check=True, capture_output=True, timeout=600)
    return trace


def _harness(objects, project: Path, work: Path, unload_bytes: int, args: list[str]) -> None:
    include = DEVTRACE / "include"
    binary = work / "harness"
    subprocess.run(
        [
            CC,
            "-O0",
            "-w",
            "-fno-builtin",
            f"-I{include}",
            f"-I{project}",
            '-DSAMPLE_OUTPUT_HEADER="sampleoutput.h"',
            f"-DUNLOAD_BYTES={unload_bytes}",
            str(HARNESS),
            *map(str, objects),
            "-no-pie",
            "-o",
            str(binary),
            "-lm",
        ],
        check=True,
    )
    run = subprocess.run(
        [str(binary), str(work / "out"), *args], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_generated_project(case: Path, tmp_path: Path, monkeypatch, capsys, recorder: Path) -> None:
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    args = [*info["args"], "--test-dir", str(tmp_path), "--prefix", "p"]
    if _case_id(case) in MISSES_KNOWN_ANSWER:  # the vendor's project, written unproven
        args.append("--no-verify")
    result = run_izer(args)  # what `edgesynth izer` runs: synthesis, the proof, the project
    capsys.readouterr()
    project = tmp_path / "p"
    opts = parse_izer_args(args)
    plan = make_plan(result, core_options(opts))

    # The plan against the vendor's log.
    vendor = json.loads((case / "plan.json").read_text())
    latency = vendor.pop("Estimated latency", None)
    assert configuration(plan) == vendor
    if latency is not None:
        ours = plan.latency
        assert ours is not None
        assert [c for _, c in ours.layers] == latency["layers"]
        assert (ours.total, ours.rough) == (latency["total"], latency["rough"])

    # The known answer in sampleoutput.h, word for word.
    header = (project / "sampleoutput.h").read_text()
    np.testing.assert_array_equal(_header_words(header, "SAMPLE_OUTPUT"), _kat_words(case))

    objects = _compile_host(project, tmp_path)
    expected_output = np.load(case / "expected_output.npy")

    # Write for write, recorded by edgesynth's recorder.
    ours_trace = tmp_path / "ours.trace"
    record_project(project, ours_trace)
    if info.get("trace"):
        if ours_trace.read_bytes() != (case / "trace.bin").read_bytes():
            phases = phase_matches(read_trace(ours_trace), read_trace(case / "trace.bin"))
            pytest.fail(f"trace differs; phases identical: {phases}")
    else:
        # The vendor's project did not build under the recorder (its --debug-snoop code), so
        # there is no trace to compare with: the reference recorder records ours as well, and
        # ours runs on the virtual device.
        reference = _record(objects, recorder, tmp_path)
        assert ours_trace.read_bytes() == reference.read_bytes(), "the two recorders differ"
        run = run_trace_file(ours_trace, case.parent.name)
        known = load_kat(case / "kat.npz")
        check = check_kat(run, known)
        same = np.array_equal(network_output(run, known), expected_output)
        snoop = result.network.spec.snoop
        if snoop is not None:  # the units' accumulators as the vendor's test expects them
            assert run.snoop_units is not None
            _assert_snoop_accumulators(run.snoop_units, [int(v) for v in snoop])
        assert check.ok, "\n".join(check.details)
        assert same

    # check_output(), cnn_unload() and the softmax on the PC.
    s = plan.settings
    layers = [s.by_index[i] for i in output_layers(plan)]
    byte_output = any(h.output_width == 8 for h in layers)
    sizes = [
        h.output_chan
        * h.output_dim[0]
        * h.output_dim[1]
        * (h.output_width // 8 if byte_output else 4)
        for h in layers
    ]
    outputs = {r.index: r.output for r in result.layers}
    memory = [
        (a, v)
        for h in layers
        if h.index in outputs
        for _, a, v in expected_words(h, s, outputs[h.index])
    ]
    np.asarray(memory, dtype="<u4").reshape(-1, 2).tofile(tmp_path / "out.memory")
    term = s.by_index[s.terminating]
    softmax = [str(8 - term.bits if not term.bypass else 0)] if opts.softmax else []
    _harness(objects, project, tmp_path, sum(sizes), softmax)
    expected = np.load(case / "expected_output.npy")
    indices = [h.index for h in layers]
    if s.terminating in indices:
        k = indices.index(s.terminating)
        start = sum(sizes[:k])
        raw = (tmp_path / "out.unload").read_bytes()[start : start + sizes[k]]
        values = np.frombuffer(raw, dtype=np.int8 if term.output_width == 8 else "<i4")
        np.testing.assert_array_equal(values.astype(np.int64).reshape(expected.shape), expected)
    if softmax:
        prob = np.frombuffer((tmp_path / "out.softmax").read_bytes(), dtype="<i2")
        np.testing.assert_array_equal(
            prob, softmax_q17p14_q15(expected.reshape(-1), int(softmax[0]))
        )

    # The chip's compilers: link (Arm), compile (RISC-V), -Wall -Wextra -Werror.
    if case in CROSS_BUILT:
        needs.tools(*CROSS)
        try:
            built = build_project(project)
        except EdgesynthError as err:  # only when the vendor's layout cannot fit either
            assert "does not fit" in err.message, err.message
            _assert_cannot_fit(project, plan, opts, err.message)
            return
        assert built.elf.exists()
        assert built.arm.flash_used <= built.arm.flash
        assert (built.riscv is not None) == bool(opts.riscv)


def _assert_cannot_fit(project: Path, plan, opts, message: str) -> None:
    """The data the project must hold exceeds the device on its own (a refusal is right)."""
    from edgesynth.targets.max7800x.commands.firmware import MEMORY

    mem = MEMORY[plan.settings.chip.device.name]
    if "flash" in message:
        words = sum(
            len(re.findall(r"0x[0-9a-f]+", (project / f).read_text()))
            for f in ("weights.h", "sampledata.h", "sampleoutput.h")
            if (project / f).exists()
        )
        assert 4 * words > 0.9 * mem.flash_length, message
    else:
        s = plan.settings
        width = s.by_index[s.terminating].output_width // 8
        buffer = int(np.prod(plan.output_shape)) * width  # cnn_unload()'s ml_data
        assert opts.unload and buffer > 0.9 * mem.sram_length, message


def test_cross_compilers_present() -> None:
    """The builds above need them: a missing one fails here too, with the apt-get line."""
    needs.tools(*CROSS)
