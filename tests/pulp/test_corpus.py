"""The gap8 target on every network of the PULP corpus: the reference and the generated C equal
every layer the corpus records, the checksums equal DORY's, the plan fits GAP8, single-buffered
tiling needs no more tiles than DORY chose, the L3 path is exact, the RV32 build runs under qemu.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pulpcase import Case, align, case_params

import needs
from edgesynth.targets.pulp.cli import compile_network, run_program, simulate
from edgesynth.targets.pulp.device import GAP8
from edgesynth.targets.pulp.memory import check_no_overlap
from edgesynth.targets.pulp.packing import pack

pytestmark = pytest.mark.corpus

_CACHE: dict[tuple, object] = {}


def _cached(key: tuple, make):
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pulp")


def _simulated(case: Case) -> dict:
    return _cached(
        ("sim", case.name), lambda: simulate(case.network, case.input_file, case.input_types)
    )


def _compiled(case: Case, workdir: Path, **options) -> tuple[Path, object]:
    key = ("compile", case.name, tuple(sorted(options.items())))

    def make():
        folder = workdir / f"{case.name}-{len(_CACHE)}"
        options.setdefault("code_reserve", case.code_reserve)
        program = compile_network(case.network, folder, input_types=case.input_types, **options)
        return folder, program

    return _cached(key, make)


def _ran(case: Case, folder: Path) -> dict:
    accumulators = case.dialect == "RequantShift"  # activations.npz has them
    return _cached(
        ("run", str(folder)),
        lambda: run_program(folder, case.input_file, accumulators=accumulators),
    )


def _layer_values(
    result: dict, layers: list, samples: int, prefix: str = "out"
) -> list[np.ndarray]:
    """Per layer (samples, C, H, W) from a result's flattened HWC `out_layerK` keys."""
    out = []
    for layer in layers:
        c, h, w = layer.out_shape
        keys = (
            [f"{prefix}_layer{layer.index}"]
            if samples == 1
            else [f"{prefix}_{s}_layer{layer.index}" for s in range(samples)]
        )
        out.append(np.stack([result[k].reshape(h, w, c).transpose(2, 0, 1) for k in keys]))
    return out


def _samples(case: Case) -> int:
    return max(1, sum(1 for k in case.data if k.startswith("input_")))


@pytest.mark.parametrize("name", case_params())
def test_reference_equals_every_corpus_layer(name: str) -> None:
    case = Case(name)
    result = _simulated(case)
    if case.dialect == "RequantShift":
        _check_activations(case, result)
        return
    layers = result["_layers"]
    ours = [result[f"tensor.{layer.output}"] for layer in layers]
    expected = case.expected_layers()
    layout, mapping = align(ours, expected)
    assert len(mapping) == len(expected)
    assert layout == ("chw" if name in ("SmartAgri-net", "dscnn_test") else "hwc")


def _check_activations(case: Case, result: dict) -> None:
    """Every tensor of activations.npz (named after the exporter's modules, which ONNX does not
    keep) equals one of the graph's tensors; the output equals outputs.npz."""
    tensors = {k[len("tensor.") :]: v for k, v in result.items() if k.startswith("tensor.")}
    for key, want in case.activations.items():
        assert any(
            got.size == want.size and np.array_equal(got.reshape(want.shape), want)
            for got in tensors.values()
        ), f"activation {key} {want.shape} not computed"
    out = tensors[result["_layers"][-1].output]
    want = case.expected_output
    assert np.array_equal(out.reshape(want.shape), want)


@pytest.mark.parametrize("name", case_params())
def test_generated_c_equals_corpus_and_dory_checksums(name: str, workdir: Path) -> None:
    case = Case(name)
    folder, program = _compiled(case, workdir)
    ran = _ran(case, folder)
    samples = 1 if case.dialect == "RequantShift" else _samples(case)
    layers = program.layers
    ours = _layer_values(ran, layers, samples)
    sim = _simulated(case)
    for layer, got in zip(layers, ours, strict=True):  # the C equals the reference, every layer
        want = sim[f"tensor.{layer.output}"]
        assert np.array_equal(got, want.reshape(got.shape)), f"layer {layer.index}"
    # the C's checksums are the sums of the bytes it stored
    for s in range(samples):
        for layer in layers:
            key = (
                f"checksum_layer{layer.index}"
                if samples == 1
                else f"checksum_{s}_layer{layer.index}"
            )
            value = ran[
                f"out_layer{layer.index}" if samples == 1 else f"out_{s}_layer{layer.index}"
            ]
            assert int(ran[key]) == sum(pack(value, layer.out_storage))
    if case.dialect == "RequantShift":  # every tensor of activations.npz, from the C
        from_c = {f"tensor.{L.output}": v for L, v in zip(layers, ours, strict=True)}
        from_c.update({k: v for k, v in ran.items() if k.startswith("tensor.")})
        _check_activations(case, {**from_c, "_layers": layers})
        return
    _, mapping = align(ours, case.expected_layers())
    if case.dory:
        dory = case.dory["checksums"]["activations_out_checksum"]
        n = len(case.expected_layers())
        for k in range(min(n, len(dory) // samples)):
            for s in range(samples):
                key = (
                    f"checksum_layer{layers[mapping[k]].index}"
                    if samples == 1
                    else (f"checksum_{s}_layer{layers[mapping[k]].index}")
                )
                assert int(ran[key]) == dory[k * samples + s], f"corpus layer {k} sample {s}"


@pytest.mark.parametrize("name", case_params())
def test_plan_fits_gap8(name: str, workdir: Path) -> None:
    case = Case(name)
    _, program = _compiled(case, workdir)
    plan = program.plan
    budget = GAP8.l2_bytes - (case.code_reserve or GAP8.code_reserve)
    for lp in plan.layers:
        assert lp.tiling.l1_bytes <= 36_700
        assert lp.tiling.double or lp.tiling.tiles == 1
    assert plan.memory.l2_peak <= budget
    check_no_overlap(plan.layers, plan.memory, program.graph)


def _dory_matches(dory_layers: list[dict], layers: list) -> list[tuple[dict, object]]:
    """DORY's layers paired in order with ours of the same output and MACs."""
    pairs, j = [], 0
    for d in dory_layers:
        while j < len(layers):
            L = layers[j]
            c, h, w = L.out_shape
            j += 1
            if d["cout"] == c and list(d["out_hw"]) == [h, w] and d["MACs"] == L.macs:
                pairs.append((d, L))
                break
    return pairs


@pytest.mark.parametrize("name", [n for n in case_params() if n and Case(n).dory])
def test_single_buffered_tiles_and_macs_match_dory(name: str, workdir: Path) -> None:
    """Single-buffered, no layer needs more tiles than DORY chose. DORY stores an unclipped
    addition in 8 bits; stored exactly (9 bits need a 16-bit container) the addition and the
    layers reading it may need more tiles, so those are compared with `saturate_additions`
    (DORY's storage) and every other layer in both modes."""
    from edgesynth.targets.pulp.lower import lower_graph
    from edgesynth.targets.pulp.plan import PlanOptions, make_plan
    from edgesynth.targets.pulp.target import parse_types, read_network

    case = Case(name)
    graph = read_network(case.network, parse_types(case.input_types))
    dory = case.dory["tiling"]["layers"]
    for saturate in (False, True):
        layers, g, _ = lower_graph(graph, saturate_additions=saturate)
        options = PlanOptions(code_reserve=case.code_reserve, double_buffer=False)
        single = make_plan(layers, g, options)
        pairs = _dory_matches(dory, layers)
        assert len(pairs) == len(dory), "every DORY layer has its counterpart"
        tiles = {lp.layer.index: lp.tiling.tiles for lp in single.layers}
        for d, L in pairs:
            wider = L.out_storage.bits > 8 and L.kind == "eltwise"
            wider = wider or any(st.bits > 8 for st in L.in_storage)
            if wider and not saturate:
                continue  # an exact sum is wider than what DORY stores
            assert tiles[L.index] <= d["tiles"], f"layer {L.index}: {tiles[L.index]} > {d['tiles']}"
        assert sum(L.macs for L in layers) == sum(d["MACs"] for d in dory)
    # double buffering costs L1: never fewer tiles than single buffering
    _, program = _compiled(case, workdir)
    exact_single = make_plan(
        *lower_graph(graph)[:2], PlanOptions(code_reserve=case.code_reserve, double_buffer=False)
    )
    for lp, sp in zip(program.plan.layers, exact_single.layers, strict=True):
        assert lp.tiling.tiles >= sp.tiling.tiles


@pytest.mark.parametrize(
    ("name", "l2"), [("Dronet", 150_000), ("dronet_2.0", 120_000), ("SmartAgri-net", 100_000)]
)
def test_small_l2_goes_through_l3_and_stays_exact(name: str, l2: int, workdir: Path) -> None:
    case = Case(name)
    needs.in_corpus(case.folder)
    folder, program = _compiled(case, workdir, l2=l2, code_reserve=0)
    stages = {lp.memory.stage for lp in program.plan.layers}
    assert stages - {0}, "some layer keeps its weights or its output in L3"
    assert program.plan.memory.l2_peak <= l2
    ran = _ran(case, folder)
    ours = _layer_values(ran, program.layers, 1)
    align(ours, case.expected_layers())


@pytest.mark.parametrize("name", ["eegnet_1d_8b_Hx1", "deeploy-KeywordSpotting"])
def test_rv32_build_under_qemu_gives_the_same_bytes(name: str, workdir: Path) -> None:
    needs.tools("riscv64-unknown-elf-gcc", "qemu-riscv32")
    case = Case(name)
    folder, _ = _compiled(case, workdir)
    rv32 = run_program(
        folder, case.input_file, toolchain="rv32", accumulators=case.dialect == "RequantShift"
    )
    host = _ran(case, folder)
    assert rv32.keys() == host.keys()
    for key in host:
        assert np.array_equal(np.asarray(rv32[key]), np.asarray(host[key])), key
