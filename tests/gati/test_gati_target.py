"""`GatiTarget` through the Target interface on float ONNX models: compile, simulate (the
functional model) == sim.graph.run(program.graph), emit == `gati compile`'s files + manifest,
load rebuilds the same program from the files."""

from __future__ import annotations

import json
from pathlib import Path

import gati_golden_models as golden
import numpy as np
import pytest

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.frontends.onnx import load_onnx
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.base import MANIFEST, CompileOptions, get_target, read_manifest
from edgesynth.targets.gati.emit import write_outputs
from edgesynth.targets.gati.plan import compile_onnx

CASES = [
    "lenet",
    "fusion",
    "sigmoid_tanh",
    "average_pools",
    "vectors",
    "accumulants",
    "standalone",
    "global_pools",
]


def _options(extra: list[str]) -> dict[str, object]:
    options: dict[str, object] = {
        "dispatch": [extra[i + 1] for i, o in enumerate(extra) if o == "--dispatch"]
    }
    if "--on-chip-acc-bytes" in extra:
        options["on_chip_acc_bytes"] = int(extra[extra.index("--on-chip-acc-bytes") + 1])
    return options


@pytest.mark.parametrize("name", CASES)
def test_compile_simulate_emit_load(name: str, tmp_path: Path) -> None:
    model, calib_path, extra = golden.write_case(name, tmp_path)
    calib = np.load(calib_path)
    target = get_target("gati")
    program = target.compile(
        load_onnx(model), CompileOptions(calibration=calib, options=_options(extra))
    )
    assert program.target == "gati" and program.graph.is_integer
    xq = program.inputs[0].quantize(calib[:32])
    (hw,) = target.simulate(program, [xq])
    values = run(program.graph, xq)
    assert np.array_equal(hw, values[program.graph.outputs[0]])
    # every layer: the graph's tensor of each layer equals the functional model's dispatch
    layer_outputs = program.graph.meta["layer_outputs"]
    assert len(layer_outputs) == len(program.layers)

    out = tmp_path / "emitted"
    out.mkdir()
    files = target.emit(program, out)
    assert sorted(files) == sorted(
        [MANIFEST, "program.bin", "program.dwp", "report.json", "sample.dwp", "sample_expected.dwp"]
    )
    # the same files `gati compile` writes, byte for byte
    reference = tmp_path / "reference"
    opts = _options(extra)
    write_outputs(
        compile_onnx(
            model,
            calib,
            opts["dispatch"],
            **{k: v for k, v in opts.items() if k == "on_chip_acc_bytes"},
        ),
        reference,
        calib[:1],
    )
    for f in sorted(p.name for p in reference.iterdir()):
        assert (out / f).read_bytes() == (reference / f).read_bytes(), f
    manifest = read_manifest(out)
    assert manifest["files"] == sorted(f for f in files if f != MANIFEST)
    assert manifest["inputs"][0]["bits"] == 8 and manifest["inputs"][0]["scale"] > 0
    assert manifest["warnings"] == program.warnings

    loaded = target.load(out, manifest)
    assert np.array_equal(target.run(loaded, [xq])[0], hw)
    assert np.array_equal(run(loaded.graph, xq, keep=False)[loaded.graph.outputs[0]], hw)
    # the graph read back from the stream has the compiled graph's operators and parameters
    # (identity layers read back as 1x1 convolutions with unit weights)
    want = [n for n in program.graph.nodes if not isinstance(n, g.Flatten)]
    got = [n for n in loaded.graph.nodes if not isinstance(n, g.Flatten)]
    if name == "standalone":  # identity layers: 1x1 convolutions with unit weights
        assert [n.op for n in got].count("conv") == 3 > [n.op for n in want].count("conv")
        return
    assert [n.op for n in got] == [n.op for n in want]
    for a, b in zip(want, got, strict=True):
        if isinstance(a, g.Conv | g.Linear):
            assert np.array_equal(a.weight, b.weight)
            bias_a = a.bias if a.bias is not None and np.any(a.bias) else None
            assert (bias_a is None and b.bias is None) or np.array_equal(bias_a, b.bias)
        if isinstance(a, g.Requantize):
            assert (a.mul, a.div) == (b.mul, b.div)


def test_host_side_softmax_is_in_the_manifest(tmp_path: Path) -> None:
    model, calib_path, _ = golden.write_case("fusion", tmp_path)
    target = get_target("gati")
    program = target.compile(load_onnx(model), CompileOptions(calibration=np.load(calib_path)))
    target.emit(program, tmp_path)
    assert json.loads((tmp_path / MANIFEST).read_text())["host_post"] == "logsoftmax"


def test_float_graph_needs_calibration(tmp_path: Path) -> None:
    model, _, _ = golden.write_case("lenet", tmp_path)
    with pytest.raises(EdgesynthError, match="needs calibration data"):
        get_target("gati").compile(load_onnx(model), CompileOptions())


def test_check_names_every_violation(tmp_path: Path) -> None:
    """Two layers break two rules: both are named at once."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w5 = numpy_helper.from_array(rng.standard_normal((4, 1, 5, 5)).astype(np.float32), "w5")
    wg = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "wg")
    nodes = [
        helper.make_node("Conv", ["x", "w5"], ["a"], name="big_kernel"),
        helper.make_node("Conv", ["a", "wg"], ["y"], name="grouped", group=2),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w5, wg],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(MultipleErrors) as info:
        get_target("gati").compile(load_onnx(path), CompileOptions(np.zeros((2, 1, 12, 12))))
    text = str(info.value)
    assert "2 problems found" in text
    assert "`big_kernel`: kernel 5x5 has 25 taps" in text and "`grouped`: grouped" in text


def test_simulate_refuses_bad_inputs(tmp_path: Path) -> None:
    model, calib_path, _ = golden.write_case("lenet", tmp_path)
    target = get_target("gati")
    program = target.compile(load_onnx(model), CompileOptions(calibration=np.load(calib_path)))
    with pytest.raises(EdgesynthError, match="int8 inputs"):
        target.simulate(program, [np.full((1, 1, 12, 12), 300)])
    with pytest.raises(EdgesynthError, match=r"input has shape \(1, 12, 12\)"):
        target.simulate(program, [np.zeros((1, 12, 12), dtype=np.int64)])
