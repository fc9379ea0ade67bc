"""`edgesynth xdnn compile` on the largest network of ../shared/xdnn, wall time of the whole
command (a fresh process each run), with and without the proof (the functional model's run of
the emitted program against the simulator).

The corpus holds ml-suite's program for GoogLeNet v1 (`googlenet_v1_28.json`), not the model:
this script rebuilds the network from that program's layer list (every convolution, pooling
and concatenation with the shapes, kernels, strides and paddings the program gives), with
seeded random weights, as a float ONNX file, and calibrates on seeded random images.

    python benchmarks/xdnn_compile_speed.py [--repeat 3]

Prints the network, the best and the median of each, the date, the cores and the load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np
import onnx
from compile_speed import wall  # the same timing of a whole command in a fresh process
from onnx import TensorProto, helper, numpy_helper

PROGRAM = (
    Path(__file__).resolve().parents[2] / "shared" / "xdnn" / "ml-suite" / "googlenet_v1_28.json"
)


def _conv(layer: dict, rng: np.random.Generator, nodes: list, inits: list) -> None:
    kv = layer["xdnn_kv"]
    name, (src,) = layer["name"], layer["bottoms"]
    k, cin, cout = int(kv["kernel_h"]), int(kv["inchan"]), int(kv["outchan"])
    w = rng.normal(0, (2.0 / (cin * k * k)) ** 0.5, (cout, cin, k, k)).astype(np.float32)
    b = rng.normal(0, 0.05, cout).astype(np.float32)
    inits += [numpy_helper.from_array(w, name + "/w"), numpy_helper.from_array(b, name + "/b")]
    pad, stride = int(kv["padding_h"]), int(kv["strides_h"])
    out = name + "/conv" if kv["relu"] == "1" else name
    nodes.append(
        helper.make_node(
            "Conv",
            [src, name + "/w", name + "/b"],
            [out],
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
        )
    )
    if kv["relu"] == "1":
        nodes.append(helper.make_node("Relu", [out], [name]))


def _pool(layer: dict, nodes: list) -> None:
    kv = layer["xdnn_kv"]
    k, stride, pad = int(kv["kernel_h"]), int(kv["strides_h"]), int(kv["paddings_h"])
    op = "MaxPool" if kv["XNOp"] == "XNMaxPool" else "AveragePool"
    # Caffe's pooling rounds the output size up: ceil_mode reproduces the program's shapes
    # (the average pooling's 7x7 window over 7x7 needs no rounding)
    nodes.append(
        helper.make_node(
            op,
            layer["bottoms"],
            [layer["name"]],
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
            ceil_mode=int(op == "MaxPool"),
        )
    )


def googlenet_onnx(program: Path, out: Path) -> tuple[int, ...]:
    """Write the program's network as a float ONNX model; return its input shape."""
    layers = json.loads(program.read_text())["network"]
    rng = np.random.default_rng(0)
    nodes: list = []
    inits: list = []
    for layer in layers:
        if layer["type"] == "Convolution":
            _conv(layer, rng, nodes, inits)
        elif layer["type"] == "Pooling":
            _pool(layer, nodes)
        elif layer["type"] == "Concat":
            nodes.append(helper.make_node("Concat", layer["bottoms"], [layer["name"]], axis=1))
    first = next(x for x in layers if x["type"] == "Input")
    last = next(x for x in layers if x["type"] == "Output")
    shape = tuple(first["outputshapes"])
    graph = helper.make_graph(
        nodes,
        "googlenet_v1",
        [helper.make_tensor_value_info(first["name"], TensorProto.FLOAT, list(shape))],
        [
            helper.make_tensor_value_info(
                last["bottoms"][0], TensorProto.FLOAT, last["outputshapes"]
            )
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.checker.check_model(model)
    onnx.save(model, out)
    return shape


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calibration-images", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "googlenet_v1.onnx"
        shape = googlenet_onnx(PROGRAM, model)
        cal = Path(tmp) / "cal.npy"
        rng = np.random.default_rng(1)
        images = rng.uniform(-1, 1, (args.calibration_images, *shape[1:]))
        np.save(cal, images.astype(np.float32))
        print(
            f"{datetime.date.today()}, {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.2f}; GoogLeNet v1 from {PROGRAM.name} "
            f"(input {'x'.join(map(str, shape[1:]))}, {model.stat().st_size:,} bytes of ONNX, "
            f"{args.calibration_images} calibration images)"
        )
        base = ["xdnn", "compile", str(model), "--calibration", str(cal)]
        for label, extra in (("xdnn compile --no-verify", ["--no-verify"]), ("xdnn compile", [])):
            times = [wall([*base, *extra]) for _ in range(args.repeat)]
            print(f"{label:26} best {min(times):.2f} s  median {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
