"""ONNX Runtime top-1 against the training model's on the user's 2,000 test images:
`python ort_top1.py RUN_FOLDER FLOAT.onnx 8BIT.onnx MNIST_FOLDER` (in this folder)."""

import sys

import numpy as np
import onnxruntime as ort
import torch

import edgesynth.nn as enn
from edgesynth.train.deploy import load_model
from edgesynth.train.export import float_model
from edgesynth.train.userdata import load_user_dataset
from edgesynth.train.usermodel import user_model

run, onnx_float, onnx_8bit, mnist = sys.argv[1:5]
ds = load_user_dataset("my_data.py:make_datasets", mnist)
user = user_model("my_models.py:MyNet", '{"width": 16}')
x = ds.test.x
labels = ds.test.y.numpy()
for ck, path, eight in (("qat_best", onnx_float, False), ("qat_best-q", onnx_8bit, True)):
    net = load_model(f"{run}/{ck}.pth.tar", "MyNet", ds, "MAX78000", user=user)
    inp = torch.round(x.double() * 128) if eight else x
    with torch.no_grad():
        if eight:
            with enn.use("MAX78000", simulate=True):
                want = net(inp).reshape(len(x), -1).numpy()
        else:
            want = float_model(net, ck)(inp).reshape(len(x), -1).numpy()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": inp.float().numpy()})[0].reshape(len(x), -1)
    same = (got.argmax(1) == want.argmax(1)).mean() * 100
    ort_top1 = (got.argmax(1) == labels).mean() * 100
    agree = (
        f"identical: {np.array_equal(got, want)}" if eight else f"{np.abs(got - want).max():.2g}"
    )
    print(
        f"{path}: {len(x)} images, ONNX Runtime top1 {ort_top1:.2f}%, "
        f"PyTorch top1 {(want.argmax(1) == labels).mean() * 100:.2f}%, same class {same:.2f}%, "
        f"outputs {agree}"
    )
