"""Post-training quantization of a float graph for MAX7800x, then the target's own simulator."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.base import CompileOptions, get_target
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.quantize import quantize


def small_cnn() -> nn.Sequential:
    torch.manual_seed(3)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    ).eval()


def float_graph(model: nn.Sequential) -> g.Graph:
    """The model as a float graph, operator by operator (no ONNX involved)."""
    graph = g.Graph("small")
    graph.add_input("x", (1, 16, 16))
    t, shape = "x", (1, 16, 16)
    for i, m in enumerate(model):
        name = f"m{i}"
        if isinstance(m, nn.Conv2d):
            node = g.Conv(
                name=name,
                inputs=[t],
                outputs=[name],
                weight=m.weight.detach().double().numpy(),
                bias=m.bias.detach().double().numpy(),
                pads=(1, 1, 1, 1),
            )
            shape = (m.out_channels, *shape[1:])
        elif isinstance(m, nn.ReLU):
            node = g.Activation(name=name, inputs=[t], outputs=[name], kind="relu")
        elif isinstance(m, nn.MaxPool2d | nn.AvgPool2d):
            node = g.Pool(
                name=name,
                inputs=[t],
                outputs=[name],
                kind="max" if isinstance(m, nn.MaxPool2d) else "avg",
                kernel=(2, 2),
                stride=(2, 2),
                method="float",
            )
            shape = (shape[0], shape[1] // 2, shape[2] // 2)
        elif isinstance(m, nn.Flatten):
            node = g.Flatten(name=name, inputs=[t], outputs=[name])
            shape = (int(np.prod(shape)),)
        else:
            node = g.Linear(
                name=name,
                inputs=[t],
                outputs=[name],
                weight=m.weight.detach().double().numpy(),
                bias=m.bias.detach().double().numpy(),
            )
            shape = (m.out_features,)
        graph.add(node, shape)
        t = name
    graph.outputs = [t]
    return graph


def test_float_graph_matches_torch() -> None:
    model = small_cnn()
    x = np.random.default_rng(0).uniform(-1, 1, (8, 1, 16, 16))
    want = model(torch.from_numpy(x).float()).detach().numpy()
    got = run(float_graph(model), x, keep=False)["m7"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_quantized_program_tracks_the_float_model() -> None:
    model = small_cnn()
    rng = np.random.default_rng(1)
    calib = rng.uniform(-1, 1, (64, 1, 16, 16))
    test = rng.uniform(-1, 1, (32, 1, 16, 16))
    graph = float_graph(model)
    target = get_target("max78000")
    program = target.compile(graph, CompileOptions(calibration=calib))
    layers = program.layers
    # the chip cannot pool and flatten in one layer: the average pool gets a layer of its own
    assert [layer.operation for layer in layers] == ["conv2d", "conv2d", "none", "linear"]
    assert layers[1].pool is not None and layers[1].pool.kind == "max"
    assert layers[2].pool is not None and layers[2].pool.kind == "avg"
    assert layers[3].flatten and layers[3].pool is None
    assert layers[3].wide  # the logits stay 32 bits wide
    fmt_in, fmt_out = program.inputs[0], program.outputs[0]
    q = fmt_in.quantize(test)
    assert q.dtype == np.int64 and q.min() >= -128 and q.max() <= 127
    hw = target.simulate(program, [q])[0]
    # the target's simulator equals the program graph's reference, value for value
    ref = run(program.graph, q, keep=False)[program.graph.outputs[0]]
    np.testing.assert_array_equal(hw, ref)
    y = fmt_out.dequantize(hw)
    want = run(graph, test, keep=False)["m7"]
    assert np.corrcoef(y.ravel(), want.ravel())[0, 1] > 0.98
    assert np.mean(y.argmax(1) == want.argmax(1)) >= 0.9


def test_quantize_refuses_bad_calibration() -> None:
    graph = float_graph(small_cnn())
    device = get_device("MAX78000")
    with pytest.raises(EdgesynthError, match="integers"):
        quantize(graph, np.zeros((4, 1, 16, 16), dtype=np.int8), device)
    with pytest.raises(EdgesynthError, match=r"shape \(4, 16, 16\)"):
        quantize(graph, np.zeros((4, 16, 16)), device)
    with pytest.raises(EdgesynthError, match="calibration data"):
        get_target("max78000").compile(graph, CompileOptions())
