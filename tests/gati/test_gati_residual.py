"""Residual and concatenating networks on Gati: element-wise add/subtract/multiply through the
ELTWISE instruction (edgesynth's choice, docs/gati.md), channel concatenation through the DRAM
layout, run by the functional model."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import gati_mnist_models as mm
import gati_residual_models as rm
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from cli_helpers import run_cli
from edgesynth.errors import EdgesynthError
from edgesynth.flow import load_model
from edgesynth.targets.base import CompileOptions, get_target, read_manifest
from edgesynth.targets.gati import isa
from edgesynth.targets.gati.executor import isa as own_isa
from edgesynth.targets.gati.floatref import float_forward
from edgesynth.targets.gati.host import host_contract, run_program
from edgesynth.targets.gati.plan import compile_onnx
from edgesynth.targets.gati.quantize import quantize_input
from edgesynth.targets.gati.reference import reference_layers

DOCS = Path(__file__).resolve().parents[2] / "docs" / "gati.md"


def _export(combine: str, folder: Path) -> Path:
    import torch

    torch.manual_seed(0)
    return mm.export(rm.residual_net(combine).eval(), folder / f"res_{combine}.onnx", 13, True)


def _every_layer_matches_the_reference(path: Path, calib: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Every layer's output from the functional model equals the integer reference; returns
    the float outputs."""
    first = compile_onnx(path, calib)
    prog = compile_onnx(path, calib, dispatch=[c.name for c in first.layers])
    host = host_contract(prog)
    y, ints = run_program(prog.stream, host, x)
    ref = reference_layers(prog.model, quantize_input(x, host["input"]["scale"]))
    assert len(ints) == len(ref) == len(prog.layers)
    for i, r in enumerate(ref):
        assert np.array_equal(ints[i], r), f"layer {i} differs from the integer reference"
    return y


@pytest.mark.parametrize("combine", ["sub", "mul"])
def test_residual_net_runs_value_for_value(combine: str, tmp_path: Path) -> None:
    """Two skip additions, a concatenation and a subtraction (or multiplication): the layers are
    what the graph says, and the functional model equals the reference layer by layer."""
    rng = np.random.default_rng(4)
    path = _export(combine, tmp_path)
    calib = rng.standard_normal((24, 1, 28, 28)).astype(np.float32)
    x = calib[:8]  # inside the calibrated range
    prog = compile_onnx(path, calib)
    engines = [c.engine for c in prog.layers]
    assert engines.count("eltwise") == 3 and engines.count("conv") == 7, engines
    chain = prog.model.chain
    ops = [fl.eltwise for fl in chain.layers if fl.kind == "eltwise"]
    assert ops == ["add", "add", combine]
    concat = [src for i in range(len(chain.layers)) for src in chain.sources_of(i) if len(src) > 1]
    assert len(concat) == 2  # conv6 and conv7 read the concatenation
    first, second = (prog.layers[j].regions["output"] for j in concat[0])
    assert second.start == first.end  # adjacent channel ranges of one buffer: no copy
    assert prog.layers[-1].regions["input"].start > 0
    y = _every_layer_matches_the_reference(path, calib, x)
    y_ort = mm.ort_run(path, x)
    np.testing.assert_allclose(float_forward(chain, x), y_ort, rtol=1e-4, atol=1e-4)
    assert np.abs(y - y_ort).max() < 0.1 * np.abs(y_ort).max()


def test_simulate_equals_emit_load_run_and_the_program_graph(tmp_path: Path) -> None:
    """Through the target interface: the functional model running the planned stream, the
    emitted files read back and run, and `sim.graph.run` of the program's integer graph (with
    its operand Requantize steps and its Concat) agree value for value."""
    rng = np.random.default_rng(5)
    from edgesynth.sim.graph import run

    path = _export("sub", tmp_path)
    calib = rng.standard_normal((24, 1, 28, 28)).astype(np.float32)
    target = get_target("gati")
    program = target.compile(load_model(path), CompileOptions(calibration=calib))
    ops = {n.op for n in program.graph.nodes}
    assert {"eltwise", "concat", "requantize"} <= ops
    xq = program.inputs[0].quantize(rng.standard_normal((6, 1, 28, 28)))
    (simulated,) = target.simulate(program, [xq])
    (tmp_path / "out").mkdir()
    target.emit(program, tmp_path / "out")
    (ran,) = target.run(target.load(tmp_path / "out", read_manifest(tmp_path / "out")), [xq])
    graph_out = run(program.graph, xq)[program.graph.outputs[0]]
    assert np.array_equal(simulated, ran)
    assert np.array_equal(simulated, graph_out.reshape(simulated.shape))


def test_residual_add_of_the_input(tmp_path: Path) -> None:
    """conv(x) + x: the element-wise block reads the input region as its second operand."""
    rng = np.random.default_rng(6)
    w = numpy_helper.from_array(rng.standard_normal((3, 3, 3, 3)).astype(np.float32) * 0.2, "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["a"], name="c1", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a", "x"], ["s"], name="skip_add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
        helper.make_node("Conv", ["y", "w"], ["z"], name="c2"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    calib = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    prog = compile_onnx(path, calib)
    assert [c.engine for c in prog.layers] == ["conv", "eltwise", "conv"]
    assert prog.layers[1].regions["input_b"] == prog.input_region
    x = calib[:6]  # inside the calibrated range
    y = _every_layer_matches_the_reference(path, calib, x)
    y_ort = mm.ort_run(path, x)
    assert np.abs(y - y_ort).max() < 0.05 * np.abs(y_ort).max()


def _concat_model(tmp_path: Path, first_channels: int, with_input: bool = False) -> Path:
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(
            rng.standard_normal((first_channels, 2, 3, 3)).astype(np.float32), "w1"
        ),
        numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w2"),
        numpy_helper.from_array(
            rng.standard_normal((3, first_channels + (2 if with_input else 4), 1, 1)).astype(
                np.float32
            ),
            "w3",
        ),
    ]
    parts = ["a", "x"] if with_input else ["a", "b"]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="left", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], name="right", pads=[1, 1, 1, 1]),
        helper.make_node("Concat", parts, ["c"], name="join", axis=1),
        helper.make_node("Conv", ["c", "w3"], ["y"], name="reader"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_concatenation_of_two_layers(tmp_path: Path) -> None:
    """Two branches of 8 and 4 channels concatenated and read by a 1x1 convolution."""
    rng = np.random.default_rng(8)
    path = _concat_model(tmp_path, 8)
    calib = rng.standard_normal((16, 2, 6, 6)).astype(np.float32)
    prog = compile_onnx(path, calib)
    left, right, reader = prog.layers
    assert right.regions["output"].start == left.regions["output"].end
    assert reader.regions["input"].start == left.regions["output"].start
    assert reader.regions["input"].end == right.regions["output"].end
    assert prog.model.layers[0].out_scale == pytest.approx(prog.model.layers[1].out_scale, 1e-4)
    x = rng.standard_normal((6, 2, 6, 6)).astype(np.float32)
    _every_layer_matches_the_reference(path, calib, x)


@pytest.mark.parametrize(
    ("first", "with_input", "match"),
    [
        (4, False, r"`reader`.*part `a` has 4 channels.*multiple of 8"),
        (8, True, r"`reader`.*concatenation of the graph input"),
    ],
)
def test_concatenations_gati_cannot_lay_out(
    first: int, with_input: bool, match: str, tmp_path: Path
) -> None:
    path = _concat_model(tmp_path, first, with_input)
    calib = np.zeros((4, 2, 6, 6), dtype=np.float32) + 0.5
    with pytest.raises(EdgesynthError, match=match) as info:
        compile_onnx(path, calib)
    assert str(path) in str(info.value)
    np.save(tmp_path / "cal.npy", calib)
    result = run_cli("gati", "compile", path, "-c", tmp_path / "cal.npy", "-o", tmp_path / "out")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.count("edgesynth: error:") == 1 and "`reader`" in result.stderr
    assert not (tmp_path / "out").exists()


def test_element_wise_with_broadcasting_is_refused(tmp_path: Path) -> None:
    """The element-wise block takes two maps of one shape."""
    rng = np.random.default_rng(9)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((4, 2, 6, 6)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="left", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], name="squeeze"),
        helper.make_node("Mul", ["a", "b"], ["y"], name="gate"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    path = tmp_path / "model.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    calib = np.zeros((4, 2, 6, 6), dtype=np.float32) + 0.5
    with pytest.raises(
        EdgesynthError, match=r"`gate`.*\(4, 6, 6\) and \(4, 1, 1\).*no broadcasting"
    ):
        compile_onnx(path, calib)


def test_gati_decode_prints_eltwise(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    path = _export("sub", tmp_path)
    calib = tmp_path / "cal.npy"
    np.save(calib, rng.standard_normal((16, 1, 28, 28)).astype(np.float32))
    assert run_cli("gati", "compile", path, "-c", calib, "-o", tmp_path / "out").exit_code == 0
    result = run_cli("gati", "decode", tmp_path / "out" / "program.bin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("ELTWISE (opcode 0x4)") == 3
    for name in ("Operation          7:4", "AStartAddress    69:38", "BShift         207:203"):
        assert name in result.stdout
    assert re.search(r"Operation\s+7:4\s+1\n", result.stdout)  # the subtraction


def _docs_table() -> dict[str, str]:
    text = DOCS.read_text()
    section = text[text.index("### ELTWISE") : text.index("### Field values edgesynth chooses")]
    return dict(re.findall(r"^\| `(\w+)` \| (\d+:\d+) \|", section, re.MULTILINE))


def test_eltwise_tables_are_the_docs() -> None:
    """The encoder's ELTWISE format and the functional model's own table are both the one in
    docs/gati.md, field for field."""
    table = _docs_table()
    assert table.pop("Opcode") == "3:0"
    assert [(f.name, f"{f.msb}:{f.lsb}") for f in isa.ELTWISE.fields[1:]] == list(table.items())
    name, fields = own_isa.CHOSEN[isa.OP_ELTWISE]
    assert name == "ELTWISE" and fields == table
    assert isa.ELT_NAMES == own_isa.ELT_OPS


@pytest.fixture
def move_field() -> Iterator[object]:
    """`move(field)`: the encoder's ELTWISE field moves up one bit, as a wrong bit position
    typed into isa.py would; restored afterwards."""
    table = isa.ELTWISE
    saved = {attr: getattr(table, attr) for attr in ("fields", "by_name")}

    def move(name: str) -> None:
        new = tuple(
            dataclasses.replace(f, lsb=f.lsb + 1) if f.name == name else f for f in table.fields
        )
        object.__setattr__(table, "fields", new)
        object.__setattr__(table, "by_name", {f.name: f for f in new})

    yield move
    for attr, value in saved.items():
        object.__setattr__(table, attr, value)


@pytest.mark.parametrize(
    ("field", "noticed"),
    [
        ("AScale", "does not compute the simulator's answer"),  # read back as twice the scale
        ("BStartAddress", "operand B spans"),  # the operand's range no longer fits the layer
        ("IC", "do not match an ELTWISE"),  # the channel count no longer matches KernelItr
    ],
)
def test_an_eltwise_field_misplaced_in_the_encoder_is_noticed(
    field: str, noticed: str, tmp_path: Path, move_field
) -> None:
    """The functional model reads ELTWISE with its own table: a field the encoder writes one
    bit off makes the emitted program compute something else (or nothing), and compile
    refuses it, writing nothing."""
    rng = np.random.default_rng(17)
    path = _export("sub", tmp_path)
    calib = tmp_path / "cal.npy"
    np.save(calib, rng.standard_normal((16, 1, 28, 28)).astype(np.float32))
    argv = ["compile", path, "-t", "gati", "--calibration", calib]
    good = run_cli(*argv, "-o", tmp_path / "good")
    assert good.exit_code == 0 and "known answer reproduced" in good.stdout, good.stderr
    move_field(field)  # type: ignore[operator]
    bad = run_cli(*argv, "-o", tmp_path / "bad")
    assert bad.exit_code == 1, bad.stdout
    assert bad.stderr.count("edgesynth: error:") == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert noticed in bad.stderr, bad.stderr
    assert not (tmp_path / "bad").exists()


# -- trained on real MNIST ----------------------------------------------------------------

N_TRAIN = 6000
BATCH = 32
CACHE = Path(tempfile.gettempdir()) / "edgesynth-test-cache"


@pytest.fixture(scope="module")
def trained_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The residual CNN trained 1 epoch on 6,000 MNIST images (weights cached by the training
    code's hash), exported by torch.onnx."""
    import torch

    key_src = inspect.getsource(rm.residual_net) + inspect.getsource(mm.train)
    key_src += f"{N_TRAIN} {BATCH} seed 0"
    key = hashlib.sha256((key_src + torch.__version__).encode()).hexdigest()[:16]
    cached = CACHE / f"gati-residual-{key}.pt"
    torch.manual_seed(0)  # the initial weights too
    model = rm.residual_net("sub")
    if cached.is_file():
        model.load_state_dict(torch.load(cached, weights_only=True))
    else:
        x, y = mm.load_mnist()
        mm.train(model, x[:N_TRAIN], y[:N_TRAIN], 1, batch=BATCH)
        CACHE.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=CACHE, suffix=".pt")
        os.close(fd)
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, cached)
    model.eval()
    return mm.export(model, tmp_path_factory.mktemp("residual") / "residual.onnx", 13, True)


@pytest.mark.slow
@pytest.mark.train
def test_trained_residual_net_agrees_with_onnx_runtime(trained_onnx: Path, tmp_path: Path) -> None:
    """`compile -t gati` of the trained residual CNN (calibrated on 200 images): simulate equals
    emit -> load -> run value for value, and the top-1 class agrees with ONNX Runtime's on at
    least 98% of images 9000-9999."""
    x, labels = mm.load_mnist()
    calib_path = tmp_path / "cal.npy"
    np.save(calib_path, x[:200])
    out = tmp_path / "out"
    result = run_cli("compile", trained_onnx, "-t", "gati", "--calibration", calib_path, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "known answer reproduced" in result.stdout
    target = get_target("gati")
    program = target.compile(load_model(trained_onnx), CompileOptions(calibration=x[:200]))
    xe, ye = x[mm.EVAL], labels[mm.EVAL]
    xq = program.inputs[0].quantize(xe)
    (simulated,) = target.simulate(program, [xq])
    (ran,) = target.run(target.load(out, read_manifest(out)), [xq])
    assert np.array_equal(simulated, ran)
    y_ort = mm.ort_run(trained_onnx, xe)
    agreement = float((ran.argmax(1) == y_ort.argmax(1)).mean())
    ort_accuracy = float((y_ort.argmax(1) == ye).mean())
    print(f"\nresidual CNN on Gati: agreement {agreement:.3f}, ORT accuracy {ort_accuracy:.3f}")
    assert ort_accuracy > 0.9  # a trained network, not noise
    assert agreement >= 0.98
