"""The max7800x target lowers network graphs to the vendor's description and runs them.

Corpus round trip: the graph of each vendor network (frontends.ai8x, placement kept as hints) is
lowered again by `Max7800xTarget.compile` (fusion -> the vendor description in memory + synthetic
weights -> the izer's own builder and rules -> placement) and simulated: the result equals the
vendor's known answer. The only exceptions are listed by case with the exact reason, and any other
outcome fails:
- NOT_A_GRAPH: networks the graph cannot express (by design);
- REFUSED: networks the lowering rightly refuses (they need streaming, which it does not do);
- LOWERING_GAPS: networks the lowering should reproduce but refuses today (a defect): strict
  xfails that expect exactly that refusal (`LoweringGap`); lowering them makes them fail
  (XPASS), so they leave the table when fixed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.targets.base import CompileOptions, get_target, target_names
from edgesynth.targets.max7800x.commands.izer import job_from_options
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.description.graph import graph_from_network
from edgesynth.targets.max7800x.pipeline import load_network

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)
# Networks the graph cannot express: case -> the reason given.
SIMULATED_ORDER = (
    "a network whose known-answer simulation runs in another order than the hardware "
    "(`simulated_sequence`) cannot be expressed in the network graph"
)
NOT_A_GRAPH = {
    f"MAX78002/test-{name}": SIMULATED_ORDER
    for name in (
        "snoop-noxval",
        "snoop-skip",
        "snoop-skipl1",
        "snoop-stop",
        "snoop2-noxval",
        "snoop2-skip",
        "snoop2-skipl1",
        "snoop2-stop",
    )
}
# izer-only simulation options the graph is built without: case -> option
SIMULATION_OPTIONS = {"MAX78002/test-maxkern": "reshape_inputs"}

# Right refusals: the input or output alone exceeds a data-memory instance (the vendor streams
# these; the lowering does not): case -> what the refusal says.
INPUT_TOO_LARGE = "the input alone is too large"
OUTPUT_TOO_LARGE = "the output alone is too large"
REFUSED = {
    "MAX78000/test-faceid": INPUT_TOO_LARGE,
    "MAX78000/test-fifostream-640": OUTPUT_TOO_LARGE,
    "MAX78000/test-fifostream-notvga128x96-hwc": INPUT_TOO_LARGE,
    "MAX78000/test-fifostream-notvga190x120-hwc": INPUT_TOO_LARGE,
    "MAX78000/test-fifostream-notvga80x60-hwc": OUTPUT_TOO_LARGE,
    "MAX78002/test-fifostream-notvga128x96-hwc": OUTPUT_TOO_LARGE,
    "MAX78002/test-fifostream-notvga190x120-hwc": INPUT_TOO_LARGE,
}

# Defects: networks the vendor's tool runs that the lowering refuses today: case -> the refusal.
# (None today.)
LOWERING_GAPS: dict[str, str] = {}


class LoweringGap(Exception):
    """The lowering refused a network it should lower, with exactly the listed refusal."""


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _params() -> list:
    params = []
    for case in CASES:
        name = _case_id(case)
        marks = [pytest.mark.corpus]
        if name in LOWERING_GAPS:
            reason = "lowering defect: refuses with " + LOWERING_GAPS[name]
            marks.append(pytest.mark.xfail(raises=LoweringGap, strict=True, reason=reason))
        params.append(pytest.param(case, id=name, marks=marks))
    return params


def _load_graph(case: Path, monkeypatch: pytest.MonkeyPatch):
    """The case's graph and sample; (None, reason) where the graph cannot be built."""
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    opts = parse_izer_args([*info["args"], "--test-dir", "unused", "--prefix", "unused"])
    options = ("avg_pool_rounding", "reshape_inputs", "legacy_test")
    used = [option for option in options if getattr(opts, option)]
    if used:
        return None, "option " + ", ".join(used)
    try:
        net, sample = load_network(job_from_options(opts))
        graph = graph_from_network(net)
    except EdgesynthError as err:
        return None, err.message
    x = sample.astype(np.int64)
    if x.ndim == 3 and len(graph.tensors[graph.inputs[0]].shape) == 2:
        x = x[..., 0]
    return (get_target(info["device"].lower()), graph, x), ""


def _lower_case(case: Path, monkeypatch: pytest.MonkeyPatch):
    loaded, reason = _load_graph(case, monkeypatch)
    assert loaded is not None, reason
    return loaded


@pytest.mark.parametrize("case", _params())
def test_lowered_network_is_exact_or_refused_as_listed(case: Path, monkeypatch) -> None:
    name = _case_id(case)
    loaded, reason = _load_graph(case, monkeypatch)
    if name in SIMULATION_OPTIONS:
        assert reason == "option " + SIMULATION_OPTIONS[name]
        return
    if name in NOT_A_GRAPH:
        assert NOT_A_GRAPH[name] in reason, reason
        return
    assert loaded is not None, f"the graph cannot be built: {reason}"
    target, graph, x = loaded
    try:
        program = target.compile(graph, CompileOptions(options={"sample": x}))
    except EdgesynthError as err:
        expected = REFUSED.get(name) or LOWERING_GAPS.get(name)
        assert expected is not None, f"refused: {err}"
        assert expected in str(err), str(err)
        assert "Traceback" not in str(err)
        if name in LOWERING_GAPS:
            raise LoweringGap(str(err)) from err
        return
    assert name not in REFUSED, "lowered a network listed as refused: take it off REFUSED"
    out = target.simulate(program, [x[None]])[0][0]
    expected = np.load(case / "expected_output.npy")
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)
    # and the program's graph, run by the shared reference, agrees with the target's simulator
    from edgesynth.sim.graph import run

    ref = run(program.graph, x[None], keep=False)[program.graph.outputs[0]][0]
    np.testing.assert_array_equal(ref.reshape(expected.shape), expected)


@pytest.mark.corpus
def test_every_listed_case_is_in_the_corpus(corpus: Path) -> None:
    listed = {*NOT_A_GRAPH, *SIMULATION_OPTIONS, *REFUSED, *LOWERING_GAPS}
    assert listed <= {_case_id(case) for case in CASES}
    assert len(CASES) >= 500


def test_registry_lists_both_devices() -> None:
    assert {"max78000", "max78002"} <= set(target_names())
    with pytest.raises(EdgesynthError, match=r"unknown target `max7800`.*Did you mean"):
        get_target("max7800")


def test_emit_and_load_round_trip(tmp_path: Path, monkeypatch) -> None:
    target, graph, x = _lower_case(CORPUS / "MAX78000" / "mnist", monkeypatch)
    program = target.compile(graph, CompileOptions(options={"sample": x}))
    files = target.emit(program, tmp_path)
    description = [
        "compiled.json",
        "network.yaml",
        "tests/bias_network.npy",
        "tests/sample_network.npy",
        "tests/weights_network.npy",
    ]
    assert [f for f in sorted(files) if not f.startswith("project/")] == description
    project = {"cnn.c", "cnn.h", "main.c", "weights.h", "sampledata.h", "sampleoutput.h"}
    assert {f"project/{name}" for name in project} <= set(files)
    text = (tmp_path / "network.yaml").read_text()
    assert "operation: mlp" in text and "flatten: true" in text and "output_width: 32" in text
    loaded = target.load(tmp_path, target.manifest(program, files))
    got = target.simulate(loaded, [x[None]])[0][0]
    expected = np.load(CORPUS / "MAX78000" / "mnist" / "expected_output.npy")
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_emitted_project_runs_on_the_virtual_device(tmp_path: Path, monkeypatch) -> None:
    """The graph -> max78000 -> C project path, checked by something other than the encoder:
    the project's own writes, run on the virtual device, pass its known-answer check and
    compute the vendor's expected output for the MNIST case."""
    needs.tool("gcc")  # the recorder compiles the project with the host compiler
    from edgesynth.targets.max7800x.vdevice.commands import run_device

    target, graph, x = _lower_case(CORPUS / "MAX78000" / "mnist", monkeypatch)
    program = target.compile(graph, CompileOptions(options={"sample": x}))
    target.emit(program, tmp_path)
    report = run_device(project=tmp_path / "project")
    assert report.ok, "\n".join(report.lines)
    assert any("known answer: all" in line for line in report.lines)
    expected = np.load(CORPUS / "MAX78000" / "mnist" / "expected_output.npy")
    np.testing.assert_array_equal(report.output.reshape(expected.shape), expected)


# One network of each kind the lowering once refused, where only the device shows a wrong memory
# layout (interleaved operands, passthrough copies, transposed kernels, processors chosen anew).
ON_DEVICE = (
    "MAX78000/test-passthrough-2",
    "MAX78000/test-mpadd-minimal",
    "MAX78002/test-upsample-nonsquare-pad1B",
    "MAX78002/test-depthwiset2d",
    "MAX78000/test-widein-maxproc4",
    "MAX78002/test-eltwiseadd-multipass",
)


@pytest.mark.corpus
@pytest.mark.parametrize("name", ON_DEVICE)
def test_lowered_project_computes_the_known_answer_on_the_virtual_device(
    name: str, tmp_path: Path, monkeypatch
) -> None:
    needs.devtrace()
    from edgesynth.targets.max7800x.vdevice.commands import run_device

    target, graph, x = _lower_case(CORPUS / name, monkeypatch)
    program = target.compile(graph, CompileOptions(options={"sample": x}))
    target.emit(program, tmp_path)
    report = run_device(project=tmp_path / "project")
    assert report.ok, "\n".join(report.lines)
    expected = np.load(CORPUS / name / "expected_output.npy")
    np.testing.assert_array_equal(report.output.reshape(expected.shape), expected)
