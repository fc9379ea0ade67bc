"""The max7800x target's steps each do their own job once: `lower` builds the hardware layers in
memory (no text, no temporary file), `plan` is the one place the placer runs, `emit` writes the
planned program."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.targets.base import CompileOptions, get_target
from edgesynth.targets.max7800x import placement
from edgesynth.targets.max7800x.description.yamlcfg import load_spec, spec_from_document
from edgesynth.targets.max7800x.target import Max7800xProgram

ACT8 = g.QType(8, True, 1 / 128)
ACC = g.QType(32, True, None)
RNG = np.random.default_rng(11)


def _conv_graph() -> g.Graph:
    """conv(3x3) -> requantize -> ReLU -> max pool -> linear: two layers, nothing placed."""
    graph = g.Graph(name="two")
    graph.add_input("input", (3, 8, 8), ACT8)
    conv = g.Conv(
        name="c1/conv",
        inputs=["input"],
        outputs=["acc"],
        weight=RNG.integers(-128, 128, (8, 3, 3, 3)),
        bias=RNG.integers(-64, 64, 8) * 128,
        pads=(1, 1, 1, 1),
    )
    graph.add(conv, (8, 8, 8), ACC)
    graph.add(
        g.Requantize(name="c1/rq", inputs=["acc"], outputs=["q"], mul=1, div=256), (8, 8, 8), ACT8
    )
    graph.add(
        g.Activation(name="c1/relu", inputs=["q"], outputs=["r"], kind="relu"), (8, 8, 8), ACT8
    )
    pool = g.Pool(
        name="fc/pool", inputs=["r"], outputs=["p"], kind="max", kernel=(2, 2), stride=(2, 2)
    )
    graph.add(pool, (8, 4, 4), ACT8)
    graph.add(g.Flatten(name="fc/flat", inputs=["p"], outputs=["f"]), (128,), ACT8)
    fc = g.Linear(
        name="fc/gemm", inputs=["f"], outputs=["y"], weight=RNG.integers(-128, 128, (10, 128))
    )
    graph.add(fc, (10,), ACC)
    graph.outputs = ["y"]
    return graph


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every call of the placer (`placement.place`), recorded."""
    calls: list[Any] = []
    real = placement.place

    def place(net, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(net)
        return real(net, *args, **kwargs)

    monkeypatch.setattr(placement, "place", place)
    return calls


def test_compile_runs_the_placer_once(counted: list[Any], tmp_path: Path) -> None:
    """`edgesynth compile model.onnx -t max78000`: lower, check, plan, emit, prove; the
    placer runs once, in `plan`."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(RNG.standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], [weight]),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "model.onnx"))
    np.save(tmp_path / "calib.npy", RNG.uniform(0, 1, (8, 1, 8, 8)).astype(np.float32))
    argv = ["compile", str(tmp_path / "model.onnx"), "-t", "max78000"]
    assert main([*argv, "-c", str(tmp_path / "calib.npy"), "-o", str(tmp_path / "out")]) == 0
    assert len(counted) == 1
    assert "processors: 0x" in (tmp_path / "out" / "network.yaml").read_text()


def test_steps_write_no_temporary_file_and_place_only_in_plan(
    counted: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a temporary file or folder was made")

    for name in ("mkdtemp", "mkstemp", "NamedTemporaryFile", "TemporaryFile"):
        monkeypatch.setattr(tempfile, name, refuse)
    target = get_target("max78000")
    x = RNG.integers(-128, 128, (3, 8, 8))
    program = target.lower(_conv_graph(), CompileOptions(options={"sample": x}))
    target.check(program)
    assert isinstance(program, Max7800xProgram) and program.plan is None
    assert program.network.layers[0].processors is None and not counted
    target.plan(program)
    assert len(counted) == 1 and program.plan is not None
    assert program.network.layers[0].processors is not None
    assert program.plan.placement is not None and program.plan.result.network is program.network


def test_emit_writes_the_planned_program_without_planning(
    counted: list[Any], tmp_path: Path
) -> None:
    target = get_target("max78002")
    x = RNG.integers(-128, 128, (3, 8, 8))
    program = target.compile(_conv_graph(), CompileOptions(options={"sample": x}))
    assert len(counted) == 1
    files = target.emit(program, tmp_path)
    assert len(counted) == 1
    assert "project/cnn.c" in files and "network.yaml" in files
    # the written description, read by the vendor front end, is the planned network
    spec = load_spec(tmp_path / "network.yaml")
    placed = [layer.processors for layer in program.network.layers]
    assert [layer.processors for layer in spec.layers] == placed


def test_emit_refuses_a_program_that_was_not_planned(tmp_path: Path) -> None:
    target = get_target("max78000")
    program = target.lower(_conv_graph(), CompileOptions(options={"sample": np.zeros((3, 8, 8))}))
    with pytest.raises(ValueError, match="not planned"):
        target.emit(program, tmp_path)


def _plain(spec: Any) -> dict[str, Any]:
    """A spec's values, without where they were read (path and lines)."""
    skip = {"path", "lines", "line"}
    values = {k: v for k, v in vars(spec).items() if k not in skip}
    values["layers"] = [
        {k: v for k, v in vars(layer).items() if k not in skip} for layer in spec.layers
    ]
    return values


def test_a_document_reads_as_its_yaml_text_does(tmp_path: Path) -> None:
    target = get_target("max78000")
    x = RNG.integers(-128, 128, (3, 8, 8))
    program = target.lower(_conv_graph(), CompileOptions(options={"sample": x}))
    assert program.description is not None
    (tmp_path / "network.yaml").write_text(program.description.yaml_text)
    from_text = load_spec(tmp_path / "network.yaml")
    from_document = spec_from_document(program.description.document, "model.onnx")
    assert _plain(from_document) == _plain(from_text)
    assert from_document.path == "model.onnx"
    assert all(layer.line == 0 for layer in from_document.layers)
    assert set(from_document.layers[0].lines) == set(from_text.layers[0].lines)


def test_a_bad_document_value_names_the_model_layer_and_key_without_a_line() -> None:
    document = {
        "arch": "test",
        "dataset": "network",
        "layers": [
            {"name": "a", "operation": "none", "operands": 17, "eltwise": "add"},
            {"name": "b", "operation": "conv2d", "pad": -1},
        ],
    }
    with pytest.raises(EdgesynthError) as caught:
        spec_from_document(document, "model.onnx")
    text = str(caught.value)
    assert "2 problems found:" in text
    first, second = text.splitlines()[1:]
    assert first.startswith("model.onnx: layer 0 (a): `operands`: must be an integer from 2")
    assert second.startswith("model.onnx: layer 1 (b): `pad`: must be an integer >= 0")


def test_check_tells_a_rule_the_given_placement_breaks_without_placing(
    counted: list[Any],
) -> None:
    """Pooling then ReLU, placed by the user (a vendor description's keys, as hints): a layer
    without convolution that activates. `check` names the model, layer and key; nothing is
    placed."""
    graph = g.Graph(name="pool-relu")
    graph.meta["path"] = "model.onnx"
    graph.add_input("input", (4, 8, 8), ACT8)
    pool = g.Pool(
        name="p/pool", inputs=["input"], outputs=["p"], kind="max", kernel=(2, 2), stride=(2, 2)
    )
    graph.add(pool, (4, 4, 4), ACT8)
    relu = g.Activation(name="p/relu", inputs=["p"], outputs=["y"], kind="relu")
    graph.add(relu, (4, 4, 4), ACT8)
    graph.outputs = ["y"]
    graph.hints["p"] = {"processors": 0xF, "output_processors": 0xF, "out_offset": 0x2000}
    target = get_target("max78000")
    x = RNG.integers(-128, 128, (4, 8, 8))
    program = target.lower(graph, CompileOptions(options={"sample": x}))
    with pytest.raises(EdgesynthError) as caught:
        target.check(program)
    assert str(caught.value).startswith(
        "model.onnx: layer 0 (p): `activation`: relu: a layer without convolution cannot apply "
        "an activation"
    )
    assert not counted
