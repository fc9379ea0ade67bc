"""Every `edgesynth` command, run the ways a user gets it wrong.

`COMMANDS` is the one table: a row per command (adding a command adds a row). Each row is run
with missing, unknown, bad and swapped arguments, and with its output pointed at the working
directory, at a folder holding an input, at the home folder, at a non-empty folder, at a
read-only folder and (for file outputs) at an input file and at an existing file of the user's,
with and without --overwrite, and under a name of the user's choosing (written exactly so).
Every run must end with the expected exit status, at most one message and no traceback, and
must leave the sentinel files, every input and the folders it did not create exactly as they
were (a sha256 of every file before and after), with no staging files anywhere.

`MISUSES` is the table of inputs that once gave a silent wrong result: each is refused with
one message naming the option, file or value, or warned about in one line. Ctrl-C after the
CP-SAT solver has run is checked on real processes (`test_ctrl_c_after_the_solver`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import CliResult, run_cli, snapshot
from edgesynth.outputs import STAGING_PREFIX
from readonly_fs import read_only

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
    any_name: bool = True  # a file output may have any name (plan -o wants .yaml)
    leaves: tuple[str, ...] = ()  # what a run refused at its end has written by then


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
        any_name=False,
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
        leaves=("runs",),  # a read-only --yaml-template folder is found after training
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
        "export",
        lambda out: ["export", "float/net5.pth.tar", "--input-shape", "1,28,28", "-o", out],
        "file",
        input_folder="float",
        input_file="float/net5.pth.tar",
        swapped=["export", YAML, "-o", "o.onnx"],
        suffix=".onnx",
        bad_value=["--input-shape", "x"],
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
        "report",
        lambda out: ["report", "compiled-max78000", "-o", out],
        "file",
        input_folder="compiled-max78000",
        input_file="compiled-max78000/compiled.json",
        swapped=["report", SAMPLE, "-o", "page.html"],
        bad_value=["--results"],
        suffix=".html",
    ),
    Command(
        "validate",
        lambda out: [
            "validate",
            "gati/model.onnx",
            "-t",
            "gati",
            "-d",
            "gati/calib.npy",
            "--json",
            out,
        ],
        "file",
        input_folder="gati",
        input_file="gati/calib.npy",
        swapped=["validate", "gati/calib.npy", "-t", "gati", "-d", "gati/model.onnx"],
        bad_value=["--limit", "0"],
        suffix=".json",
    ),
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
        leaves=("compiled-pulp/network_host",),  # the host build, made before the output
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

    from edgesynth.targets.gati.emit import write_outputs
    from edgesynth.targets.gati.plan import compile_onnx

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
    np.save(root / "gati" / "calib_u8.npy", (calib * 255).astype(np.uint8))  # pixels, not floats
    with_nan = calib.copy()
    with_nan[3, 0, 2, 2] = np.nan
    np.save(root / "gati" / "calib_nan.npy", with_nan)
    _network_variants(root / "networks")
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
    from edgesynth.targets.max7800x.commands.izer import run_izer

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


def _network_variants(folder: Path) -> None:
    """`short.yaml`: the MNIST network without its last layer (the checkpoint has one more);
    `unplaced.yaml`: without placement keys, for the planner's CP-SAT model to place."""
    import yaml

    data = yaml.safe_load((folder / Path(YAML).name).read_text())
    (folder / "short.yaml").write_text(
        yaml.safe_dump({**data, "layers": data["layers"][:-1]}, sort_keys=False)
    )
    for layer in data["layers"]:
        for key in ("processors", "output_processors", "in_offset", "out_offset"):
            layer.pop(key, None)
    (folder / "unplaced.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


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


def check(
    result: CliResult,
    status: int,
    before: dict[str, str],
    root: Path,
    *,
    replaced: str | None = None,
    leaves: tuple[str, ...] = (),
) -> None:
    """The exit status, at most one message, no traceback; every file before is unchanged
    (but `replaced`, which must change); a refused run created nothing (but under `leaves`)."""
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    if status and status != 130:  # (Ctrl-C: "edgesynth: interrupted")
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1, result.stderr
    after = snapshot(root)
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed == ({replaced} if replaced else set()), f"files changed or lost: {changed}"
    if status:
        created = set(after) - set(before)
        created = {c for c in created if not any(c.startswith(f"project/{x}") for x in leaves)}
        assert not created, f"a refused run created {sorted(created)}"
    assert not [p for p in root.rglob(f"*{STAGING_PREFIX[1:]}*")], "staging files left behind"


def scenarios() -> list[tuple[Command, str]]:
    rows = []
    for command in COMMANDS:
        names = ["ok", "unknown-option", "bad-value"]
        names += ["missing"] if command.required else []
        names += ["swapped"] if command.swapped else []
        if command.output:
            names += ["out-cwd", "out-input-folder", "out-home", "out-non-empty"]
        if command.output:
            names += ["out-read-only"]
        if command.output == "file":
            names += ["out-input-file", "out-existing-file", "overwrite-existing-file"]
            names += ["exact-name"] if command.any_name else []
        if command.overwrite:
            names += ["overwrite-keeps-other-files"]
        rows += [(command, name) for name in names]
    return rows


@pytest.mark.parametrize(
    ("command", "scenario"),
    scenarios(),
    ids=[f"{c.name}-{s}" for c, s in scenarios()],
)
def test_command(
    project: Path, command: Command, scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project.parent
    (project / "busy").mkdir()
    (project / "busy" / SENTINEL).write_text("a non-empty folder\n")
    (project / "read-only").mkdir()
    notes = "notes.txt" if command.any_name else f"notes{command.suffix}"
    (project / notes).write_text("the user's notes\n")  # `quantize ck.pth.tar notes.txt`
    before = snapshot(root)
    fresh = "results/new" if command.output == "folder" else f"results/new{command.suffix}"
    if scenario == "exact-name":
        fresh = "results/out.txt"  # not out.txt.npy
    status, replaced, leaves = 1, None, ()
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
    elif scenario == "out-existing-file":
        argv = command.argv(notes)
    elif scenario == "overwrite-existing-file":
        argv, status, replaced = [*command.argv(notes), "--overwrite"], 0, f"project/{notes}"
    elif scenario == "exact-name":
        argv, status = command.argv(fresh), 0
    elif scenario == "overwrite-keeps-other-files":
        argv, status = [*command.argv("busy"), "--overwrite"], 0
    if scenario == "out-read-only":
        leaves = command.leaves
        suffix = command.suffix if command.output == "file" else ""
        with read_only(project / "read-only", monkeypatch):
            result = run_cli(*command.argv(f"read-only/new{suffix}"))
    else:
        result = run_cli(*argv)
    check(result, status, before, root, replaced=replaced, leaves=leaves)
    if scenario in ("ok", "exact-name") and command.output:
        assert (project / fresh).exists(), result.output
    if scenario == "exact-name":
        assert sorted(p.name for p in (project / "results").iterdir()) == ["out.txt"]
    if scenario.startswith("out-") and scenario != "out-existing-file" and command.output:
        message = result.stderr
        assert "refusing" in message or "input of this run" in message or "folder" in message
    if scenario == "out-read-only":
        assert f"cannot write into {Path('read-only')}" in result.stderr or (
            f"cannot write into {project / 'read-only'}" in result.stderr
        ), result.stderr
        assert "read-only file system" in result.stderr
    if scenario == "out-existing-file":
        assert f"{notes} exists; pass --overwrite" in result.stderr, result.stderr
    if scenario == "overwrite-keeps-other-files":
        assert len(list((project / "busy").iterdir())) > 1


def _same_command(a: argparse.ArgumentParser, b: argparse.ArgumentParser) -> bool:
    """Two parsers run the same code (an alias): the same handler, or the same sub-commands."""
    from edgesynth.cli import _subcommands

    handlers = ("handler", "raw_handler")
    if any(a.get_default(h) is not None for h in handlers):
        return all(a.get_default(h) is b.get_default(h) for h in handlers)
    na, nb = _subcommands(a), _subcommands(b)
    return bool(na) and na.keys() == nb.keys() and all(_same_command(na[k], nb[k]) for k in na)


def test_every_command_has_a_row() -> None:
    """A new sub-command needs a row in COMMANDS (an alias, `max7800x simulate` of `simulate`,
    is covered by the other name's rows)."""
    from edgesynth.cli import _subcommands, build_parser

    parser = build_parser()
    top = _subcommands(parser)
    names = set()
    for name, sub in top.items():
        nested = _subcommands(sub)
        aliases = {n for n in nested if n in top and _same_command(nested[n], top[n])}
        names |= {f"{name} {n}" for n in set(nested) - aliases} if nested else {name}
    assert "simulate" in _subcommands(top["max7800x"])  # the aliases exist
    covered = {c.name.split(" --")[0] for c in COMMANDS}
    assert names <= covered, f"commands without a robustness row: {sorted(names - covered)}"


# -- inputs that once gave a silent wrong result -----------------------------------------------

TARGET_MODELS = {
    "max78000": "gati/model.onnx",
    "max78002": "gati/model.onnx",
    "gati": "gati/model.onnx",
    "xdnn": "gati/model.onnx",
    "gap8": "pulp/network.onnx",
}
UINT8 = "calibration data is uint8, but Gati takes float inputs"
NAN = "calibration data holds 1 NaN or infinite values (the first at index [3, 0, 2, 2]: nan)"


@dataclass
class Misuse:
    """A command line that must be refused (status 1 or 2, one `error:` line) or warned
    about (status 0, one `warning:` line); the line holds every one of `says`."""

    argv: list[str]
    status: int
    says: tuple[str, ...]


MISUSES = {
    "compile -t gati, uint8 calibration": Misuse(
        ["compile", "gati/model.onnx", "-t", "gati", "-c", "gati/calib_u8.npy", "-o", "res/g"],
        1,
        ("`--calibration`", UINT8),
    ),
    "gati compile, uint8 calibration (the same check)": Misuse(
        ["gati", "compile", "gati/model.onnx", "-c", "gati/calib_u8.npy", "-o", "res/g"],
        1,
        ("gati/calib_u8.npy", UINT8),
    ),
    **{
        f"compile -t {target}, NaN in the calibration data": Misuse(
            ["compile", model, "-t", target, "-c", "gati/calib_nan.npy", "-o", "res/c"],
            1,
            ("`--calibration`", NAN),
        )
        for target, model in TARGET_MODELS.items()
    },
    "xdnn compile, NaN in the calibration data": Misuse(
        ["xdnn", "compile", "gati/model.onnx", "-c", "gati/calib_nan.npy", "-o", "res/x"],
        1,
        ("`--calibration`", NAN),
    ),
    "gati compile, NaN in the calibration data": Misuse(
        ["gati", "compile", "gati/model.onnx", "-c", "gati/calib_nan.npy", "-o", "res/g"],
        1,
        ("gati/calib_nan.npy", NAN),
    ),
    "compile --option with an unknown key": Misuse(
        [
            "compile",
            "gati/model.onnx",
            "-t",
            "xdnn",
            "-c",
            "gati/calib.npy",
            "--option",
            "engin=56x32",
            "-o",
            "res/x",
        ],
        1,
        ("`--option`", "xdnn has no option `engin`", "engine, bits, fc_on_host", "`engine`?"),
    ),
    "compile --option for a target that takes none": Misuse(
        [
            "compile",
            YAML,
            "--checkpoint",
            CKPT,
            "-t",
            "max78000",
            "--option",
            "bits=4",
            "-o",
            "res/m",
        ],
        1,
        ("`--option`", "max78000 has no option `bits`; it takes none"),
    ),
    "compile --cpu-only for a target without it": Misuse(
        [
            "compile",
            "gati/model.onnx",
            "-t",
            "gati",
            "-c",
            "gati/calib.npy",
            "--cpu-only",
            "-o",
            "res/g",
        ],
        2,
        ("--cpu-only is for -t max78000 or -t max78002, not -t gati",),
    ),
    "compile --riscv for a target without it": Misuse(
        ["compile", "pulp/network.onnx", "-t", "gap8", "--riscv", "-o", "res/p"],
        2,
        ("--riscv is for -t max78000 or -t max78002, not -t gap8",),
    ),
    "compile --cpu-only, an integer network": Misuse(
        ["compile", YAML, "--checkpoint", CKPT, "-t", "max78000", "--cpu-only", "-o", "res/m"],
        1,
        ("`--cpu-only`", "--cpu-only quantizes a float model", "this one is an integer network"),
    ),
    "run, integer codes without --integer": Misuse(
        ["run", "compiled-max78000", "-i", SAMPLE, "-o", "res/y.npy"],
        0,
        ("`--input`", SAMPLE, "holds integers (int64)", "input codes", "--integer"),
    ),
    "quantize --weight-bits 0": Misuse(
        ["quantize", "float/net5.pth.tar", "res/q.pth.tar", "--weight-bits", "0"],
        1,
        ("`--weight-bits`", "0-bit weights are not supported on the MAX78000", "1, 2, 4 or 8"),
    ),
    "quantize --weight-bits 3": Misuse(
        ["quantize", "float/net5.pth.tar", "res/q.pth.tar", "--weight-bits", "3"],
        1,
        ("`--weight-bits`", "3-bit weights are not supported", "choose 1, 2, 4 or 8"),
    ),
    "a YAML with fewer layers than the checkpoint": Misuse(
        ["simulate", "networks/short.yaml", CKPT, "--sample-input", SAMPLE],
        0,
        (CKPT, "5 weight layers", "short.yaml uses 4", "fc is left out"),
    ),
    "pulp compile --l1 beyond the device": Misuse(
        ["pulp", "compile", "pulp/network.onnx", "-o", "res/p", "--l1", "1000000000000"],
        1,
        ("`--l1`", "1000000000000 bytes", "give 1 to 36700", "64000-byte L1"),
    ),
    "pulp compile --l1 1e12 (not an integer)": Misuse(
        ["pulp", "compile", "pulp/network.onnx", "-o", "res/p", "--l1", "1e12"],
        2,
        ("--l1", "1e12"),
    ),
    "pulp compile --l2 beyond the device": Misuse(
        ["pulp", "compile", "pulp/network.onnx", "-o", "res/p", "--l2", "600000"],
        1,
        ("`--l2`", "600000 bytes", "more than GAP8's L2", "to 512000 bytes"),
    ),
    "compile -t gap8 --option l1 beyond the device": Misuse(
        ["compile", "pulp/network.onnx", "-t", "gap8", "--option", "l1=40000", "-o", "res/p"],
        1,
        ("`--l1`", "40000 bytes", "give 1 to 36700"),
    ),
}


@pytest.mark.parametrize("misuse", MISUSES.values(), ids=MISUSES.keys())
def test_misuse(project: Path, misuse: Misuse) -> None:
    root = project.parent
    before = snapshot(root)
    result = run_cli(*misuse.argv)
    check(result, misuse.status, before, root)
    kind = "warning:" if misuse.status == 0 else "error:"
    lines = [line for line in result.stderr.splitlines() if kind in line]
    assert len(lines) == 1, result.stderr
    for part in misuse.says:
        assert part in lines[0], lines[0]
    if misuse.status == 0:
        assert "error:" not in result.stderr


# -- Ctrl-C after the CP-SAT solver ----------------------------------------------------------

INTERRUPTED = {
    "pulp compile, a folder": ["pulp", "compile", "pulp/network.onnx", "-o", "busy", "--overwrite"],
    "compile -t max78000, a new folder": [
        "compile", "networks/unplaced.yaml", "--checkpoint", CKPT, "-t", "max78000",
        "-o", "results/new",
    ],
    "plan -o, a file": [
        "plan", "networks/unplaced.yaml", CKPT, "--sample-input", SAMPLE, "-o", "notes.yaml",
        "--overwrite",
    ],
}  # fmt: skip


@pytest.mark.parametrize("argv", INTERRUPTED.values(), ids=INTERRUPTED.keys())
def test_ctrl_c_after_the_solver(project: Path, argv: list[str]) -> None:
    """A real process (OR-Tools' signal handling is process-wide) that has solved at least
    once and has its output staged gets SIGINT: exit status 130, "interrupted", nothing left.
    `interrupt_driver.py` is `edgesynth` with a pause at that point."""
    root = project.parent
    (project / "busy").mkdir()
    (project / "busy" / SENTINEL).write_text("a non-empty folder\n")
    (project / "notes.yaml").write_text("the user's old plan\n")
    before = snapshot(root)
    here = Path(__file__).resolve().parent
    path = [str(here.parents[1] / "src"), str(here), os.environ.get("PYTHONPATH", "")]
    process = subprocess.Popen(
        [sys.executable, str(here / "interrupt_driver.py"), *argv],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        ready = process.stderr.readline()
        assert ready.startswith("staged after "), ready + process.stderr.read()
        assert int(ready.split()[2]) >= 1, f"no CP-SAT solve ran: {ready}"
        process.send_signal(signal.SIGINT)
        message = process.stderr.read()
        status = process.wait(timeout=60)
    finally:
        process.kill()
    check(CliResult(status, "", message), 130, before, root)
    assert message == "edgesynth: interrupted\n"
    assert not (project / "results").exists()
