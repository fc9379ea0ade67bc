"""The xDNN target end to end on hand-built graphs: the functional model (executing the emitted
script.bin and filters.bin) equals the integer reference value for value; decode -> encode
gives the emitted script bytes; no live tensors overlap; bad models are refused by node."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from xdnn_graphs import Builder, inception

from edgesynth.errors import EdgesynthError
from edgesynth.sim.graph import run
from edgesynth.targets.base import get_target
from edgesynth.targets.xdnn import commands
from edgesynth.targets.xdnn.cli import check_quant_file, compile_graph, decode_file, run_program
from edgesynth.targets.xdnn.executor.decode import decode
from edgesynth.targets.xdnn.imem import overlaps
from edgesynth.targets.xdnn.script import encode
from edgesynth.targets.xdnn.target import run_folder


def _data(shape: tuple[int, ...], n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, *shape))


def _check(graph, tmp_path: Path, engine: str = "28x32", bits: int = 8, n: int = 40):
    x = _data(graph.tensors["x"].shape, n)
    out = tmp_path / f"{graph.name}-{engine}-{bits}"
    res = compile_graph(graph, x[:24], out, engine=engine, bits=bits)
    prog = res["program"]
    xq = prog.inputs[0].quantize(x)
    ref = run(prog.graph, xq, keep=False)[prog.graph.outputs[0]]
    got = run_folder(out, xq)
    np.testing.assert_array_equal(got, ref.reshape(got.shape))
    data = (out / "script.bin").read_bytes()
    assert encode(decode(data)) == data
    assert overlaps(prog.plan) == []
    assert prog.plan.peak <= prog.plan.engine.imem_bytes
    text, status = check_quant_file(out / "quant.json")
    assert status == 0, text
    commands.read_program(out / "program.cmd")  # our own .cmd reads back
    commands.read_program(out / "program.json")
    return prog, out, x


@pytest.mark.parametrize(("engine", "bits"), [("28x32", 8), ("14x32", 16), ("56x32", 8)])
def test_small_inception_net(tmp_path: Path, engine: str, bits: int) -> None:
    b = Builder("incept", (1, 16, 16))
    x = b.maxpool(b.conv("x", 8, 3, pad=1), 2, 2)
    x = inception(b, x, 4, 4, 6, 2, 4, 4)
    y = b.fc(b.gap(x), 10)
    prog, out, data = _check(b.done(y), tmp_path, engine, bits)
    ops = [lay.op for lay in prog.layers]
    assert ops.count("XNAvgPool") == 1
    avg = next(lay for lay in prog.layers if lay.op == "XNAvgPool")
    assert avg.fc_mode  # the last average pool maps 8x8 to 1x1 in fully-connected mode
    cat = next(iter(prog.lowered.concats))
    members = prog.lowered.concats[cat]
    addrs = [prog.plan.placements[m] for m in members]
    for a, b_ in itertools.pairwise(addrs):
        assert a.end == b_.address  # branches back to back
    text = (out / "program.cmd").read_text()
    assert "XNConcat" in text and text.startswith("# edgesynth")
    y = run_program(out, data)
    assert y.shape == (len(data), 10)


def _two_range_concat(b: Builder) -> tuple[str, str, str]:
    """Two branches whose ranges differ 50-fold, concatenated."""
    x = b.conv("x", 4, 3, pad=1)
    c = b.shape(x)[0]
    rng = np.random.default_rng(3)
    wide = b.conv(x, 4, 1, w=rng.standard_normal((4, c, 1, 1)) * 5.0, b=np.zeros(4))
    narrow = b.conv(x, 4, 1, w=rng.standard_normal((4, c, 1, 1)) * 0.1, b=np.zeros(4))
    return wide, narrow, b.concat(wide, narrow)


def test_concat_branches_keep_their_own_steps_when_convolutions_read_them(
    tmp_path: Path, monkeypatch
) -> None:
    """A concatenation read by a convolution (here through a max pool): each branch is stored at
    its own step and the reader folds the steps into its weights, so the narrow branch keeps its
    levels (the output's error is several times smaller than with one step for all); read by
    the network output, one step for all."""
    from edgesynth.targets.xdnn import lower

    def output_error(name: str) -> tuple[float, dict]:
        b = Builder(name, (2, 8, 8))
        wide, narrow, cat = _two_range_concat(b)
        # the reader weighs both branches alike: the narrow one's levels matter
        w = np.random.default_rng(4).standard_normal((3, 8, 1, 1))
        w[:, :4] /= 50.0
        y = b.conv(b.maxpool(cat, 2, 2), 3, 1, relu=False, w=w, b=np.zeros(3))
        graph = b.done(y)
        prog, _, x = _check(graph, tmp_path)
        q = prog.graph.tensors
        ints = run(prog.graph, prog.inputs[0].quantize(x), keep=False)[y]
        floats = run(graph, x, keep=False)[y]
        steps = {k: q[t].qtype.scale for k, t in (("wide", wide), ("narrow", narrow), ("cat", cat))}
        return float(np.abs(ints * q[y].qtype.scale - floats).mean()), steps

    own, steps = output_error("cat")
    assert steps["narrow"] < steps["wide"] / 10  # its own step, not the wide one's
    assert steps["cat"] == steps["wide"]
    monkeypatch.setattr(lower, "_per_branch_concats", lambda fused, final: set())
    shared, steps = output_error("cat_shared")
    assert steps["narrow"] == steps["wide"]
    assert own < shared / 3, (own, shared)
    print(f"output error: own steps {own:.4f}, one step {shared:.4f}")
    monkeypatch.undo()

    b = Builder("cat_out", (2, 8, 8))
    wide, narrow, cat = _two_range_concat(b)
    prog, _, _ = _check(b.done(cat), tmp_path)
    q = prog.graph.tensors
    assert q[narrow].qtype.scale == q[wide].qtype.scale == q[cat].qtype.scale


def test_residual_add_and_odd_depths(tmp_path: Path) -> None:
    b = Builder("res", (3, 9, 9))  # odd input depth and width below the IMEM width
    a = b.conv("x", 5, 3, pad=1)  # odd depth
    c = b.conv(a, 5, 3, pad=1, relu=False)
    y = b.add(a, c)
    y = b.maxpool(y, 3, 2, ceil=True)  # ceil-mode overhang
    prog, _, _ = _check(b.done(b.fc(y, 4)), tmp_path)
    assert [lay.op for lay in prog.layers] == [
        "XNConv",
        "XNConv",
        "XNEltwise",
        "XNMaxPool",
        "XNConv",
    ]


def test_target_registry_and_generic_run(tmp_path: Path) -> None:
    target = get_target("xdnn")
    b = Builder("lenet", (1, 12, 12))
    y = b.fc(b.maxpool(b.conv("x", 4, 3, pad=1), 2, 2), 6)
    prog, out, x = _check(b.done(y), tmp_path)

    manifest = json.loads((out / "compiled.json").read_text())
    loaded = target.load(out, manifest)
    xq = loaded.inputs[0].quantize(x)
    np.testing.assert_array_equal(target.run(loaded, [xq])[0], target.simulate(prog, [xq])[0])
    assert "XNConv" in decode_file(out / "script.bin")


def test_refusals_name_the_node(tmp_path: Path) -> None:
    b = Builder("bad", (3, 8, 8))
    y = b.relu("x")  # a Relu with nothing to fuse into
    with pytest.raises(EdgesynthError, match="node `relu1`: a Relu must follow"):
        compile_graph(b.done(y), _data((3, 8, 8), 4), tmp_path / "o")
    b = Builder("odd", (2, 8, 8))
    y = b.concat(b.conv("x", 3, 1), b.conv("x", 4, 1))
    with pytest.raises(EdgesynthError, match="branch `relu2` has 3 channels"):
        compile_graph(b.done(y), _data((2, 8, 8), 4), tmp_path / "o")
    b = Builder("big", (1, 40, 40))
    y = b.fc(b.conv("x", 2, 3), 3)  # 38x38 kernel
    with pytest.raises(EdgesynthError, match="node `fc4`: a fully-connected layer's input 38x38"):
        compile_graph(b.done(y), _data((1, 40, 40), 4), tmp_path / "o")
    b = Builder("huge", (64, 200, 200))
    y = b.conv(b.conv("x", 128, 3, pad=1), 128, 3, pad=1)
    with pytest.raises(EdgesynthError, match="IMEM overflow"):
        compile_graph(b.done(y), _data((64, 200, 200), 2), tmp_path / "o")
    assert not (tmp_path / "o").exists()
