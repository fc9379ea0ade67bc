"""Real MNIST for the end-to-end tests: the t10k files of ../shared/data/mnist, a LeNet-style
CNN trained on the first 8,000 images (cached by source and torch version), and the same network
written as a third-party exporter writes ONNX (Conv/Relu/MaxPool/Reshape/Gemm with transB)."""

from __future__ import annotations

import gzip
import hashlib
import inspect
import os
import tempfile
from pathlib import Path

import numpy as np

import needs

torch = needs.module("torch")
MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"
CACHE = Path(tempfile.gettempdir()) / "edgesynth-test-cache"
EVAL = slice(9000, 10000)  # used neither for training nor for calibration


def idx_file(path: Path) -> np.ndarray:
    if path.suffix == ".gz":
        with gzip.open(path) as f:
            raw = f.read()
    else:
        raw = path.read_bytes()
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(raw[3])]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * raw[3]).reshape(dims)


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    x = idx_file(MNIST / "t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = idx_file(MNIST / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    return ((x - 0.1307) / 0.3081)[:, None], y


def lenet():  # type: ignore[no-untyped-def]
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 7 * 7, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def trained(  # type: ignore[no-untyped-def]
    name: str, build, mnist, epochs: int = 3, source=None, one_cycle: float | None = None
):
    """The model `build()` returns, trained (or loaded from the cache); `source`: the class
    whose source code keys the cache (default: `build`). Adam at 3e-3, or with `one_cycle` a
    one-cycle schedule peaking at that rate."""
    key = hashlib.sha256(
        (
            inspect.getsource(source or build)
            + name
            + str(epochs)
            + str(one_cycle)
            + torch.__version__
        ).encode()
    ).hexdigest()[:16]
    path = CACHE / f"xdnn-{name}-{key}.pt"
    model = build()
    if path.is_file():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()
    x, y = mnist
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    opt = torch.optim.Adam(model.parameters(), lr=one_cycle or 3e-3)
    xt, yt = torch.from_numpy(x[:8000]), torch.from_numpy(y[:8000])
    steps = (len(xt) + 63) // 64
    schedule = (
        torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=one_cycle, total_steps=epochs * steps)
        if one_cycle
        else None
    )
    gen = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), 64):
            idx = order[i : i + 64]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
            if schedule is not None:
                schedule.step()
    torch.set_num_threads(threads)
    CACHE.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=CACHE, suffix=".pt")
    os.close(fd)
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    return model.eval()


def as_float(t) -> np.ndarray:  # type: ignore[no-untyped-def]
    return t.detach().numpy().astype(np.float64)


def third_party_onnx(m, path: Path, opset: int = 8) -> None:  # type: ignore[no-untyped-def]
    """The trained LeNet written the way a non-PyTorch exporter writes it: opset `opset`, NCHW,
    MaxPool, Reshape with a shape initializer, Gemm with transB (the weights as stored)."""
    onnx = needs.module("onnx")
    from onnx import TensorProto, helper, numpy_helper

    def init(name: str, value: np.ndarray):  # type: ignore[no-untyped-def]
        return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)

    params = [
        init("conv1.w", as_float(m[0].weight)), init("conv1.b", as_float(m[0].bias)),
        init("conv2.w", as_float(m[3].weight)), init("conv2.b", as_float(m[3].bias)),
        init("fc1.w", as_float(m[7].weight)), init("fc1.b", as_float(m[7].bias)),
        init("fc2.w", as_float(m[9].weight)), init("fc2.b", as_float(m[9].bias)),
        numpy_helper.from_array(np.array([-1, 16 * 7 * 7], dtype=np.int64), "flat.shape"),
    ]  # fmt: skip
    node = helper.make_node
    nodes = [
        node("Conv", ["input", "conv1.w", "conv1.b"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
        node("Relu", ["c1"], ["r1"]),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4),
        node("Relu", ["c2"], ["r2"]),
        node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Reshape", ["p2", "flat.shape"], ["flat"]),
        node("Gemm", ["flat", "fc1.w", "fc1.b"], ["g1"], transB=1),
        node("Relu", ["g1"], ["r3"]),
        node("Gemm", ["r3", "fc2.w", "fc2.b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        f"lenet_opset{opset}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        params,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 4
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def trained_onnx(cls, name: str, epochs: int = 1) -> Path:  # type: ignore[no-untyped-def]
    """`cls` (an nn.Module class of no arguments) trained on MNIST and exported as ONNX
    (opset 13, the TorchScript exporter), cached by its source and the torch version."""
    key = hashlib.sha256((inspect.getsource(cls) + torch.__version__).encode()).hexdigest()[:16]
    path = CACHE / f"max7800x-{name}-{key}.onnx"
    if path.is_file():
        return path
    model = trained(name, cls, load_mnist(), epochs=epochs)
    CACHE.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=CACHE, suffix=".onnx")
    os.close(fd)
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        tmp,
        dynamo=False,
        opset_version=13,
        input_names=["input"],
        output_names=["logits"],
    )
    os.replace(tmp, path)
    return path
