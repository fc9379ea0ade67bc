"""Every `edgesynth` command, run the ways a user gets it wrong.

`COMMANDS` is the one table: a row per command (adding a command adds a row). Each row is run
with missing, unknown, bad and swapped arguments, and with its output pointed at the working
directory, at a folder holding an input, at the home folder, at a non-empty folder and (for
file outputs) at an input file. Every run must end with the expected exit status, at most one
message and no traceback, and must leave the sentinel files, every input and the folders it
did not create exactly as they were, with no staging files anywhere.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import CliResult, run_cli
from edgesynth.outputs import STAGING_PREFIX

CASE = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases" / "MAX78000"
YAML = "networks/mnist-chw-ai85.yaml"
CKPT = "trained/ai85-mnist-qat8-q.pth.tar"
SAMPLE = "tests/sample_mnist.npy"
SENTINEL = "sentinel.txt"
KAT = "trace/kat.npz"
PULP_CASE = CASE.parents[1].parent / "pulp" / "cases" / "eegnet_1d_8b_Hx1"
XDNN_QUANT = CASE.parents[1].parent / "xdnn" / "ml-suite" / "googlenet_v1_8b.json"
GROUPS = ("gati", "xdnn", "pulp", "device")  # commands with sub-commands


@dataclass
class Command:
    """One command: a valid command line with its output at OUT, and how to get it wrong."""

    name: str
    argv: Callable[[str], list[str]]  # the valid command line, output at the given place
    output: str | None  # "folder" | "file" | None (writes nothing)
    input_folder: str = "networks"  # a folder holding one of the inputs
    input_file: str = YAML  # one input file
    swapped: list[str] | None = None  # inputs in each other's place: refused (exit 1)
    bad_value: list[str] = field(default_factory=lambda: ["--device", "MAX1"])  # exit 2
    required: bool = True  # the bare command is a usage error
    overwrite: bool = False  # has --overwrite (a folder output)
    suffix: str = ".npy"  # what a file output is named with


def _izer(out: str) -> list[str]:
    parent, name = str(Path(out).parent), Path(out).name or "."
    return [
        "izer", "--device", "MAX78000", "--config-file", YAML, "--checkpoint-file", CKPT,
        "--test-dir", parent, "--prefix", name, "--sample-numpy-filename", "kat",
    ]  # fmt: skip


IZER_SWAPPED = [
    "izer", "--device", "MAX78000", "--config-file", CKPT, "--checkpoint-file", YAML,
    "--test-dir", "o", "--prefix", "p", "--sample-numpy-filename", "kat",
]  # fmt: skip


def _train(out: str) -> list[str]:
    return [
        "train", "--dataset", "synthetic", "--epochs", "1", "--train-limit", "64",
        "--no-progress", "--qat-policy", "train/policy.yaml", "--out-dir", "runs",
        "--yaml-template", out,
    ]  # fmt: skip


COMMANDS = [
    Command(
        "izer",
        _izer,
        "folder",
        input_folder="tests",
        swapped=IZER_SWAPPED,
        overwrite=True,
    ),
    Command(
        "simulate",
        lambda out: ["simulate", YAML, CKPT, "--sample-input", SAMPLE, "--save", out],
        "folder",
        swapped=["simulate", CKPT, YAML],
        overwrite=True,
    ),
    Command(
        "simulate --output",
        lambda out: ["simulate", YAML, CKPT, "--output", out],
        "file",
        swapped=["simulate", SAMPLE, CKPT],
    ),
    Command(
        "synth",
        lambda out: ["synth", YAML, CKPT, "--sample-input", SAMPLE, "-o", out],
        "folder",
        input_folder="trained",
        input_file=CKPT,
        swapped=["synth", CKPT, YAML, "-o", "o"],
        overwrite=True,
    ),
    Command(
        "plan",
        lambda out: ["plan", YAML, CKPT, "--sample-input", SAMPLE, "-o", out],
        "file",
        swapped=["plan", CKPT, YAML],
        suffix=".yaml",
    ),
    Command(
        "build",
        lambda out: ["build", "project-c"],
        None,
        swapped=["build", "tests"],
        bad_value=["--device", "MAX1"],
    ),
    Command(
        "demo",
        lambda out: ["demo", "--synthetic", "--out", out],
        "folder",
        input_folder=".",
        required=False,
        overwrite=True,
    ),
    Command(
        "train",
        _train,
        "file",
        input_folder="train",
        input_file="train/policy.yaml",
        swapped=["train", "--dataset", "synthetic", "--resume", SAMPLE, "--epochs", "1"],
        bad_value=["--epochs", "many"],
        required=False,
    ),
    Command(
        "quantize",
        lambda out: ["quantize", "float/net5.pth.tar", out],
        "file",
        input_folder="float",
        input_file="float/net5.pth.tar",
        swapped=["quantize", YAML, "o.pth.tar"],
    ),
    Command(
        "fuse-bn",
        lambda out: ["fuse-bn", "float/bn.pth.tar", out],
        "file",
        input_folder="float",
        input_file="float/bn.pth.tar",
        swapped=["fuse-bn", SAMPLE, "o.pth.tar"],
        bad_value=["--out-arch"],
    ),
    Command(
        "evaluate",
        lambda out: ["evaluate", "--checkpoint", CKPT, "--sample-input", SAMPLE, "--output", out],
        "file",
        input_folder="tests",
        input_file=SAMPLE,
        swapped=["evaluate", "--checkpoint", SAMPLE, "--sample-input", CKPT],
    ),
    Command(
        "gati compile",
        lambda out: ["gati", "compile", "gati/model.onnx", "-c", "gati/calib.npy", "-o", out],
        "folder",
        input_folder="gati",
        input_file="gati/model.onnx",
        swapped=["gati", "compile", "gati/calib.npy", "-c", "gati/model.onnx", "-o", "o"],
        bad_value=["--on-chip-acc-bytes", "lots"],
        overwrite=True,
    ),
    Command(
        "gati run",
        lambda out: ["gati", "run", "compiled", "-i", "gati/calib.npy", "-o", out],
        "file",
        input_folder="gati",
        input_file="gati/calib.npy",
        swapped=["gati", "run", "gati/calib.npy", "-i", "compiled", "-o", "y.npy"],
        bad_value=["--format", "x"],
    ),
    Command(
        "gati decode",
        lambda out: ["gati", "decode", "compiled/program.bin"],
        None,
        swapped=["gati", "decode", "gati/calib.npy"],
        bad_value=["--format", "xml"],
    ),
    Command(
        "compile",
        lambda out: ["compile", YAML, "--checkpoint", CKPT, "-t", "max78000", "-o", out],
        "folder",
        input_folder="trained",
        input_file=CKPT,
        swapped=["compile", CKPT, "--checkpoint", YAML, "-t", "max78000", "-o", "o"],
        bad_value=["--option"],
        overwrite=True,
    ),
    Command(
        "run",
        lambda out: ["run", "compiled-max78000", "-i", SAMPLE, "--integer", "-o", out],
        "file",
        input_folder="tests",
        input_file=SAMPLE,
        swapped=["run", SAMPLE, "-i", "compiled-max78000", "-o", "y.npy"],
        bad_value=["--input"],
    ),
    Command("targets", lambda out: ["targets"], None, bad_value=["extra"], required=False),
    Command(
        "xdnn compile",
        lambda out: ["xdnn", "compile", "gati/model.onnx", "-c", "gati/calib.npy", "-o", out],
        "folder",
        input_folder="gati",
        input_file="gati/model.onnx",
        swapped=["xdnn", "compile", "gati/calib.npy", "-c", "gati/model.onnx", "-o", "o"],
        bad_value=["--engine", "9x9"],
        overwrite=True,
    ),
    Command(
        "xdnn run",
        lambda out: ["xdnn", "run", "compiled-xdnn", "-i", "gati/calib.npy", "-o", out],
        "file",
        input_folder="gati",
        input_file="gati/calib.npy",
        swapped=["xdnn", "run", "gati/calib.npy", "-i", "compiled-xdnn", "-o", "y.npy"],
        bad_value=["--input"],
    ),
    Command(
        "xdnn decode",
        lambda out: ["xdnn", "decode", "compiled-xdnn/script.bin"],
        None,
        swapped=["xdnn", "decode", "gati/calib.npy"],
        bad_value=["extra"],
    ),
    Command(
        "xdnn check-quant",
        lambda out: ["xdnn", "check-quant", "xdnn/quant.json"],
        None,
        swapped=["xdnn", "check-quant", "gati/calib.npy"],
        bad_value=["extra"],
    ),
    Command(
        "pulp simulate",
        lambda out: [
            "pulp",
            "simulate",
            "pulp/network.onnx",
            "--input",
            "pulp/data.npz",
            "--output",
            out,
        ],
        "file",
        input_folder="pulp",
        input_file="pulp/data.npz",
        swapped=[
            "pulp",
            "simulate",
            "pulp/data.npz",
            "--input",
            "pulp/network.onnx",
            "--output",
            "o.npz",
        ],
        bad_value=["--layout", "xyz"],
        suffix=".npz",
    ),
    Command(
        "pulp compile",
        lambda out: ["pulp", "compile", "pulp/network.onnx", "-o", out],
        "folder",
        input_folder="pulp",
        input_file="pulp/network.onnx",
        swapped=["pulp", "compile", "pulp/data.npz", "-o", "o"],
        bad_value=["--l1", "lots"],
        overwrite=True,
    ),
    Command(
        "pulp run",
        lambda out: ["pulp", "run", "compiled-pulp", "--input", "pulp/data.npz", "--output", out],
        "file",
        input_folder="pulp",
        input_file="pulp/data.npz",
        swapped=["pulp", "run", "pulp/data.npz", "--input", "compiled-pulp", "--output", "o.npz"],
        bad_value=["--layout", "xyz"],
        suffix=".npz",
    ),
    Command(
        "pulp report",
        lambda out: ["pulp", "report", "compiled-pulp"],
        None,
        swapped=["pulp", "report", "pulp/data.npz"],
        bad_value=["extra"],
    ),
    Command(
        "device decode",
        lambda out: ["device", "decode", "trace/trace.bin"],
        None,
        input_folder="trace",
        input_file="trace/trace.bin",
        swapped=["device", "decode", "trace/kat.npz"],
    ),
    Command(
        "device run",
        lambda out: ["device", "run", "--trace", "trace/trace.bin", "--kat", KAT, "--output", out],
        "file",
        input_folder="trace",
        input_file="trace/kat.npz",
        swapped=["device", "run", "--trace", "trace/kat.npz", "--kat", "trace/trace.bin"],
    ),
]


def _bare(command: Command) -> list[str]:
    words = command.name.split()
    return words[:2] if words[0] in GROUPS else words[:1]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project: the MNIST case, a Gati model and its compiled program, a float
    checkpoint with batchnorm, and a sentinel file."""
    onnx = needs.module("onnx")
    needs.module("torch")
    from onnx import TensorProto, helper, numpy_helper

    from edgesynth.targets.gati.artifacts import write_outputs
    from edgesynth.targets.gati.compiler import compile_onnx

    root = tmp_path_factory.mktemp("template") / "project"
    for sub in ("networks", "trained", "tests"):
        shutil.copytree(CASE / "mnist" / sub, root / sub)
    rng = np.random.default_rng(0)
    (root / "gati").mkdir()
    weight = numpy_helper.from_array(
        (rng.standard_normal((4, 1, 3, 3)) * 0.3).astype(np.float32), "w"
    )
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="relu"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(root / "gati" / "model.onnx"))
    calib = rng.uniform(0, 1, (8, 1, 8, 8)).astype(np.float32)
    np.save(root / "gati" / "calib.npy", calib)
    write_outputs(compile_onnx(root / "gati" / "model.onnx", calib), root / "compiled", calib[:1])
    from edgesynth.quant.checkpoint import model_state, write_checkpoint
    from edgesynth.train.models import create_model

    bn = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    write_checkpoint(
        root / "float" / "bn.pth.tar", arch="ai85nascifarnet", state_dict=model_state(bn)
    )
    net5 = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    write_checkpoint(root / "float" / "net5.pth.tar", arch="ai85net5", state_dict=model_state(net5))
    from edgesynth.flow import compile_to, load_model

    here = Path.cwd()
    os.chdir(root)
    try:
        compile_to(
            load_model(YAML, checkpoint=CKPT, sample_input=SAMPLE),
            "max78000",
            out=root / "compiled-max78000",
        )
    finally:
        os.chdir(here)
    compile_to(
        load_model(root / "gati" / "model.onnx"),
        "xdnn",
        calibration=calib,
        out=root / "compiled-xdnn",
    )
    (root / "xdnn").mkdir()
    shutil.copy(XDNN_QUANT, root / "xdnn" / "quant.json")
    (root / "pulp").mkdir()
    for name in ("network.onnx", "data.npz"):
        shutil.copy(PULP_CASE / name, root / "pulp" / name)
    compile_to(load_model(root / "pulp" / "network.onnx"), "gap8", out=root / "compiled-pulp")
    from edgesynth.targets.max7800x.izer import run_izer

    os.chdir(root)
    try:
        run_izer(
            ["--device", "MAX78000", "--config-file", YAML, "--checkpoint-file", CKPT,
             "--test-dir", ".", "--prefix", "project-c"]
        )  # fmt: skip
    finally:
        os.chdir(here)
    (root / "trace").mkdir()
    for name in ("trace.bin", "kat.npz"):
        shutil.copy(CASE / "mnist" / name, root / "trace" / name)
    (root / "train").mkdir()
    (root / "train" / "policy.yaml").write_text("start_epoch: 0\nweight_bits: 8\n")
    (root / SENTINEL).write_text("the user's file\n")
    return root


@pytest.fixture
def project(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the project as the working directory; HOME is a folder of its own."""
    root = tmp_path / "project"
    shutil.copytree(template, root)
    home = tmp_path / "home"
    home.mkdir()
    (home / SENTINEL).write_text("in the home folder\n")
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(home))
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every file (with a digest of its content) and folder under `root` (project, home)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "folder"
        for p in sorted(root.rglob("*"))
    }


def check(result: CliResult, status: int, before: dict[str, str], root: Path) -> None:
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    if status:
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1, result.stderr
    after = snapshot(root)
    changed = {k for k in before if after.get(k) != before[k]}
    assert not changed, f"files changed or lost: {sorted(changed)}"
    if status:
        created = sorted(set(after) - set(before))
        assert not created, f"a refused run created {created}"
    assert not [p for p in root.rglob(f"*{STAGING_PREFIX}*")], "staging files left behind"


def scenarios() -> list[tuple[Command, str]]:
    rows = []
    for command in COMMANDS:
        names = ["ok", "unknown-option", "bad-value"]
        names += ["missing"] if command.required else []
        names += ["swapped"] if command.swapped else []
        if command.output:
            names += ["out-cwd", "out-input-folder", "out-home", "out-non-empty"]
        if command.output == "file" and command.input_file.endswith(command.suffix):
            names += ["out-input-file"]  # (np.save naming gives other inputs a new name)
        if command.overwrite:
            names += ["overwrite-keeps-other-files"]
        rows += [(command, name) for name in names]
    return rows


@pytest.mark.parametrize(
    ("command", "scenario"),
    scenarios(),
    ids=[f"{c.name}-{s}" for c, s in scenarios()],
)
def test_command(project: Path, command: Command, scenario: str) -> None:
    root = project.parent
    (project / "busy").mkdir()
    (project / "busy" / SENTINEL).write_text("a non-empty folder\n")
    before = snapshot(root)
    fresh = "results/new" if command.output == "folder" else f"results/new{command.suffix}"
    status = 1
    if scenario == "ok":
        argv, status = command.argv(fresh), 0
    elif scenario == "unknown-option":
        argv, status = [*command.argv(fresh), "--no-such-option"], 2
    elif scenario == "bad-value":
        argv, status = [*command.argv(fresh), *command.bad_value], 2
    elif scenario == "missing":
        argv, status = _bare(command), 2
    elif scenario == "swapped":
        argv = command.swapped or []
    elif scenario == "out-cwd":
        argv = command.argv(".")
    elif scenario == "out-input-folder":
        argv = command.argv(command.input_folder)
    elif scenario == "out-home":
        argv = command.argv(str(root / "home"))
    elif scenario == "out-non-empty":
        argv = command.argv("busy")
    elif scenario == "out-input-file":
        argv = command.argv(command.input_file)
    elif scenario == "overwrite-keeps-other-files":
        argv, status = [*command.argv("busy"), "--overwrite"], 0
    result = run_cli(*argv)
    check(result, status, before, root)
    if scenario == "ok" and command.output:
        assert (project / fresh).exists(), result.output
    if scenario.startswith("out-") and command.output:
        message = result.stderr
        assert "refusing" in message or "input of this run" in message or "folder" in message
    if scenario == "overwrite-keeps-other-files":
        assert len(list((project / "busy").iterdir())) > 1


def test_every_command_has_a_row() -> None:
    """A new sub-command needs a row in COMMANDS."""
    from edgesynth.cli import _subcommands, build_parser

    parser = build_parser()
    names = set()
    for name, sub in _subcommands(parser).items():
        nested = _subcommands(sub)
        names |= {f"{name} {n}" for n in nested} if nested else {name}
    covered = {c.name.split(" --")[0] for c in COMMANDS}
    assert names <= covered, f"commands without a robustness row: {sorted(names - covered)}"
