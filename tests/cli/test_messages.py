"""The messages a user gets for common mistakes: each names what is wrong, in the user's terms.

`CASES` is the one table: a command line run in a user's project, the exit status it must end
with, fragments its output must hold and fragments it must not (the words of the old, unclear
message). Every run ends with at most one `error:` line and no traceback, and leaves every file
of the project exactly as it was (sha256 before and after); a refused run creates nothing.
"""

from __future__ import annotations

import itertools
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli, snapshot

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
MNIST = SHARED / "corpus" / "cases" / "MAX78000" / "mnist"
PULP = SHARED / "pulp" / "cases" / "eegnet_1d_8b_Hx1"
YAML = "networks/mnist-chw-ai85.yaml"
CKPT = "trained/ai85-mnist-qat8-q.pth.tar"
SAMPLE = "data/sample_mnist.npy"  # not where the default sample is looked for (tests/)
READ_ONLY = "ro"  # a folder the run may not create anything in (EROFS, emulated)


@dataclass
class Case:
    name: str
    argv: list[str]
    status: int
    says: list[str]  # fragments the output must hold
    never: list[str] = field(default_factory=list)  # fragments it must not
    tools: tuple[str, ...] = ()  # programs the command needs (missing: the test fails)


GCC = ("gcc",)  # device run records a project's writes with the host compiler
MAX = ["-t", "max78000", "-o", "out"]

CASES = [
    Case(
        "placement-kernel-memory",
        ["compile", "onnx/deep.onnx", "-c", "onnx/deep.npy", *MAX],
        1,
        [
            "onnx/deep.onnx: no placement exists",
            "kernel memory is short by 1,088 words per processor",
            "1,856 kernel words",
            "holds 768",
            "run out at layer 13 (conv13)",
        ],
        ["network.yaml", "busiest step"],
    ),
    Case(
        "placement-data-memory",
        ["compile", "onnx/pooled.onnx", "-c", "onnx/pooled.npy", *MAX],
        1,
        [
            "onnx/pooled.onnx: no placement exists",
            "data memory is short by 1,933 words while layer 0 (conv0) runs",
            "the network input (8,100 words)",
            "8,192 words",
        ],
        ["network.yaml", "busiest step"],
    ),
    Case(
        "placement-input-too-large",
        ["compile", "onnx/wide.onnx", "-c", "onnx/wide.npy", *MAX],
        1,
        ["onnx/wide.onnx: cannot place the network input", "short by 1,808 words", "8,192"],
        ["network.yaml"],
    ),
    Case(
        "negative-epochs",
        ["train", "--epochs", "-1"],
        2,
        ["argument --epochs", "must be at least 1, got -1"],
        ["expected one argument"],
    ),
    Case(
        "negative-batch-size",
        ["train", "-b", "-3"],
        2,
        ["argument --batch-size/-b", "must be at least 1, got -3"],
        ["expected one argument"],
    ),
    Case(
        "negative-lr",
        ["train", "--lr", "-1e-3"],
        2,
        ["argument --lr", "must be a positive number, got -1e-3"],
        ["expected one argument"],
    ),
    Case(
        "pulp-l1-zero",
        ["pulp", "compile", "pulp/network.onnx", "-o", "out", "--l1", "0"],
        1,
        ["`--l1`", "0 bytes", "give 1 to 36700"],
    ),
    Case(
        "pulp-l2-below-reserve",
        ["pulp", "compile", "pulp/network.onnx", "-o", "out", "--l2", "1000"],
        1,
        ["`--l2`", "L2 of 1000 bytes", "--l2 takes 132001 to 512000"],
        ["`--code-reserve`:"],
    ),
    Case(
        "pulp-tile-unknown-layer",
        ["pulp", "compile", "pulp/network.onnx", "-o", "out", "--tile", "99=4x8x1"],
        1,
        ["`--tile`", "no layer 99", "index (0-based", "0 (Conv_0)", "6 (MatMul_51)"],
    ),
    Case(
        "pulp-tile-by-name",
        ["pulp", "compile", "pulp/network.onnx", "-o", "out", "--tile", "Conv_0=4x8x1"],
        1,
        ["`--tile`", "`Conv_0=4x8x1`", "the layer's index (0-based"],
    ),
    Case(
        "empty-onnx",
        ["compile", "onnx/empty.onnx", *MAX],
        1,
        ["onnx/empty.onnx: the file is empty (0 bytes), not an ONNX model"],
        ["has no input"],
    ),
    Case(
        "empty-onnx-pulp",
        ["pulp", "compile", "onnx/empty.onnx", "-o", "out"],
        1,
        ["onnx/empty.onnx: the file is empty (0 bytes), not an ONNX model"],
        ["integer output"],
    ),
    Case(
        "text-as-onnx",
        ["compile", "onnx/notes.onnx", *MAX],
        1,
        ["onnx/notes.onnx: not an ONNX model: it is a text file (it begins `my notes`)"],
    ),
    Case(
        "softmax-mid-network",
        ["compile", "onnx/softmax.onnx", "-c", "onnx/softmax.npy", *MAX],
        1,
        [
            "onnx/softmax.onnx:",
            "ONNX node `mid_softmax` (Softmax)",
            "middle of the network",
            "runs softmax only on its CPU, after the last layer",
            "make it the network's last operation",
        ],
    ),
    Case(
        "synth-read-only-folder",
        ["synth", YAML, CKPT, "--sample-input", SAMPLE, "-o", f"{READ_ONLY}/project"],
        1,
        ["`-o`", f"cannot write into {READ_ONLY}", "read-only file system"],
        ["--test-dir", "--prefix"],
    ),
    Case(
        "synth-non-empty-folder",
        ["synth", YAML, CKPT, "--sample-input", SAMPLE, "-o", "onnx"],
        1,
        ["`-o`", "the output folder onnx is not empty"],
        ["--test-dir", "--prefix"],
    ),
    Case(
        "device-run-compile-folder",
        ["device", "run", "compiled"],
        0,
        [
            "note: compiled holds no cnn.c; running the project in compiled/project",
            "known answer: all 10 words match",
            "layer   0: 1 processor,",
            "5 layers run",
        ],
        ["1 processors"],
        GCC,
    ),
    Case(
        "device-run-no-project",
        ["device", "run", "networks"],
        1,
        ["networks: not a generated project", "DIR/project"],
    ),
    Case(
        "yaml-without-checkpoint",
        ["compile", YAML, *MAX],
        1,
        [f"{YAML}:4:", "`arch: ai85net5` needs trained weights", "with --checkpoint"],
        ["sample", "--checkpoint-file"],
    ),
    Case(
        "missing-default-sample",
        ["compile", YAML, "--checkpoint", CKPT, *MAX],
        1,
        [
            "tests/sample_mnist.npy: no sample input",
            "`dataset: MNIST`",
            "pass --sample-input FILE.npy",
            "edgesynth train --save-sample N",
        ],
    ),
    Case(
        "missing-sample-beside-checkpoint",
        ["synth", YAML, "run/qat_best-q.pth.tar", "-o", "out"],
        1,
        ["run/sample_mnist.npy lies beside the checkpoint: pass --sample-input run/sample_mnist"],
    ),
    Case(
        "missing-sample-given",
        ["simulate", YAML, CKPT, "--sample-input", "data/nothere.npy"],
        1,
        ["data/nothere.npy: `--sample-input`: no such file"],
    ),
    Case(
        "run-one-input",
        ["run", "compiled", "-i", SAMPLE, "--integer"],
        0,
        ["ran 1 input on max78000's bit-exact model"],
        ["1 inputs"],
    ),
]


def _onnx_net(path: Path, chans: list[int], side: int, pool_first: bool, softmax: bool) -> None:
    """A float CNN of 3x3 convolutions (optionally pooling first, or a softmax after the first
    convolution) and calibration data for it beside it (.npy)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    if pool_first:
        nodes.append(helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]))
        prev = "p"
    for i, (cin, cout) in enumerate(itertools.pairwise(chans)):
        w = (rng.standard_normal((cout, cin, 3, 3)) * 0.1).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(
            helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1] * 4)
        )
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
        if softmax and i == 0:
            nodes.append(helper.make_node("Softmax", [prev], ["s"], name="mid_softmax", axis=1))
            prev = "s"
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, chans[0], side, side])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    calibration = rng.uniform(0, 1, (2, chans[0], side, side)).astype(np.float32)
    np.save(path.with_suffix(".npy"), calibration)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project: the MNIST YAML, checkpoint and sample (not in tests/), a training run
    folder, the folder `compile -t max78000` wrote, a PULP network and some ONNX models."""
    needs.module("onnx")
    root = tmp_path_factory.mktemp("messages") / "project"
    for sub in ("networks", "trained"):
        shutil.copytree(MNIST / sub, root / sub)
    (root / "data").mkdir()
    shutil.copy(MNIST / "tests" / "sample_mnist.npy", root / SAMPLE)
    (root / "run").mkdir()
    shutil.copy(MNIST / CKPT, root / "run" / "qat_best-q.pth.tar")
    shutil.copy(MNIST / "tests" / "sample_mnist.npy", root / "run" / "sample_mnist.npy")
    (root / "pulp").mkdir()
    shutil.copy(PULP / "network.onnx", root / "pulp" / "network.onnx")
    onnx_dir = root / "onnx"
    onnx_dir.mkdir()
    _onnx_net(onnx_dir / "deep.onnx", [3] + [64] * 30, 8, False, False)
    _onnx_net(onnx_dir / "pooled.onnx", [3, 64, 8], 90, True, False)
    _onnx_net(onnx_dir / "wide.onnx", [3, 8], 100, False, False)
    _onnx_net(onnx_dir / "softmax.onnx", [3, 8, 8], 8, False, True)
    (onnx_dir / "empty.onnx").write_bytes(b"")
    (onnx_dir / "notes.onnx").write_text("my notes\n")
    (root / READ_ONLY).mkdir()
    here = Path.cwd()
    os.chdir(root)
    try:
        result = run_cli("compile", YAML, "--checkpoint", CKPT, "--sample-input", SAMPLE,
                         "-t", "max78000", "-o", "compiled")  # fmt: skip
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return root


def _read_only(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Nothing can be created inside READ_ONLY (as on a read-only file system; the tests may
    run as root, for whom a mode 0o555 folder is writable)."""
    import errno

    real_mkdir, real_open = os.mkdir, os.open
    guarded = (root / READ_ONLY).resolve()

    def inside(path: object) -> bool:
        return guarded in Path(os.path.abspath(str(path))).parents

    def mkdir(path, *args, **kwargs):
        if inside(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    def open_(path, flags, *args, **kwargs):
        if inside(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_message(
    case: Case, template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs.tools(*case.tools)
    root = tmp_path / "project"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    _read_only(monkeypatch, root)
    before = snapshot(root)
    result = run_cli(*case.argv)
    assert result.exit_code == case.status, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == (1 if case.status else 0), result.stderr
    for fragment in case.says:
        assert fragment in result.output, f"{fragment!r} not in {result.output!r}"
    for fragment in case.never:
        assert fragment not in result.output, f"{fragment!r} in {result.output!r}"
    after = snapshot(root)
    changed = sorted(k for k in before if after.get(k) != before[k])
    assert not changed, f"files changed or lost: {changed}"
    created = sorted(set(after) - set(before))
    assert not created, f"the run created {created}"
