"""The generated C on the PC: check_output(), cnn_unload() and the softmax.

A small harness (harness/kat_harness.c) maps the accelerator's address window as memory, stores
the known answer, and calls the project's own functions: check_output() must pass, and fail
after single bit flips; cnn_unload() must give back exactly expected_output.npy; the softmax
must equal the NumPy reference (emit/softmax.py) bit for bit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.targets.max7800x.emit.softmax import softmax_q17p14_q15
from edgesynth.targets.max7800x.emit.unload import output_layers
from edgesynth.targets.max7800x.izer import run_izer
from edgesynth.targets.max7800x.izer_args import parse_izer_args
from edgesynth.targets.max7800x.plan.kat import expected_words
from edgesynth.targets.max7800x.plan.plan import make_plan

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared"
CORPUS = SHARED / "corpus" / "cases"
STANDINS = SHARED / "tools" / "devtrace" / "include"  # host stand-ins for the MSDK headers
HARNESS = HERE / "harness" / "kat_harness.c"
CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)
CC = shutil.which("gcc")


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _host_sources(project: Path, work: Path) -> list[Path]:
    """The project's C as the PC compiles it (RISC-V-only constructs removed, like devtrace)."""
    main = project / "main_riscv.c" if (project / "main_riscv.c").exists() else project / "main.c"
    text = main.read_text().replace('asm volatile("wfi")', "(void) 0")
    (work / "main_host.c").write_text(text)
    cnn = (project / "cnn.c").read_text().replace('__attribute__((interrupt("machine")))', "")
    (work / "cnn_host.c").write_text(cnn)
    return [work / "cnn_host.c", project / "softmax.c"]


def _build_harness(project: Path, work: Path, unload_bytes: int) -> Path:
    flags = ["-O0", "-w", "-fno-builtin", f"-I{STANDINS}", f"-I{project}"]
    sources = _host_sources(project, work)
    main_obj = work / "main.o"
    subprocess.run(
        [CC, *flags, "-Dmain=generated_main", "-c", str(work / "main_host.c"), "-o",
         str(main_obj)],
        check=True,
    )
    binary = work / "harness"
    subprocess.run(
        [CC, *flags, '-DSAMPLE_OUTPUT_HEADER="sampleoutput.h"', f"-DUNLOAD_BYTES={unload_bytes}",
         str(HARNESS), *map(str, sources), str(main_obj), "-no-pie",
         "-o", str(binary), "-lm"],
        check=True,
    )
    return binary


@pytest.mark.corpus
@pytest.mark.skipif(CC is None, reason="needs the host C compiler (gcc)")
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_check_output_unload_and_softmax(case: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    args = [*info["args"], "--test-dir", str(tmp_path), "--prefix", "p"]
    result = run_izer(args)
    capsys.readouterr()
    opts = parse_izer_args(args)
    plan = make_plan(result, opts)
    outputs = {r.index: r.output for r in result.layers}
    s = plan.settings
    layers = [s.by_index[i] for i in output_layers(plan)]
    byte_output = any(h.output_width == 8 for h in layers)
    sizes = [h.output_chan * h.output_dim[0] * h.output_dim[1] * h.output_width // 8
             if byte_output else h.output_chan * h.output_dim[0] * h.output_dim[1] * 4
             for h in layers]
    project = tmp_path / "p"
    memory = [
        (a, v) for h in layers if h.index in outputs
        for _, a, v in expected_words(h, s, outputs[h.index])
    ]
    np.asarray(memory, dtype="<u4").tofile(tmp_path / "out.memory")
    binary = _build_harness(project, tmp_path, sum(sizes))
    term = s.by_index[s.terminating]
    softmax = [str(8 - term.bits if not term.bypass else 0)] if opts.softmax else []
    run = subprocess.run([str(binary), str(tmp_path / "out"), *softmax], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]

    expected = np.load(case / "expected_output.npy")
    if s.terminating not in [h.index for h in layers]:
        return  # the known-answer layer is not unloaded (only `output: true` layers are)
    k = [h.index for h in layers].index(s.terminating)
    start = sum(sizes[:k])
    raw = (tmp_path / "out.unload").read_bytes()[start : start + sizes[k]]
    if term.output_width == 8:
        values = np.frombuffer(raw, dtype=np.int8)
    else:
        values = np.frombuffer(raw, dtype="<i4")
    np.testing.assert_array_equal(values.astype(np.int64).reshape(expected.shape), expected)
    if softmax:
        prob = np.frombuffer((tmp_path / "out.softmax").read_bytes(), dtype="<i2")
        np.testing.assert_array_equal(
            prob, softmax_q17p14_q15(expected.reshape(-1), int(softmax[0]))
        )


@pytest.fixture(scope="module")
def softmax_driver(tmp_path_factory) -> Path:
    """The project's softmax.c with a driver that reads vectors from stdin."""
    if CC is None:
        pytest.skip("needs the host C compiler (gcc)")
    from edgesynth.targets.max7800x.emit.project import render

    work = tmp_path_factory.mktemp("softmax")
    (work / "softmax.c").write_text(render("softmax.c.j2", name="t"))
    (work / "cnn.h").write_text(
        "#include <stdint.h>\ntypedef int32_t q31_t;\ntypedef int16_t q15_t;\n"
        "typedef int8_t q7_t;\n#define CNN_NUM_OUTPUTS 256\n"
        "void softmax_q17p14_q15(const q31_t *, const uint16_t, q15_t *);\n"
        "void softmax_shift_q17p14_q15(q31_t *, const uint16_t, uint8_t, q15_t *);\n"
        "void softmax_q7_q15(const q7_t *, const uint16_t, q15_t *);\n"
    )
    (work / "mxc.h").write_text("")
    (work / "driver.c").write_text(
        '#include <stdio.h>\n#include "cnn.h"\n'
        "int main(void) {\n  int n, shift, i; q31_t v[256]; q15_t p[256];\n"
        '  while (scanf("%d %d", &n, &shift) == 2) {\n'
        '    for (i = 0; i < n; i++) scanf("%d", &v[i]);\n'
        "    if (shift) softmax_shift_q17p14_q15(v, n, shift, p);\n"
        "    else softmax_q17p14_q15(v, n, p);\n"
        '    for (i = 0; i < n; i++) printf("%d ", p[i]);\n    printf("\\n");\n  }\n'
        "  return 0;\n}\n"
    )
    binary = work / "driver"
    subprocess.run(
        [CC, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{work}", str(work / "softmax.c"),
         str(work / "driver.c"), "-o", str(binary)],
        check=True,
    )
    return binary


@settings(max_examples=60, deadline=None)
@given(
    vectors=st.lists(
        st.tuples(
            st.lists(st.integers(-(2**24), 2**24), min_size=1, max_size=64),
            st.integers(0, 6),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_softmax_matches_the_reference(softmax_driver: Path, vectors) -> None:
    lines = []
    for values, shift in vectors:
        lines.append(f"{len(values)} {shift} " + " ".join(map(str, values)))
    run = subprocess.run([str(softmax_driver)], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True)
    got = [list(map(int, line.split())) for line in run.stdout.strip().splitlines()]
    for (values, shift), out in zip(vectors, got, strict=True):
        np.testing.assert_array_equal(out, softmax_q17p14_q15(np.array(values), shift))


def test_softmax_reference_known_values() -> None:
    # One dominant class: 2^16 of 2^16 + 2^12 + ..., the largest maps to 32767 (clipped).
    out = softmax_q17p14_q15(np.array([16 << 14, 12 << 14, 0]))
    assert out[0] == 30840 and out[1] == 1927 and out[2] == 0
    assert softmax_q17p14_q15(np.array([5, 5])).tolist() == [16384, 16384]
