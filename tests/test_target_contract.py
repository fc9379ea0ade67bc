"""The contract every registered target keeps, over the targets the registry lists (no hand list).

For each target and each kind of graph it says it takes (`Target.graph_kinds`: a float graph,
quantized with calibration data, or an integer one), on small networks built here:

- `lower` takes those kinds and refuses the others with a clear error;
- the steps run once each, in order, and call no other step: lower, check, plan, simulate, emit,
  load, run;
- `simulate` equals `sim.graph.run` of the program's integer graph value for value (every target
  is bit-exact to that graph); an integer graph is computed exactly as it is written (no
  warning, value for value); a float graph within its quantization error (see FLOAT_ERROR);
- `emit` -> `load` -> `run` equals `simulate` value for value, with the same input and output
  formats;
- `check` (with the refusals of `lower`) reports every violation at once: a graph breaking two
  rules names both.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.ir.intrange import int_range
from edgesynth.sim.graph import run
from edgesynth.targets.base import CompileOptions, Program, get_target, read_manifest, target_names

KINDS = ("float", "integer")
STEPS = ("lower", "check", "plan", "simulate", "emit", "load", "run")
NAMES = target_names()
TAKEN = [(name, kind) for name in NAMES for kind in KINDS if kind in get_target(name).graph_kinds]
REFUSED = [(n, k) for n in NAMES for k in KINDS if k not in get_target(n).graph_kinds]
SHAPE = (3, 8, 8)
I8 = g.QType(8, scale=1 / 64)
ACC = g.QType(32)
# A float graph's dequantized outputs may differ from the float model's by this fraction of the
# float outputs' largest magnitude: 8-bit inputs, weights and activations through two
# convolutions and a linear layer. No target documents a figure; this one is the test's (the
# worst seen when it was written: 2.1%, max78000 and max78002; gati 1.8%, xdnn 1.9%).
FLOAT_ERROR = 0.05


# -- the networks ---------------------------------------------------------------------------
class Net:
    """conv 3x3 -> relu -> max pool -> conv 3x3 -> relu -> flatten -> linear, float or integer
    (requantized by powers of two, biases in steps of 128: what every integer target takes)."""

    def __init__(self, integer: bool, seed: int = 5) -> None:
        self.integer = integer
        self.rng = np.random.default_rng(seed)
        self.graph = g.Graph("integer_net" if integer else "float_net", source="hand-built")
        self.graph.add_input("x", SHAPE, I8 if integer else None)
        self.cur = "x"

    def add(self, cls: type[g.Node], shape: tuple[int, ...], qtype: g.QType, **kw: Any) -> str:
        name = kw.pop("name", None) or self.graph.unique_name(cls.op)
        inputs = kw.pop("inputs", [self.cur])
        node = cls(name=name, inputs=inputs, outputs=[name], **kw)
        self.graph.add(node, shape, qtype if self.integer else None)
        self.cur = name
        return name

    def params(self, shape: tuple[int, ...], fan_in: int) -> tuple[np.ndarray, np.ndarray]:
        if self.integer:
            weight = self.rng.integers(-128, 128, size=shape, dtype=np.int64)
            return weight, 128 * self.rng.integers(-30, 30, size=shape[0], dtype=np.int64)
        weight = self.rng.standard_normal(shape) / np.sqrt(fan_in)
        return weight, self.rng.standard_normal(shape[0]) * 0.1

    def conv(self, out: int, shift: int) -> None:
        c, h, w = self.graph.tensors[self.cur].shape
        weight, bias = self.params((out, c, 3, 3), c * 9)
        self.add(g.Conv, (out, h, w), ACC, weight=weight, bias=bias, pads=(1, 1, 1, 1))
        if self.integer:
            self.add(g.Requantize, (out, h, w), I8, mul=1, div=1 << shift)
        self.add(g.Activation, (out, h, w), I8, kind="relu")

    def done(self) -> g.Graph:
        self.graph.outputs = [self.cur]
        self.graph.validate()
        return self.graph


def network(kind: str, broken: bool = False) -> g.Graph:
    """The contract's network; `broken` puts a softmax in its middle and multiplies three
    activations (two rules no target takes), at nodes named `mid_softmax` and `product`."""
    net = Net(kind == "integer")
    net.conv(8, 10)
    if broken:
        net.add(g.Softmax, (8, 8, 8), I8, name="mid_softmax")
        net.add(g.Eltwise, (8, 8, 8), I8, name="product", kind="mul", inputs=[net.cur] * 3)
    net.add(g.Pool, (8, 4, 4), I8, kind="max", kernel=(2, 2), stride=(2, 2))
    net.conv(6, 11)
    net.add(g.Flatten, (96,), I8)
    weight, bias = net.params((5, 96), 96)
    net.add(g.Linear, (5,), ACC, weight=weight, bias=bias)
    return net.done()


def calibration() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((64, *SHAPE))


def options(kind: str) -> CompileOptions:
    """Calibration data for a float graph (an integer graph takes none)."""
    return CompileOptions(calibration=calibration() if kind == "float" else None)


def codes(program: Program, samples: int = 6) -> np.ndarray:
    """Integer inputs over the program's whole input range."""
    fmt = program.inputs[0]
    lo, hi = int_range(fmt.bits, fmt.signed)
    rng = np.random.default_rng(2)
    return rng.integers(lo, hi, size=(samples, *fmt.shape), endpoint=True)


@cache
def compiled(name: str, kind: str) -> Program:
    """Lowered, checked and planned once per target and kind (the tests only read it)."""
    return get_target(name).compile(network(kind), options(kind))


# -- the contract ---------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "kind"), REFUSED)
def test_lower_refuses_a_kind_of_graph_it_does_not_take(name: str, kind: str) -> None:
    with pytest.raises(EdgesynthError):
        get_target(name).lower(network(kind), CompileOptions(calibration=calibration()))


@pytest.mark.parametrize(("name", "kind"), TAKEN)
def test_each_step_runs_once_in_order(name: str, kind: str, tmp_path: Path) -> None:
    target = get_target(name)
    calls: list[str] = []

    def counted(step: str) -> Callable[..., Any]:
        method = getattr(target, step)

        def call(*args: Any, **kw: Any) -> Any:
            calls.append(step)
            return method(*args, **kw)

        return call

    for step in STEPS:
        setattr(target, step, counted(step))
    program = target.compile(network(kind), options(kind))
    x = codes(program, 1)
    target.simulate(program, [x])
    target.emit(program, tmp_path)
    target.run(target.load(tmp_path, read_manifest(tmp_path)), [x])
    assert calls == list(STEPS)


@pytest.mark.parametrize(("name", "kind"), TAKEN)
def test_simulate_equals_the_program_graph(name: str, kind: str) -> None:
    program = compiled(name, kind)
    x = codes(program)
    (got,) = get_target(name).simulate(program, [x])
    want = run(program.graph, x, keep=False)[program.graph.outputs[0]]
    np.testing.assert_array_equal(got, want.reshape(got.shape))


@pytest.mark.parametrize("name", [n for n, k in TAKEN if k == "integer"])
def test_an_integer_graph_is_computed_as_written(name: str) -> None:
    program = compiled(name, "integer")
    graph = network("integer")
    x = codes(program)
    (got,) = get_target(name).simulate(program, [x])
    want = run(graph, x, keep=False)[graph.outputs[0]]
    assert program.warnings == []
    np.testing.assert_array_equal(got, want.reshape(got.shape))


@pytest.mark.parametrize("name", [n for n, k in TAKEN if k == "float"])
def test_a_float_graph_is_computed_within_its_quantization_error(name: str) -> None:
    program = compiled(name, "float")
    graph = network("float")
    x = calibration()[:16]
    (got,) = get_target(name).simulate(program, [program.inputs[0].quantize(x)])
    values = program.outputs[0].dequantize(got)
    want = run(graph, x, keep=False)[graph.outputs[0]].reshape(values.shape)
    assert np.abs(values - want).max() <= FLOAT_ERROR * np.abs(want).max()


@pytest.mark.parametrize(("name", "kind"), TAKEN)
def test_emit_load_run_equals_simulate(name: str, kind: str, tmp_path: Path) -> None:
    target = get_target(name)
    program = compiled(name, kind)
    files = target.emit(program, tmp_path)
    assert "compiled.json" in files and all((tmp_path / f).is_file() for f in files)
    loaded = target.load(tmp_path, read_manifest(tmp_path))
    assert (loaded.inputs, loaded.outputs) == (program.inputs, program.outputs)
    x = codes(program)
    (got,) = target.run(loaded, [x])
    (want,) = target.simulate(program, [x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", NAMES)
def test_check_reports_every_violation_at_once(name: str) -> None:
    target = get_target(name)
    kind = target.graph_kinds[0]
    with pytest.raises(EdgesynthError) as info:
        target.compile(network(kind, broken=True), options(kind))
    text = str(info.value)
    assert "mid_softmax" in text and "product" in text, text


@pytest.mark.parametrize(("name", "kind"), TAKEN)
def test_summarize_counts_the_networks_macs_and_fits_memory_in_its_capacity(
    name: str, kind: str
) -> None:
    """`summarize` (the rows of `compile -t all`): the contract network's MACs (conv 8x8x8 of
    3x3x3 products, conv 6x4x4 of 8x3x3, linear 5 of 96), memory within the chip's capacity, a
    time only with its cycles and clock."""
    program = compiled(name, kind)
    summary = get_target(name).summarize(program)
    assert summary.macs == 8 * 8 * 8 * 27 + 6 * 4 * 4 * 72 + 5 * 96
    for used, capacity in [
        (summary.weight_bytes, summary.weight_capacity),
        (summary.activation_bytes, summary.activation_capacity),
    ]:
        if used is not None and capacity is not None:
            assert 0 < used <= capacity
    if summary.seconds is not None:
        assert summary.cycles is not None and summary.clock_hz is not None
        assert summary.seconds == pytest.approx(summary.cycles / summary.clock_hz)
