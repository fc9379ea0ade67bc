"""Small float MNIST CNNs the MAX7800x accelerator cannot finish (tests/max7800x/test_cpu_*):
trained briefly on the first 8,000 t10k images (cached, tests/mnist_lenet.py) and exported by
torch.onnx with a Softmax at the end."""

from __future__ import annotations

import sys
from pathlib import Path

import needs
from mnist_lenet import trained

torch = needs.module("torch")


def _features() -> list:
    """Three 3x3 convolutions with ReLU and 2x2 max pooling, 28x28 -> 16 x 3 x 3, flattened."""
    nn = torch.nn
    layers: list = []
    for cin, cout in ((1, 8), (8, 16), (16, 16)):
        layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    return [*layers, nn.Flatten()]


def wide_head():  # type: ignore[no-untyped-def]
    """A CNN ending in a Linear with 2,048 outputs (beyond the accelerator's 1,024), then a
    Linear to the 10 classes."""
    nn = torch.nn
    return nn.Sequential(
        *_features(),
        nn.Linear(16 * 3 * 3, 2048),
        nn.ReLU(),
        nn.Linear(2048, 10),
    )


def leaky_head():  # type: ignore[no-untyped-def]
    """A CNN whose classifier has a LeakyReLU between its two Linear layers (the accelerator
    has none)."""
    nn = torch.nn
    return nn.Sequential(
        *_features(),
        nn.Linear(16 * 3 * 3, 128),
        nn.LeakyReLU(0.1),
        nn.Linear(128, 10),
    )


def sigmoid_mid():  # type: ignore[no-untyped-def]
    """A CNN with a Sigmoid after its second convolution (the accelerator has none): the
    Cortex-M4 runs it, and the accelerator takes the network back for the rest."""
    return _mid(torch.nn.Sigmoid())


def upsample_mid():  # type: ignore[no-untyped-def]
    """A CNN that halves the image twice, doubles it again with a 2x2 stride-2 transposed
    convolution (which the accelerator cannot run in this configuration), then classifies."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.ConvTranspose2d(32, 16, 2, stride=2),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(4),
        nn.Flatten(),
        nn.Linear(16 * 3 * 3, 10),
    )


def leaky_mid():  # type: ignore[no-untyped-def]
    """A CNN with a LeakyReLU after its second convolution (the accelerator has none): the
    Cortex-M4 runs it, and the accelerator takes the network back for the rest."""
    return _mid(torch.nn.LeakyReLU(0.1))


def _mid(activation):  # type: ignore[no-untyped-def]
    """Conv 1->8, ReLU, pool; conv 8->16, `activation`, pool; conv 16->16, ReLU, pool; linear."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        activation,
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 3 * 3, 10),
    )


def hardswish_mid():  # type: ignore[no-untyped-def]
    """A CNN with a Hardswish after its second convolution (torch.onnx at opset 13 writes
    x x HardSigmoid(x)): the Cortex-M4 runs it as one table, the accelerator the rest."""
    return _mid(torch.nn.Hardswish())


def silu_mid():  # type: ignore[no-untyped-def]
    """A CNN with a SiLU after its second convolution (torch.onnx writes x x Sigmoid(x)): the
    Cortex-M4 runs it as one table, the accelerator the rest."""
    return _mid(torch.nn.SiLU())


def mish_mid():  # type: ignore[no-untyped-def]
    """A CNN with a Mish after its second convolution (torch.onnx writes x x
    Tanh(Softplus(x))): the Cortex-M4 runs it as one table, the accelerator the rest."""
    return _mid(torch.nn.Mish())


def placement_head():  # type: ignore[no-untyped-def]
    """A CNN ending in a Linear with 1,024 outputs (within the accelerator's limits, but the
    network has no placement), then a Linear to the 10 classes."""
    nn = torch.nn
    return nn.Sequential(
        *_features(),
        nn.Linear(16 * 3 * 3, 1024),
        nn.ReLU(),
        nn.Linear(1024, 10),
    )


def export(model, path: Path) -> None:  # type: ignore[no-untyped-def]
    """`model` followed by a Softmax, as torch.onnx writes it (opset 13)."""
    torch.onnx.export(
        torch.nn.Sequential(model, torch.nn.Softmax(dim=1)).eval(),
        (torch.zeros(1, 1, 28, 28),),
        str(path),
        dynamo=False,
        opset_version=13,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
    )


MODELS = {
    "wide_head": wide_head,
    "leaky_head": leaky_head,
    "sigmoid_mid": sigmoid_mid,
    "upsample_mid": upsample_mid,
    "leaky_mid": leaky_mid,
    "placement_head": placement_head,
    "hardswish_mid": hardswish_mid,
    "silu_mid": silu_mid,
    "mish_mid": mish_mid,
}
EPOCHS = {"sigmoid_mid": 3}  # the sigmoid trains slower; the others train one epoch


def model_onnx(name: str, mnist, path: Path) -> None:  # type: ignore[no-untyped-def]
    """The model `name` of `MODELS`, trained briefly (cached), written to `path`."""
    module = sys.modules[__name__]  # the cache key: this file's source (the shared builders too)
    model = trained(name, MODELS[name], mnist, epochs=EPOCHS.get(name, 1), source=module)
    export(model, path)
