"""`frontends.onnxproto` reads ONNX files as onnx does (the same messages, arrays and attribute
values, the same errors) without importing the onnx package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgesynth.frontends import onnxproto

PULP_CASES = Path(__file__).resolve().parents[3] / "shared" / "pulp" / "cases"


def _model() -> onnx.ModelProto:
    """Tensors of every plain type as raw bytes and in typed fields, and every kind of
    attribute the front ends read."""
    rng = np.random.default_rng(0)
    raw = [
        numpy_helper.from_array(
            rng.normal(size=(4, 3, 3, 3)).astype(dtype), f"w_{np.dtype(dtype).name}"
        )
        for dtype in (np.float32, np.float64, np.float16)
    ]
    raw += [
        numpy_helper.from_array(
            rng.integers(-9, 9, size=(2, 5)).astype(dtype), f"i_{np.dtype(dtype).name}"
        )
        for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.bool_)
    ]
    typed = [
        helper.make_tensor("f_typed", TensorProto.FLOAT, (2, 2), [0.5, -1.0, 2.0, 3.25]),
        helper.make_tensor("l_typed", TensorProto.INT64, (3,), [1, -2, 3]),
        helper.make_tensor("h_typed", TensorProto.FLOAT16, (2,), np.array([1.5, 2], np.float16)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w_float32"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("LeakyRelu", ["c"], ["r"], alpha=0.25),
        helper.make_node("Constant", [], ["k"], value=typed[0]),
        helper.make_node("Constant", [], ["s"], value_ints=[1, 2]),
        helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT),
        helper.make_node("Identity", ["y"], ["z"], doc_string="d"),
    ]
    nodes[-1].attribute.extend([helper.make_attribute("names", ["a", "b"])])
    nodes[-1].attribute.extend([helper.make_attribute("scales", [0.5, 0.25])])
    nodes[-1].attribute.extend([helper.make_attribute("mode", "constant")])
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 8, 8])],
        raw + typed,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _same_reading(path: Path) -> None:
    model = onnxproto.load_model(path)
    want = onnx.load(str(path))
    assert type(model) is type(want)
    assert model.SerializeToString() == want.SerializeToString()
    tensors = list(model.graph.initializer) + [
        a.t for n in model.graph.node for a in n.attribute if a.type == a.TENSOR
    ]
    for tensor in tensors:
        got, expected = onnxproto.to_array(tensor), numpy_helper.to_array(tensor)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.flags.writeable == expected.flags.writeable
        np.testing.assert_array_equal(got, expected)
    for node in model.graph.node:
        for attr in node.attribute:
            assert onnxproto.attribute_value(attr) == helper.get_attribute_value(attr)


def test_every_tensor_and_attribute_as_onnx_reads_it(tmp_path: Path) -> None:
    onnx.save(_model(), tmp_path / "m.onnx")
    _same_reading(tmp_path / "m.onnx")


@pytest.mark.corpus
@pytest.mark.parametrize("case", sorted(p.parent.name for p in PULP_CASES.glob("*/network.onnx")))
def test_the_pulp_corpus_as_onnx_reads_it(case: str) -> None:
    _same_reading(PULP_CASES / case / "network.onnx")


def test_external_data_and_bad_files_go_to_onnx(tmp_path: Path) -> None:
    onnx.save(
        _model(),
        tmp_path / "ext.onnx",
        save_as_external_data=True,
        location="m.data",
        size_threshold=0,
    )
    assert (tmp_path / "m.data").is_file()
    got = onnxproto.load_model(tmp_path / "ext.onnx")
    assert got.SerializeToString() == onnx.load(str(tmp_path / "ext.onnx")).SerializeToString()
    weight = numpy_helper.to_array(_model().graph.initializer[0])
    np.testing.assert_array_equal(onnxproto.to_array(got.graph.initializer[0]), weight)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\xff\xff")
    with pytest.raises(Exception) as ours:
        onnxproto.load_model(bad)
    with pytest.raises(Exception) as theirs:
        onnx.load(str(bad))
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_reading_a_float_model_imports_no_onnx(tmp_path: Path) -> None:
    onnx.save(_model(), tmp_path / "m.onnx")
    probe = f"""
import json, sys
from edgesynth.frontends.onnxfile import read_onnx_file
from edgesynth.frontends.onnx_int import is_integer_model
from edgesynth.frontends.onnx.convert import _attrs
model = read_onnx_file({str(tmp_path / "m.onnx")!r})
attrs = [_attrs(n) for n in model.graph.node if n.op_type != "Constant"]
print(json.dumps([is_integer_model(model), "onnx" in sys.modules, attrs[-1]["mode"]]))
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [False, False, "constant"]


def test_onnx_imported_after_a_reading_shares_its_classes(tmp_path: Path) -> None:
    onnx.save(_model(), tmp_path / "m.onnx")
    probe = f"""
import sys
from edgesynth.frontends import onnxproto
ours = onnxproto.load_model({str(tmp_path / "m.onnx")!r})
assert "onnx" not in sys.modules
import onnx
theirs = onnx.load({str(tmp_path / "m.onnx")!r})
assert ours.SerializeToString() == theirs.SerializeToString()
print(type(ours) is type(theirs) is onnx.ModelProto)
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"
