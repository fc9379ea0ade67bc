"""The vendor's networks as network graphs: `sim.graph.run` of the graph of every corpus case
reproduces the vendor's known answer value for value (the graph's operators, not the max7800x
simulator, compute it). Only cases whose known answer follows the vendor's `simulated_sequence`
instead of the hardware's order are refused, with a message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.max7800x.commands.izer import job_from_options
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.description.graph import graph_from_network
from edgesynth.targets.max7800x.pipeline import load_network

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "cases"
OK_CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)


def case_graph(case: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[g.Graph, np.ndarray]:
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    opts = parse_izer_args([*info["args"], "--test-dir", "unused", "--prefix", "unused"])
    net, sample = load_network(job_from_options(opts))
    graph = graph_from_network(
        net, avg_pool_rounding=opts.avg_pool_rounding, reshape_inputs=opts.reshape_inputs
    )
    x = sample.astype(np.int64)
    if x.ndim == 3 and len(graph.tensors[graph.inputs[0]].shape) == 2:
        x = x[..., 0]
    return graph, x


@pytest.mark.corpus
@pytest.mark.parametrize("case", OK_CASES, ids=lambda c: f"{c.parent.name}/{c.name}")
def test_graph_reproduces_known_answer(case: Path, monkeypatch) -> None:
    yaml_text = "".join(p.read_text() for p in case.glob("*/*.yaml"))
    if "simulated_sequence" in yaml_text:
        with pytest.raises(EdgesynthError, match="simulated_sequence"):
            case_graph(case, monkeypatch)
        return
    graph, x = case_graph(case, monkeypatch)
    out = run(graph, x[None], keep=False)[graph.outputs[0]][0]
    expected = np.load(case / "expected_output.npy")
    assert out.size == expected.size
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


def test_mnist_graph_structure(monkeypatch) -> None:
    """The vendor's MNIST network, operator by operator."""
    graph, _ = case_graph(CORPUS / "MAX78000" / "mnist", monkeypatch)
    ops = [n.op for n in graph.nodes]
    assert ops == [
        "conv",
        "requantize",
        "activation",
        "pool",
        "conv",
        "requantize",
        "activation",
        "pool",
        "conv",
        "requantize",
        "activation",
        "pool",
        "conv",
        "requantize",
        "activation",
        "linear",
    ]
    first = graph.nodes[0]
    assert isinstance(first, g.Conv) and first.weight.shape == (60, 1, 3, 3)
    assert first.pads == (1, 1, 1, 1)
    rq = graph.nodes[1]
    assert isinstance(rq, g.Requantize) and (rq.mul, rq.div) == (1, 2**8)  # shift -1: 2**-8
    pool = graph.nodes[3]
    assert isinstance(pool, g.Pool) and pool.kind == "max" and pool.kernel == (2, 2)
    assert graph.tensors[graph.outputs[0]].shape == (10,)
    assert graph.hints[graph.nodes[0].name.split("/")[0]]["processors"] == 1
