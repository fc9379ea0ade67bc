"""The gap8 target on networks outside the corpus (every layer kind, signed and sub-byte data,
several inputs): the generated C equals the reference for every layer, whatever the tiling; the
Target interface and the command line; refusals name the ONNX node."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnxgen import nemo_network, quantlab_network, requantshift_network

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx_int import load_integer_onnx
from edgesynth.targets.base import CompileOptions, get_target, read_manifest
from edgesynth.targets.pulp import cli
from edgesynth.targets.pulp.lower import lower_graph
from edgesynth.targets.pulp.target import read_network
from edgesynth.targets.pulp.tiler import channel_choices

NETWORKS = {  # the network, its input types, the input range, an L1 budget that forces tiling
    "nemo": (lambda d: nemo_network(d, np.random.default_rng(11)), ["uint8"], (0, 256), 1500),
    "nemo-signed": (
        lambda d: nemo_network(d, np.random.default_rng(12), signed=True),
        ["int8"],
        (-128, 128),
        1500,
    ),
    "quantlab-4bit": (
        lambda d: quantlab_network(d, np.random.default_rng(13)),
        ["int4"],
        (-8, 8),
        400,
    ),
    "requantshift-2-inputs": (
        lambda d: requantshift_network(d, np.random.default_rng(14)),
        ["int8", "int8"],
        (-128, 128),
        400,
    ),
}


def _inputs(model: Path, types: list[str], bounds: tuple[int, int], samples: int = 2):
    g = load_integer_onnx(model, types).graph
    rng = np.random.default_rng(99)
    return [rng.integers(*bounds, (samples, *g.tensors[n].shape)) for n in g.inputs]


def _layers_equal(folder: Path, model: Path, types: list[str], inputs, toolchain="host") -> None:
    sim = cli.simulate(model, inputs, types)
    ran = cli.run_program(folder, inputs, toolchain)
    layers = sim["_layers"]
    keys = [k for k in sim if k.startswith("out_")]
    assert keys and len(keys) == len([k for k in ran if k.startswith("out_")])
    for key in keys:
        assert np.array_equal(ran[key], sim[key]), key
    assert len(layers) >= 4


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_generated_c_equals_the_reference(name: str, tmp_path: Path) -> None:
    make, types, bounds, l1 = NETWORKS[name]
    model = make(tmp_path)
    inputs = _inputs(model, types, bounds)
    folder = tmp_path / "out"
    program = cli.compile_network(model, folder, input_types=types, l1=l1)
    assert any(lp.tiling.tiles > 1 for lp in program.plan.layers), "tiling is exercised"
    _layers_equal(folder, model, types, inputs)


@pytest.fixture(scope="module")
def nemo_model(tmp_path_factory) -> Path:
    return nemo_network(tmp_path_factory.mktemp("nemo"), np.random.default_rng(21))


@st.composite
def tilings(draw, layers):
    tiles = {}
    for layer in layers:
        c = draw(st.sampled_from(channel_choices(layer, layer.cout)))
        h = draw(st.integers(1, layer.out_shape[1]))
        w = draw(st.integers(1, layer.out_shape[2]))
        tiles[layer.index] = (c, h, w)
    return tiles, draw(st.booleans())


_NEMO_LAYERS = None


def _nemo_layers(model: Path):
    global _NEMO_LAYERS
    if _NEMO_LAYERS is None:
        _NEMO_LAYERS = lower_graph(read_network(model))[0]
    return _NEMO_LAYERS


@pytest.mark.slow
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_outputs_do_not_depend_on_the_tiling(nemo_model: Path, tmp_path_factory, data) -> None:
    layers = _nemo_layers(nemo_model)
    tiles, single = data.draw(tilings(layers))
    folder = tmp_path_factory.mktemp("tiled")
    cli.compile_network(nemo_model, folder, tiles=tiles, single_buffer=single)
    inputs = _inputs(nemo_model, ["uint8"], (0, 256), samples=1)
    _layers_equal(folder, nemo_model, ["uint8"], inputs)


def test_the_target_interface_compiles_emits_and_loads(nemo_model: Path, tmp_path: Path) -> None:
    target = get_target("gap8")
    graph = read_network(nemo_model)
    program = target.compile(graph, CompileOptions(options={"l1": 8000}))
    program.model = nemo_model
    folder = tmp_path / "prog"
    folder.mkdir()
    files = target.emit(program, folder)
    (folder / "compiled.json").write_text(json.dumps(target.manifest(program, files)))
    manifest = read_manifest(folder)
    assert manifest["target"] == "gap8"
    loaded = target.load(folder, manifest)
    x = _inputs(nemo_model, ["uint8"], (0, 256))
    want = target.simulate(program, x)
    got = target.run(loaded, x)
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    from edgesynth.sim.graph import run

    ref = run(program.graph, x[0])
    assert np.array_equal(want[0], ref[program.graph.outputs[0]])


def test_running_a_program_without_gcc_says_what_is_missing(
    nemo_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edgesynth.flow import run_folder
    from edgesynth.targets.pulp import target as gap8

    cli.compile_network(nemo_model, tmp_path / "prog")
    monkeypatch.setattr(gap8.shutil, "which", lambda name: None)
    x = _inputs(nemo_model, ["uint8"], (0, 256))[0]
    with pytest.raises(EdgesynthError, match=r"running a gap8 program builds the generated C"):
        run_folder(tmp_path / "prog", x)


def test_a_layer_whose_smallest_tile_does_not_fit_is_refused(nemo_model: Path, tmp_path: Path):
    with pytest.raises(EdgesynthError, match=r"ONNX node MatMul_\d+: its smallest tile needs"):
        cli.compile_network(nemo_model, tmp_path / "x", l1=100)
    assert not (tmp_path / "x").exists()


def test_a_forced_tile_that_breaks_a_rule_is_refused(nemo_model: Path, tmp_path: Path) -> None:
    with pytest.raises(EdgesynthError, match="outside the output"):
        cli.compile_network(nemo_model, tmp_path / "x", tiles={0: (8, 100, 1)})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgesynth")
    cli.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_command_line_simulate_compile_run_report(nemo_model: Path, tmp_path: Path, capsys):
    x = _inputs(nemo_model, ["uint8"], (0, 256), samples=1)[0]
    data = tmp_path / "data.npz"
    np.savez(data, input=x[0].transpose(1, 2, 0).reshape(-1))  # the corpus layout: HWC, flat
    parse = _parser().parse_args
    args = parse(
        [
            "pulp",
            "simulate",
            str(nemo_model),
            "--input",
            str(data),
            "--output",
            str(tmp_path / "sim.npz"),
        ]
    )
    assert args.handler(args) == 0
    out = tmp_path / "prog"
    args = parse(
        [
            "pulp",
            "compile",
            str(nemo_model),
            "-o",
            str(out),
            "--l2",
            "60000",
            "--code-reserve",
            "10000",
            "--single-buffer",
        ]
    )
    assert args.handler(args) == 0
    assert "L2 peak" in capsys.readouterr().out
    args = parse(["pulp", "run", str(out), "--input", str(data), "--output", str(tmp_path / "r")])
    assert args.handler(args) == 0
    sim, ran = np.load(tmp_path / "sim.npz"), np.load(tmp_path / "r")  # exactly the name given
    layers = [k for k in sim.files if k.startswith("out_layer")]
    assert layers and all(np.array_equal(sim[k], ran[k]) for k in layers)
    assert all(f"checksum_{k[4:]}" in ran.files for k in layers)
    args = parse(["pulp", "report", str(out)])
    assert args.handler(args) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["l2_peak"] <= 50000 and plan["options"]["double_buffer"] is False


def test_command_line_errors_name_the_problem(tmp_path: Path) -> None:
    parse = _parser().parse_args
    args = parse(["pulp", "run", str(tmp_path), "--input", "x.npz", "--output", "y.npz"])
    with pytest.raises(EdgesynthError, match="not a compiled program"):
        args.handler(args)
    args = parse(["pulp", "compile", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o")])
    with pytest.raises(EdgesynthError, match="no such file"):
        args.handler(args)
    args = parse(["pulp", "compile", "m.onnx", "-o", "o", "--tile", "3=oops"])
    with pytest.raises(EdgesynthError, match="LAYER=CxHxW"):
        args.handler(args)


def test_a_user_folder_is_never_overwritten(nemo_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(EdgesynthError, match="--overwrite"):
        cli.compile_network(nemo_model, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    cli.compile_network(nemo_model, folder, overwrite=True)  # adds its files, keeps the rest
    assert (folder / "notes.txt").read_text() == "keep me"
    assert (folder / "network.c").is_file() and (folder / "compiled.json").is_file()


def test_inputs_outside_their_type_are_refused(nemo_model: Path) -> None:
    x = np.full((1, 3, 12, 12), -5)
    with pytest.raises(EdgesynthError, match=r"outside its type uint8 \(0\.\.255\)"):
        cli.simulate(nemo_model, [x])
