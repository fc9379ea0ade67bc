"""The max7800x target lowers network graphs to the vendor's description and runs them.

Corpus round trip: the graph of each vendor network (frontends.ai8x, placement kept as hints) is
lowered again by `Max7800xTarget.compile` (fusion -> YAML + synthetic weights -> the izer's own
builder and rules) and simulated: the result equals the vendor's known answer, or the lowering
refuses with a message (placement the simple rule cannot make yet: streaming, FIFOs, ...). It is
never different.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.ai8x import graph_from_network
from edgesynth.targets.base import CompileOptions, get_target, target_names
from edgesynth.targets.max7800x.izer import job_from_options
from edgesynth.targets.max7800x.izer_args import parse_izer_args
from edgesynth.targets.max7800x.pipeline import load_network

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)
# Networks the lowering must reproduce (not merely refuse): trained demos, multi-pass,
# element-wise, passthrough, 1-D, transposed, flatten, in_dim.
MUST_LOWER = [
    "MAX78000/mnist",
    "MAX78000/cifar-10",
    "MAX78000/kws20_v3",
    "MAX78000/test-kws20-hwc",
    "MAX78000/test-chan1024-1024",
    "MAX78000/test-eltwiseadd-7ch",
    "MAX78000/test-passthrough-pool",
    "MAX78000/test-conv1d-multilayer-q1248",
    "MAX78002/test-eltwiseaddconv2d-7ch",
    "MAX78002/test-depthwise-64-bias",
]


def _lower_case(case: Path, monkeypatch: pytest.MonkeyPatch):
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    opts = parse_izer_args([*info["args"], "--test-dir", "unused", "--prefix", "unused"])
    if opts.avg_pool_rounding or opts.reshape_inputs or opts.legacy_test:
        pytest.skip("the graph is built without izer-only simulation options")
    try:
        net, sample = load_network(job_from_options(opts))
        graph = graph_from_network(net)
    except EdgesynthError:
        pytest.skip("not expressible as a graph (see tests/frontends)")
    x = sample.astype(np.int64)
    if x.ndim == 3 and len(graph.tensors[graph.inputs[0]].shape) == 2:
        x = x[..., 0]
    target = get_target(info["device"].lower())
    return target, graph, x


@pytest.mark.corpus
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.parent.name}/{c.name}")
def test_lowered_network_is_exact_or_refused(case: Path, monkeypatch) -> None:
    target, graph, x = _lower_case(case, monkeypatch)
    name = f"{case.parent.name}/{case.name}"
    try:
        program = target.compile(graph, CompileOptions(options={"sample": x}))
    except EdgesynthError as err:
        assert name not in MUST_LOWER, str(err)
        assert "Traceback" not in str(err)
        return
    out = target.simulate(program, [x[None]])[0][0]
    expected = np.load(case / "expected_output.npy")
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)
    # and the program's graph, run by the shared reference, agrees with the target's simulator
    from edgesynth.sim.graph import run

    ref = run(program.graph, x[None], keep=False)[program.graph.outputs[0]][0]
    np.testing.assert_array_equal(ref.reshape(expected.shape), expected)


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
    if shutil.which("gcc") is None:
        pytest.skip("needs the host C compiler (gcc) for the recorder")
    from edgesynth.targets.max7800x.vdevice.commands import run_device

    target, graph, x = _lower_case(CORPUS / "MAX78000" / "mnist", monkeypatch)
    program = target.compile(graph, CompileOptions(options={"sample": x}))
    target.emit(program, tmp_path)
    report = run_device(project=tmp_path / "project")
    assert report.ok, "\n".join(report.lines)
    assert any("known answer: all" in line for line in report.lines)
    expected = np.load(CORPUS / "MAX78000" / "mnist" / "expected_output.npy")
    np.testing.assert_array_equal(report.output.reshape(expected.shape), expected)
