"""Small integer ONNX networks in the three dialects, written with onnx.helper, for tests beyond
the corpus: every layer kind, signed and sub-byte activations, non power-of-two divisors, padding
nodes, residual additions, several inputs. Values stay small enough that ONNX Runtime's float32
arithmetic is exact, so ONNX Runtime is an independent reference for NEMO and Quantlab graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


class Net:
    def __init__(self, name: str, opset: int = 11, twin: bool = False) -> None:
        self.twin = twin  # write dialect-specific nodes as plain ONNX arithmetic
        self.name = name
        self.opset = opset
        self.nodes: list = []
        self.inits: list = []
        self.inputs: list = []
        self.outputs: list[str] = []
        self.count = 0
        self.domains: dict[str, int] = {}

    def fresh(self, base: str = "t") -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, value, dtype=np.float32) -> str:
        name = self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(
        self, op: str, inputs: list[str], domain: str = "", out: str | None = None, **attrs
    ) -> str:
        out = out or self.fresh(op.lower())
        self.nodes.append(
            helper.make_node(op, inputs, [out], name=f"{op}_{self.count}", domain=domain, **attrs)
        )
        return out

    def input(self, shape: tuple[int, ...], name: str = "input") -> str:
        self.inputs.append(helper.make_tensor_value_info(name, FLOAT, ["N", *shape[1:]]))
        return name

    def save(self, path: Path) -> Path:
        graph = helper.make_graph(
            self.nodes,
            self.name,
            self.inputs,
            [helper.make_tensor_value_info(o, FLOAT, None) for o in self.outputs],
            self.inits,
        )
        opsets = [helper.make_opsetid("", self.opset)]
        opsets += [helper.make_opsetid(d, v) for d, v in self.domains.items()]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="edgesynth-tests")
        model.ir_version = 7
        onnx.save(model, str(path))
        return path

    # -- dialect building blocks ---------------------------------------------------------------
    def conv(self, x: str, weight: np.ndarray, stride=1, pad=0, dilation=1, group=1) -> str:
        rank = weight.ndim - 2
        w = self.const(weight)
        return self.node(
            "Conv",
            [x, w],
            kernel_shape=list(weight.shape[2:]),
            strides=[stride] * rank,
            pads=[pad] * (2 * rank),
            dilations=[dilation] * rank,
            group=group,
        )

    def nemo_requant(
        self,
        x: str,
        kappa: np.ndarray,
        lamda: np.ndarray,
        m: int,
        d: int,
        lo: float = 0.0,
        hi: float = 255.0,
    ) -> str:
        """NEMO's batch-norm + activation: Mul(kappa) Add(lambda) Cast Mul(m) Div(D) Cast Clip."""
        shape = (1, -1, 1, 1)
        k = self.const(kappa.reshape(shape))
        lam = self.const(lamda.reshape(shape))
        y = self.node("Mul", [k, x])
        y = self.node("Add", [y, lam])
        y = self.node("Cast", [y], to=INT64)
        y = self.node("Mul", [y, self.const([m], np.int64)])
        y = self.node("Div", [y, self.const([d], np.int64)])
        y = self.node("Cast", [y], to=FLOAT)
        return self.clip(y, lo, hi)

    def clip(self, x: str, lo: float, hi: float) -> str:
        return self.node("Clip", [x, self.const(lo), self.const(hi)])

    def quantlab_requant(
        self,
        x: str,
        mul: np.ndarray,
        add: np.ndarray,
        shift: int,
        lo: float,
        hi: float,
        out: str | None = None,
    ) -> str:
        """Mul Add Div(2**shift) Floor Clip, per channel of 1-D data (N, C, L)."""
        y = self.node("Mul", [x, self.const(np.asarray(mul, np.float32).reshape(-1, 1))])
        y = self.node("Add", [y, self.const(np.asarray(add, np.float32).reshape(-1, 1))])
        y = self.node("Div", [y, self.const(float(2**shift))])
        y = self.node("Floor", [y])
        return self.node("Clip", [y, self.const(lo), self.const(hi)], out=out)

    def quantlab_add(self, a: str, b: str, attrs: dict[str, int], out: str) -> str:
        """Quantlab's Add with in/out requantization attributes (the twin spells them out)."""
        if not self.twin:
            self.node("Add", [a, b], out=out, **attrs)
            return out
        terms = []
        for k, x in ((1, a), (2, b)):
            top = attrs[f"in{k}_n_levels"] - 1
            y = self.node("Mul", [x, self.const(float(attrs[f"in{k}_mul"]))])
            y = self.node("Add", [y, self.const(float(attrs[f"in{k}_add"]))])
            y = self.node(
                "Floor", [self.node("Div", [y, self.const(float(2 ** attrs[f"in{k}_shift"]))])]
            )
            terms.append(self.clip(y, 0.0, float(top)))
        y = self.node("Add", terms)
        y = self.node("Mul", [y, self.const(float(attrs["out_mul"]))])
        y = self.node("Add", [y, self.const(float(attrs["out_add"]))])
        y = self.node("Floor", [self.node("Div", [y, self.const(float(2 ** attrs["out_shift"]))])])
        self.node(
            "Clip", [y, self.const(0.0), self.const(float(attrs["out_n_levels"] - 1))], out=out
        )
        return out

    def requant_shift(
        self,
        x: str,
        mul: np.ndarray,
        add: np.ndarray,
        div: int,
        signed: bool,
        out: str,
        levels: int = 256,
    ) -> str:
        """Deeploy's RequantShift (the twin: Mul, Add(add + div/2), Div, Floor, Clip)."""
        m, a = self.const(mul), self.const(add)
        lo, hi = (-(levels // 2), levels // 2 - 1) if signed else (0, levels - 1)
        if not self.twin:
            self.node(
                "RequantShift",
                [x, m, a],
                domain="PACTOps",
                out=out,
                div=float(div),
                n_levels_out=[float(levels)],
                signed=[float(signed)],
            )
            return out
        y = self.node("Add", [self.node("Mul", [x, m]), a])
        y = self.node("Add", [y, self.const(float(div // 2))])
        y = self.node("Floor", [self.node("Div", [y, self.const(float(div))])])
        self.node("Clip", [y, self.const(float(lo)), self.const(float(hi))], out=out)
        return out


def random_weights(rng: np.random.Generator, shape: tuple[int, ...], bits: int = 4) -> np.ndarray:
    top = 1 << (bits - 1)
    return rng.integers(-top, top, size=shape).astype(np.float32)


def nemo_network(folder: Path, rng: np.random.Generator, *, signed: bool = False) -> Path:
    """Pad + conv (non power-of-two divisor), max pool, depthwise dilated conv, pointwise conv,
    a residual NEMO addition with a rescaling ReLU after it, average pooling (window sum then
    Mul/Div/Floor), flatten, linear. `signed`: activations clipped to -128..127."""
    n = Net("nemo_test", opset=11)
    lo, hi = (-128.0, 127.0) if signed else (0.0, 255.0)
    x = n.input((1, 3, 12, 12))
    p = n.node("Pad", [x, n.const([0, 0, 1, 1, 0, 0, 1, 1], np.int64)], mode="constant")
    a = n.conv(p, random_weights(rng, (8, 3, 3, 3)))
    a = n.nemo_requant(
        a,
        rng.integers(1, 40, 8).astype(np.float32),
        rng.integers(-2000, 2000, 8).astype(np.float32),
        3,
        255,
        lo,
        hi,
    )
    n.outputs.append(a)
    b = n.node("MaxPool", [a], kernel_shape=[2, 2], strides=[2, 2])
    n.outputs.append(b)
    c = n.conv(b, random_weights(rng, (8, 1, 3, 3)), pad=2, dilation=2, group=8)
    c = n.nemo_requant(
        c,
        rng.integers(1, 30, 8).astype(np.float32),
        rng.integers(-500, 500, 8).astype(np.float32),
        5,
        97,
        lo,
        hi,
    )
    n.outputs.append(c)
    d = n.conv(c, random_weights(rng, (8, 8, 1, 1)))
    d = n.nemo_requant(
        d,
        rng.integers(1, 30, 8).astype(np.float32),
        rng.integers(-500, 500, 8).astype(np.float32),
        7,
        128,
        lo,
        hi,
    )
    n.outputs.append(d)
    s = n.node("Add", [n.node("Mul", [b, n.const(16.0)]), n.node("Mul", [d, n.const(32.0)])])
    s = n.node("Floor", [n.node("Div", [s, n.const(32.0)])])
    s = n.node("Cast", [s], to=INT64)
    s = n.node("Div", [n.node("Mul", [s, n.const([27], np.int64)]), n.const([32], np.int64)])
    s = n.clip(n.node("Cast", [s], to=FLOAT), lo, hi)
    n.outputs.append(s)
    e = n.node("AveragePool", [s], kernel_shape=[2, 2], strides=[2, 2])
    e = n.node(
        "Floor",
        [
            n.node(
                "Div",
                [n.node("Mul", [n.node("Mul", [e, n.const(4.0)]), n.const(3.0)]), n.const(8.0)],
            )
        ],
    )
    n.outputs.append(e)
    f = n.node("Flatten", [e], axis=1)
    w = n.const(random_weights(rng, (8 * 3 * 3, 5)))
    g = n.node("MatMul", [f, w])
    n.outputs.append(g)
    return n.save(folder / "nemo_test.onnx")


def quantlab_network(folder: Path, rng: np.random.Generator, twin: bool = False) -> Path:
    """4-bit signed input, 1-D convolutions (a causal Pad), 4-bit activations, a Quantlab addition
    with its in/out requantization attributes, a linear layer."""
    n = Net("quantlab_test", opset=10 if not twin else 11, twin=twin)
    x = n.input((1, 4, 32))
    a = n.conv(x, random_weights(rng, (8, 4, 3), bits=3), pad=1)
    a = n.quantlab_requant(
        a, rng.integers(1, 300, 8), rng.integers(-1000, 1000, 8), 8, 0.0, 15.0, out="act_a"
    )
    n.outputs.append(a)
    if twin:
        p = n.node("Pad", [a, n.const([0, 0, 4, 0, 0, 0], np.int64)], mode="constant")
    else:
        p = n.node("Pad", [a], mode="constant", pads=[0, 0, 4, 0, 0, 0], value=0.0)
    b = n.conv(p, random_weights(rng, (8, 8, 3), bits=3), dilation=2)
    b = n.quantlab_requant(
        b, rng.integers(1, 200, 8), rng.integers(-800, 800, 8), 8, 0.0, 15.0, out="act_b"
    )
    n.outputs.append(b)
    attrs = dict(
        in1_mul=37,
        in1_add=16,
        in1_shift=5,
        in1_rq=1,
        in1_n_levels=16,
        in2_mul=45,
        in2_add=16,
        in2_shift=5,
        in2_rq=1,
        in2_n_levels=16,
        out_mul=3,
        out_add=2,
        out_shift=2,
        out_rq=1,
        out_n_levels=16,
    )
    s = n.quantlab_add(b, a, attrs, "qadd")
    n.outputs.append(s)
    f = n.node("Flatten", [s], axis=1)
    g = n.node("MatMul", [f, n.const(random_weights(rng, (8 * 32, 3)))], out="logits")
    n.outputs.append(g)
    return n.save(folder / f"quantlab_test{'_twin' if twin else ''}.onnx")


def requantshift_network(folder: Path, rng: np.random.Generator, twin: bool = False) -> Path:
    """Deeploy's RequantShift: two graph inputs (signed 8-bit), a strided conv on each, their sum
    requantized by a lone RequantShift, a Gemm with bias and a signed output."""
    n = Net("requantshift_test", opset=11, twin=twin)
    n.domains["PACTOps"] = 1
    x1 = n.input((1, 2, 10, 10), "x1")
    x2 = n.input((1, 2, 10, 10), "x2")
    mul = [rng.integers(1, 60, (6, 1, 1)).astype(np.float32) for _ in range(2)]
    add = [rng.integers(-3000, 3000, (6, 1, 1)).astype(np.float32) for _ in range(2)]
    w = [random_weights(rng, (6, 2, 3, 3), bits=6) for _ in range(2)]
    a = n.requant_shift(n.conv(x1, w[0], stride=2, pad=1), mul[0], add[0], 1024, True, "rq_a")
    b = n.requant_shift(n.conv(x2, w[1], stride=2, pad=1), mul[1], add[1], 1024, True, "rq_b")
    n.outputs += [a, b]
    s = n.requant_shift(n.node("Add", [a, b]), np.float32(3), np.float32(0), 4, True, "rq_sum")
    n.outputs.append(s)
    f = n.node("Flatten", [s], axis=1)
    g = n.node(
        "Gemm",
        [
            f,
            n.const(random_weights(rng, (4, 6 * 5 * 5), bits=6)),
            n.const(rng.integers(-50, 50, 4).astype(np.float32)),
        ],
        transB=1,
    )
    g = n.requant_shift(
        g, np.full((4,), 7, np.float32), np.zeros(4, np.float32), 256, True, "rq_out"
    )
    n.outputs.append(g)
    return n.save(folder / f"requantshift_test{'_twin' if twin else ''}.onnx")
