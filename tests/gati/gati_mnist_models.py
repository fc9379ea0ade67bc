"""Real MNIST and small CNNs trained on it, exported to ONNX the ways other projects do.

Training uses the first 8,000 test-set images (the only MNIST split available offline);
evaluation uses 1,000 of the remaining 2,000. Everything is seeded; training takes
seconds on one CPU thread.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np

MNIST_DIR = Path("/work/shared/data/mnist")
MEAN, STD = 0.1307, 0.3081
N_TRAIN = 8000
EVAL = slice(9000, 10000)


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (optionally gzipped) as a NumPy array."""
    if path.suffix == ".gz":
        with gzip.open(path) as f:
            raw = f.read()
    else:
        raw = path.read_bytes()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """(images float32 N x 1 x 28 x 28 normalized, labels int64)."""
    images = read_idx(MNIST_DIR / "t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    labels = read_idx(MNIST_DIR / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    return ((images - MEAN) / STD)[:, None], labels


def train(
    model,
    x: np.ndarray,
    y: np.ndarray,
    epochs: int,
    lr: float = 3e-3,
    seed: int = 0,
    batch: int = 128,
):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small convolutions: one thread is fastest on a busy 2-core box
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), batch):
            idx = order[i : i + batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    torch.set_num_threads(threads)
    return model


def lenet():  # type: ignore[no-untyped-def]
    """LeNet-style: conv-relu-pool twice, two fully-connected layers (3x3 kernels: the engine
    column holds 9 taps)."""
    import torch.nn as nn

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


def vgg():  # type: ignore[no-untyped-def]
    """Small VGG-style: 3x3 conv + batchnorm + relu blocks, max pooling, two FC layers."""
    import torch.nn as nn

    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(
        *block(1, 4),
        nn.MaxPool2d(2),
        *block(4, 10),
        *block(10, 12),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(12 * 7 * 7, 24),
        nn.ReLU(),
        nn.Linear(24, 10),
    )


def example_net():  # type: ignore[no-untyped-def]
    """The shape of PyTorch's MNIST example (narrower): conv-relu-conv-relu-maxpool-dropout,
    fc-relu-dropout-fc, log_softmax. Its forward is chosen at export time (see `variants`)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(8 * 12 * 12, 32)
            self.fc2 = nn.Linear(32, 10)
            # how the graph is written at export time; the function is the same
            self.flat = "flatten"  # flatten | view | reshape_const
            self.fc = "gemm"  # gemm | matmul
            self.pool_first = False  # max_pool2d before relu, as older examples do
            self.head = "logsoftmax"  # logsoftmax | softmax

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.relu(self.conv1(x))
            if self.pool_first:
                x = F.relu(F.max_pool2d(self.conv2(x), 2))
            else:
                x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = self.dropout1(x)
            if self.flat == "view":
                x = x.view(x.size(0), -1)
            elif self.flat == "reshape_const":
                x = x.reshape(-1, 8 * 12 * 12)
            else:
                x = torch.flatten(x, 1)
            if self.fc == "matmul":
                x = F.relu(x @ self.fc1.weight.t() + self.fc1.bias)
            else:
                x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            if self.head == "softmax":
                return F.softmax(x, dim=1)
            return F.log_softmax(x, dim=1)

    return Net()


def export(model, path: Path, opset: int, dynamic: bool, fold: bool = True) -> Path:  # type: ignore[no-untyped-def]
    """torch.onnx (TorchScript exporter). `fold=False` keeps BatchNormalization nodes."""
    import torch

    kwargs: dict[str, object] = {}
    if dynamic:
        kwargs["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        str(path),
        dynamo=False,
        opset_version=opset,
        do_constant_folding=fold,
        input_names=["input"],
        output_names=["output"],
        **kwargs,
    )
    return path


def helper_graph(model, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """The example net written with onnx.helper the way the dynamo exporter lays it out:
    opset 18, MatMul + Add instead of Gemm, a constant Reshape shape, no node names."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    inits = [
        numpy_helper.from_array(sd["conv1.weight"], "conv1_w"),
        numpy_helper.from_array(sd["conv1.bias"], "conv1_b"),
        numpy_helper.from_array(sd["conv2.weight"], "conv2_w"),
        numpy_helper.from_array(sd["conv2.bias"], "conv2_b"),
        numpy_helper.from_array(np.ascontiguousarray(sd["fc1.weight"].T), "fc1_wt"),
        numpy_helper.from_array(sd["fc1.bias"], "fc1_b"),
        numpy_helper.from_array(np.ascontiguousarray(sd["fc2.weight"].T), "fc2_wt"),
        numpy_helper.from_array(sd["fc2.bias"], "fc2_b"),
        numpy_helper.from_array(np.array([-1, 8 * 12 * 12], dtype=np.int64), "flat_shape"),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], kernel_shape=[3, 3]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", "conv2_w", "conv2_b"], ["c2"], kernel_shape=[3, 3]),
        n("Relu", ["c2"], ["r2"]),
        n("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Reshape", ["p2", "flat_shape"], ["flat"]),
        n("MatMul", ["flat", "fc1_wt"], ["m1"]),
        n("Add", ["m1", "fc1_b"], ["a1"]),
        n("Relu", ["a1"], ["r3"]),
        n("Dropout", ["r3"], ["d3"]),
        n("MatMul", ["d3", "fc2_wt"], ["m2"]),
        n("Add", ["m2", "fc2_b"], ["logits"]),
        n("LogSoftmax", ["logits"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s0", 1, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s0", 10])],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


def ort_run(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    fixed = sess.get_inputs()[0].shape[0]
    if isinstance(fixed, int) and fixed == 1 and x.shape[0] != 1:
        return np.concatenate([sess.run(None, {name: x[i : i + 1]})[0] for i in range(len(x))])
    return sess.run(None, {name: x})[0]


Builder = Callable[[], object]
