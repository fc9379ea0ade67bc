"""Real data: a LeNet-style CNN and a small inception-style CNN trained on MNIST, calibrated on
300 training images, run through the xDNN functional model on 1,000 other real images.

The float graphs of the two networks are built from the trained PyTorch weights directly; the
third-party test writes the LeNet as an opset-8 ONNX file (as a non-PyTorch exporter does) and
goes through the ONNX front end and `edgesynth compile -t xdnn`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdnn_graphs import Builder

import needs
from edgesynth.sim.graph import run
from edgesynth.targets.xdnn.cli import compile_graph, run_program
from edgesynth.targets.xdnn.target import run_folder
from mnist_lenet import EVAL, lenet, load_mnist, third_party_onnx, trained

torch = needs.module("torch")


@pytest.fixture(scope="module")
def mnist() -> tuple[np.ndarray, np.ndarray]:
    return load_mnist()


class Inception(torch.nn.Module):
    """Stem conv + pool, one GoogLeNet block (1x1, 3x3, 5x5, pool projection), a second conv,
    global average pool (fully-connected mode on xDNN), a classifier. Every convolution is
    followed by a BatchNorm (folded into it by the compiler)."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn

        def conv(cin: int, cout: int, k: int):  # type: ignore[no-untyped-def]
            return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2), nn.BatchNorm2d(cout))

        self.stem = conv(1, 16, 3)
        self.b1 = conv(16, 16, 1)
        self.b3r, self.b3 = conv(16, 12, 1), conv(12, 16, 3)
        self.b5r, self.b5 = conv(16, 8, 1), conv(8, 8, 5)
        self.pp = conv(16, 8, 1)
        self.top = conv(48, 32, 3)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):  # type: ignore[no-untyped-def]
        F = torch.nn.functional
        x = F.max_pool2d(F.relu(self.stem(x)), 2)
        x = torch.cat(
            [
                F.relu(self.b1(x)),
                F.relu(self.b3(F.relu(self.b3r(x)))),
                F.relu(self.b5(F.relu(self.b5r(x)))),
                F.relu(self.pp(F.max_pool2d(x, 3, 1, 1))),
            ],
            1,
        )
        x = F.max_pool2d(F.relu(self.top(x)), 2)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _trained(name: str, build, mnist):  # type: ignore[no-untyped-def]
    if name == "lenet":
        return trained(name, build, mnist)
    return trained(name, build, mnist, epochs=6, source=Inception, one_cycle=1e-2)


def _np(t) -> np.ndarray:  # type: ignore[no-untyped-def]
    return t.detach().numpy().astype(np.float64)


def _graph_lenet(m):  # type: ignore[no-untyped-def]
    b = Builder("lenet", (1, 28, 28))
    x = b.conv("x", 6, 3, pad=1, w=_np(m[0].weight), b=_np(m[0].bias))
    x = b.maxpool(x, 2, 2)
    x = b.conv(x, 16, 3, pad=1, w=_np(m[3].weight), b=_np(m[3].bias))
    x = b.maxpool(x, 2, 2)
    b.rng = _Fixed([(_np(m[7].weight), _np(m[7].bias))])
    x = b.fc(x, 64, relu=True)
    b.rng = _Fixed([(_np(m[9].weight), _np(m[9].bias))])
    return b.done(b.fc(x, 10))


class _Fixed:
    """Stands in for the builder's random generator: hands out given weights and biases."""

    def __init__(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.values = [v for p in pairs for v in p]

    def standard_normal(self, shape):  # type: ignore[no-untyped-def]
        v = self.values.pop(0)
        return (
            v * (np.sqrt(np.prod(shape[1:])) if len(shape) == 2 else 1.0)
            if v.ndim == 2
            else v / 0.1
        )


def _graph_inception(m):  # type: ignore[no-untyped-def]
    b = Builder("inception", (1, 28, 28))

    def conv(x: str, layer) -> str:  # type: ignore[no-untyped-def]
        c, bn = layer
        w = _np(c.weight)
        k = w.shape[2]
        y = b.conv(x, w.shape[0], k, pad=k // 2, relu=False, w=w, b=_np(c.bias))
        stats = (_np(bn.weight), _np(bn.bias), _np(bn.running_mean), _np(bn.running_var))
        return b.batchnorm(y, *stats, eps=bn.eps)

    x = b.maxpool(conv("x", m.stem), 2, 2)
    a = conv(x, m.b1)
    t = conv(conv(x, m.b3r), m.b3)
    f = conv(conv(x, m.b5r), m.b5)
    p = conv(b.maxpool(x, 3, 1, pad=1), m.pp)
    x = b.maxpool(conv(b.concat(a, t, f, p), m.top), 2, 2)
    g = b.gap(x)
    b.rng = _Fixed([(_np(m.fc.weight), _np(m.fc.bias))])
    return b.done(b.fc(g, 10))


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("name", ["lenet", "inception"])
def test_mnist_functional_model(name: str, mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = _trained(name, lenet if name == "lenet" else Inception, mnist)
    graph = _graph_lenet(model) if name == "lenet" else _graph_inception(model)
    x, y = mnist
    xe, ye = x[EVAL], y[EVAL]
    with torch.no_grad():
        logits = model(torch.from_numpy(xe)).numpy()
    float_graph = run(graph, xe.astype(np.float64), keep=False)[graph.outputs[0]]
    np.testing.assert_allclose(float_graph, logits, atol=1e-3)  # the graph is the model
    float_top1 = logits.argmax(1)
    acc = {"float": float((float_top1 == ye).mean())}
    for bits in (8, 16):
        out = tmp_path / f"{name}-{bits}"
        res = compile_graph(graph, x[:300], out, bits=bits)
        prog = res["program"]
        xq = prog.inputs[0].quantize(xe)
        reference = run(prog.graph, xq, keep=False)[prog.graph.outputs[0]]
        executed = run_folder(out, xq)
        np.testing.assert_array_equal(executed, reference.reshape(executed.shape))
        top1 = run_program(out, xe).argmax(1)
        agree = float((top1 == float_top1).mean())
        acc[bits] = float((top1 == ye).mean())
        acc[f"agree{bits}"] = agree
        assert agree >= 0.99, (bits, agree)
    assert acc["float"] >= 0.95
    assert abs(acc[16] - acc["float"]) <= 0.005, acc
    print(name, acc)


@pytest.mark.slow
@pytest.mark.train
def test_third_party_onnx_mnist(mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A third-party MNIST CNN in ONNX (opset 8): through the ONNX front end and
    `edgesynth compile -t xdnn`, the functional model equals the integer reference and agrees
    with ONNX Runtime's float top-1 on at least 99% of 1,000 real images."""
    ort = needs.module("onnxruntime")
    from edgesynth.flow import compile_to, load_model

    model_path = tmp_path / "lenet_opset8.onnx"
    third_party_onnx(_trained("lenet", lenet, mnist), model_path)
    x, y = mnist
    xe, ye = x[EVAL], y[EVAL]
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    logits = np.concatenate(
        [session.run(None, {"input": xe[i : i + 1]})[0] for i in range(len(xe))]
    )
    float_top1 = logits.argmax(1)
    assert (float_top1 == ye).mean() >= 0.95
    out = tmp_path / "compiled"
    program, _ = compile_to(load_model(model_path), "xdnn", calibration=x[:300], out=out)
    xq = program.inputs[0].quantize(xe)
    reference = run(program.graph, xq, keep=False)[program.graph.outputs[0]]
    executed = run_folder(out, xq)
    np.testing.assert_array_equal(executed, reference.reshape(executed.shape))
    agree = float((run_program(out, xe).argmax(1) == float_top1).mean())
    assert agree >= 0.99, agree
    print(f"third-party ONNX LeNet: 8-bit top-1 agreement with ONNX Runtime {agree:.3f}")


@pytest.mark.slow
@pytest.mark.train
def test_inception_through_torch_onnx(mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The trained inception-style CNN exported by torch.onnx with its BatchNormalization nodes
    kept: the ONNX front end and `compile -t xdnn` fold them, place the concatenated branches
    side by side; the functional model equals the integer reference and agrees with ONNX
    Runtime's float top-1 on at least 99% of 1,000 real images."""
    ort = needs.module("onnxruntime")
    from edgesynth.flow import compile_to, load_model

    model = _trained("inception", Inception, mnist)
    path = tmp_path / "inception.onnx"
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        str(path),
        dynamo=False,
        opset_version=13,
        do_constant_folding=False,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
    )
    x, _ = mnist
    xe = x[EVAL]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    float_top1 = session.run(None, {"input": xe})[0].argmax(1)
    out = tmp_path / "compiled"
    program, _ = compile_to(load_model(path), "xdnn", calibration=x[:300], out=out)
    ops = [lay.op for lay in program.layers]
    assert ops.count("XNConv") == 9 and ops.count("XNAvgPool") == 1  # 8 convolutions + the FC
    xq = program.inputs[0].quantize(xe)
    reference = run(program.graph, xq, keep=False)[program.graph.outputs[0]]
    np.testing.assert_array_equal(run_folder(out, xq), reference.reshape(len(xe), -1))
    agree = float((run_program(out, xe).argmax(1) == float_top1).mean())
    assert agree >= 0.99, agree
    print(f"inception via torch.onnx: 8-bit top-1 agreement with ONNX Runtime {agree:.3f}")


@pytest.mark.slow
@pytest.mark.train
def test_fully_connected_layers_on_the_host(mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`fc_on_host` (ml-suite's deployment runs the classifier on the CPU): the engine stops
    before the trailing Gemms; its output equals the integer reference; the host applies the
    float layers to the dequantized output; the compiled folder carries them, `edgesynth run`
    reloads them; top-1 agrees with the float model on at least 99% of 1,000 real images."""
    from edgesynth.cli import main

    model = _trained("lenet", lenet, mnist)
    graph = _graph_lenet(model)
    x, _ = mnist
    xe = x[EVAL]
    with torch.no_grad():
        float_top1 = model(torch.from_numpy(xe)).numpy().argmax(1)
    out = tmp_path / "host-fc"
    prog = compile_graph(graph, x[:300], out, fc_on_host=True)["program"]
    assert len(prog.host_layers) == 2 and prog.host_layers[0].relu
    assert prog.outputs[0].shape == (16, 7, 7)  # the last pooled feature map
    xq = prog.inputs[0].quantize(xe)
    reference = run(prog.graph, xq, keep=False)[prog.graph.outputs[0]]
    executed = run_folder(out, xq)
    np.testing.assert_array_equal(executed, reference.reshape(executed.shape))
    features = prog.outputs[0].dequantize(executed).reshape(len(xe), -1)
    hidden = np.maximum(features @ _np(model[7].weight).T + _np(model[7].bias), 0)
    expected = hidden @ _np(model[9].weight).T + _np(model[9].bias)
    np.testing.assert_allclose(run_program(out, xe), expected, rtol=1e-12, atol=1e-9)
    assert (out / "host_layers.npz").is_file()
    np.save(tmp_path / "x.npy", xe[:5])
    assert (
        main(["run", str(out), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    )
    np.testing.assert_allclose(np.load(tmp_path / "y.npy").reshape(5, -1), expected[:5], atol=1e-9)
    agree = float((run_program(out, xe).argmax(1) == float_top1).mean())
    assert agree >= 0.99, agree
