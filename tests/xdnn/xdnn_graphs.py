"""Float graphs built by hand for the xDNN tests (the ONNX front end builds the same kinds)."""

from __future__ import annotations

import numpy as np

from edgesynth.ir import graph as g


class Builder:
    def __init__(self, name: str, shape: tuple[int, int, int], seed: int = 0) -> None:
        self.g = g.Graph(name)
        self.g.add_input("x", shape)
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def _name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def shape(self, t: str) -> tuple[int, ...]:
        return self.g.tensors[t].shape

    def conv(
        self,
        x: str,
        out: int,
        k: int,
        pad: int = 0,
        stride: int = 1,
        relu: bool = True,
        w: np.ndarray | None = None,
        b: np.ndarray | None = None,
    ) -> str:
        c, h, wd = self.shape(x)
        name = self._name("conv")
        weight = (
            w if w is not None else self.rng.standard_normal((out, c, k, k)) / np.sqrt(c * k * k)
        )
        bias = b if b is not None else self.rng.standard_normal(out) * 0.1
        oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
        self.g.add(
            g.Conv(
                name=name,
                inputs=[x],
                outputs=[name],
                weight=weight,
                bias=bias,
                stride=(stride, stride),
                pads=(pad, pad, pad, pad),
            ),
            (out, oh, ow),
        )
        return self.relu(name) if relu else name

    def batchnorm(
        self,
        x: str,
        gamma: np.ndarray,
        beta: np.ndarray,
        mean: np.ndarray,
        var: np.ndarray,
        eps: float,
        relu: bool = True,
    ) -> str:
        name = self._name("bn")
        node = g.BatchNorm(
            name=name,
            inputs=[x],
            outputs=[name],
            gamma=gamma,
            beta=beta,
            mean=mean,
            var=var,
            eps=eps,
        )
        self.g.add(node, self.shape(x))
        return self.relu(name) if relu else name

    def relu(self, x: str) -> str:
        name = self._name("relu")
        self.g.add(g.Activation(name=name, inputs=[x], outputs=[name], kind="relu"), self.shape(x))
        return name

    def maxpool(self, x: str, k: int, stride: int, pad: int = 0, ceil: bool = False) -> str:
        c, h, w = self.shape(x)
        name = self._name("pool")
        node = g.Pool(
            name=name,
            inputs=[x],
            outputs=[name],
            kind="max",
            kernel=(k, k),
            stride=(stride, stride),
            pads=(pad, pad, pad, pad),
            ceil=ceil,
        )
        from edgesynth.sim.graph import evaluate

        oh, ow = evaluate(node, np.zeros((1, c, h, w))).shape[2:]
        self.g.add(node, (c, oh, ow))
        return name

    def gap(self, x: str) -> str:
        name = self._name("gap")
        self.g.add(
            g.GlobalPool(name=name, inputs=[x], outputs=[name], kind="avg", method="float"),
            (self.shape(x)[0], 1, 1),
        )
        return name

    def concat(self, *xs: str) -> str:
        name = self._name("concat")
        c = sum(self.shape(t)[0] for t in xs)
        self.g.add(
            g.Concat(name=name, inputs=list(xs), outputs=[name]), (c, *self.shape(xs[0])[1:])
        )
        return name

    def add(self, a: str, b: str, relu: bool = True) -> str:
        name = self._name("add")
        self.g.add(g.Eltwise(name=name, inputs=[a, b], outputs=[name], kind="add"), self.shape(a))
        return self.relu(name) if relu else name

    def fc(self, x: str, out: int, relu: bool = False) -> str:
        flat = self._name("flatten")
        n = int(np.prod(self.shape(x)))
        self.g.add(g.Flatten(name=flat, inputs=[x], outputs=[flat]), (n,))
        name = self._name("fc")
        self.g.add(
            g.Linear(
                name=name,
                inputs=[flat],
                outputs=[name],
                weight=self.rng.standard_normal((out, n)) / np.sqrt(n),
                bias=self.rng.standard_normal(out) * 0.1,
            ),
            (out,),
        )
        return self.relu(name) if relu else name

    def done(self, y: str) -> g.Graph:
        self.g.outputs = [y]
        return self.g


def inception(b: Builder, x: str, c1: int, c3r: int, c3: int, c5r: int, c5: int, pp: int) -> str:
    """GoogLeNet's block: 1x1, 1x1 -> 3x3, 1x1 -> 5x5, 3x3 max pool -> 1x1, concatenated."""
    a = b.conv(x, c1, 1)
    m = b.conv(b.conv(x, c3r, 1), c3, 3, pad=1)
    f = b.conv(b.conv(x, c5r, 1), c5, 5, pad=2)
    p = b.conv(b.maxpool(x, 3, 1, pad=1), pp, 1)
    return b.concat(a, m, f, p)
