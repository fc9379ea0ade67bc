"""Targets plug in: they are found through the entry-point group `edgesynth.targets`, a new
target package (a folder and an entry point, nothing else) is listed, compiles and gets its
sub-commands; the generic layer names no target; the MAX7800x commands live under
`edgesynth max7800x` and keep their top-level names."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from edgesynth.entry_points import entry_points
from edgesynth.targets.registry import GROUP, plugins, target_names

SRC = Path(__file__).resolve().parents[2] / "src" / "edgesynth"
MNIST = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "cases" / "MAX78000" / "mnist"


@pytest.mark.parametrize("group", ["console_scripts", GROUP])
def test_the_entry_point_reader_finds_what_importlib_metadata_finds(group: str) -> None:
    ours = {(e.name, e.value) for e in entry_points(group)}
    theirs = {(e.name, e.value) for e in importlib.metadata.entry_points(group=group)}
    assert ours == theirs


def test_the_five_targets_are_registered_by_the_four_packages() -> None:
    assert sorted(plugins()) == ["gati", "max7800x", "pulp", "xdnn"]
    assert target_names() == ["gap8", "gati", "max78000", "max78002", "xdnn"]
    listed = run_cli("targets")
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == target_names()


def _declared() -> dict[str, str]:
    import tomllib

    project = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())["project"]
    return dict(project["entry-points"][GROUP])


def test_the_installed_metadata_holds_the_declared_entry_points() -> None:
    """What pyproject.toml declares is what this installation found (else: reinstall)."""
    assert {e.name: e.value for e in entry_points(GROUP)} == _declared()


@pytest.mark.slow
def test_the_wheel_carries_the_entry_points(tmp_path: Path) -> None:
    """A wheel built from this checkout (a copy of it: the build writes beside the sources)
    declares the target packages and holds their plugin modules."""
    import shutil
    import zipfile

    root = SRC.parents[1]
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tmp_path / name)
    shutil.copytree(root / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.pyc"))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", "dist", "."],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (meta,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        text = z.read(meta).decode()
    section = text.split(f"[{GROUP}]\n", 1)[1].split("\n\n", 1)[0]
    lines = dict(line.split(" = ", 1) for line in section.splitlines() if line)
    assert lines == _declared()
    for value in lines.values():
        module = value.partition(":")[0]
        assert module.replace(".", "/") + ".py" in names


def test_the_generic_layer_names_no_target() -> None:
    """cli.py, flow.py and flow_cli.py import no target package and name no target: they ask
    the registry."""
    names = [*target_names(), *plugins()]
    quoted = re.compile(r"[\"'](" + "|".join(names) + r")[\"']", re.IGNORECASE)
    package = re.compile(r"edgesynth\.targets\.(" + "|".join(plugins()) + r")\b")
    for name in ("cli.py", "flow.py", "flow_cli.py"):
        text = (SRC / name).read_text()
        assert not quoted.search(text), f"{name} names a target: {quoted.search(text)}"
        assert not package.search(text), f"{name} imports {package.search(text)}"


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from edgesynth.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_a_source_tree_without_target_metadata_finds_its_own_targets(tmp_path: Path) -> None:
    """Metadata without `edgesynth.targets` entry points (edgesynth installed before its
    targets became entry points, or a source tree run with PYTHONPATH=src and no install):
    edgesynth's own target packages are found in its folder, so every command still works."""
    stale = tmp_path / "meta" / "edgesynth-0.1.0.dist-info"
    stale.mkdir(parents=True)
    (stale / "METADATA").write_text("Metadata-Version: 2.1\nName: edgesynth\nVersion: 0.1.0\n")
    (stale / "entry_points.txt").write_text("[console_scripts]\nedgesynth = edgesynth.cli:main\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        f"import sys; sys.path[:0] = [{str(stale.parent)!r}, {str(SRC.parent)!r}]; "
        "from edgesynth.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, "targets"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    for name in ("gap8", "gati", "max78000", "max78002", "xdnn"):
        assert name in run.stdout


def test_the_source_tree_entries_are_the_declared_ones() -> None:
    """The folder scan finds exactly the target packages pyproject.toml declares."""
    from edgesynth.targets.registry import _source_tree_entries

    declared = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    group = declared["project"]["entry-points"]["edgesynth.targets"]
    assert {e.name: e.value for e in _source_tree_entries()} == group


# A target package of its own: a folder with a target, a sub-command and the TargetPlugin its
# entry point names; installed as pip would (a dist-info with entry_points.txt on sys.path).
ACME_TARGET = '''
import json
from pathlib import Path

import numpy as np

from dataclasses import dataclass, field

from edgesynth.ir.graph import QType
from edgesynth.targets.base import Program, Target, TensorFormat


@dataclass(kw_only=True)
class AcmeProgram(Program):
    layers: list[str]
    plan: list[int] = field(default_factory=list)


class AcmeTarget(Target[AcmeProgram, AcmeProgram]):
    """Runs the graph as it is (float64) and writes its operators, one per line."""

    name = "acme"
    summary = "Acme NPU: every operator as the graph has it"

    def lower(self, graph, options):
        fmt = lambda t: TensorFormat.of(t, graph.tensors[t].shape, QType(32, True, 1.0))
        return AcmeProgram(target=self.name, graph=graph, layers=[n.op for n in graph.nodes],
                           inputs=[fmt(t) for t in graph.inputs],
                           outputs=[fmt(t) for t in graph.outputs])

    def check(self, program):
        pass

    def plan(self, program):
        program.plan = list(range(len(program.layers)))

    def simulate(self, program, inputs):
        from edgesynth.sim.graph import run

        values = run(program.graph, dict(zip(program.graph.inputs, inputs)))
        return [values[t] for t in program.graph.outputs]

    def emit(self, program, folder):
        (Path(folder) / "acme.txt").write_text("\\n".join(program.layers) + "\\n")
        return self.write_manifest(program, Path(folder), ["acme.txt"])

    def load(self, folder, manifest):
        raise NotImplementedError

    def run(self, loaded, inputs):
        raise NotImplementedError
'''

ACME_CLI = """
def register(subparsers):
    acme = subparsers.add_parser("acme", help="Acme NPU commands")
    commands = acme.add_subparsers(dest="acme_command", required=True)
    hello = commands.add_parser("hello", help="greet")
    hello.set_defaults(handler=lambda args: print("hello from acme") or 0)
"""

ACME_PLUGIN = """
from edgesynth.targets.registry import TargetPlugin

PLUGIN = TargetPlugin(
    targets={"acme": "acme_npu.target:AcmeTarget"}, commands="acme_npu.cli:register"
)
"""


def _acme_site(root: Path) -> Path:
    site = root / "site"
    package = site / "acme_npu"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Acme NPU: a target package."""\n')
    (package / "target.py").write_text(ACME_TARGET)
    (package / "cli.py").write_text(ACME_CLI)
    (package / "plugin.py").write_text(ACME_PLUGIN)
    meta = site / "acme_npu-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-npu\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[{GROUP}]\nacme = acme_npu.plugin:PLUGIN\n")
    return site


def _small_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(
        np.arange(2 * 1 * 3 * 3, dtype=np.float32).reshape(2, 1, 3, 3) / 10, "w"
    )
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_a_new_target_package_plugs_in(tmp_path: Path) -> None:
    """Listed by `edgesynth targets`, compiles through `edgesynth compile -t acme`, its
    sub-command mounted: with no edit outside its folder."""
    site = _acme_site(tmp_path)
    _small_onnx(tmp_path / "small.onnx")
    paths = [str(site), str(SRC.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    listed = _run(["targets"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "acme       Acme NPU: every operator as the graph has it" in listed.stdout.splitlines()
    compiled = _run(["compile", "small.onnx", "-t", "acme", "-o", "out"], env, tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    assert "small.onnx -> acme: 2 hardware layers, input 1x4x4 int32" in compiled.stdout
    assert (tmp_path / "out" / "acme.txt").read_text() == "conv\nactivation\n"
    assert '"target": "acme"' in (tmp_path / "out" / "compiled.json").read_text()
    helped = _run(["--help"], env, tmp_path)
    assert re.search(r"^\s+acme\s+Acme NPU commands$", helped.stdout, re.MULTILINE)
    hello = _run(["acme", "hello"], env, tmp_path)
    assert (hello.returncode, hello.stdout) == (0, "hello from acme\n")


@pytest.mark.corpus
def test_the_max7800x_commands_keep_their_top_level_names(tmp_path: Path) -> None:
    """`edgesynth max7800x simulate` and `edgesynth simulate` are one command: same output,
    same files."""
    network = MNIST / "networks" / "mnist-chw-ai85.yaml"
    checkpoint = MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"
    sample = MNIST / "tests" / "sample_mnist.npy"
    results = []
    for words in (["simulate"], ["max7800x", "simulate"]):
        out = tmp_path / "-".join(words)
        result = run_cli(*words, network, checkpoint, "--sample-input", sample, "--save", out)
        assert result.exit_code == 0, result.stderr
        stdout = result.stdout.replace(str(out), "OUT")
        results.append((stdout, [p.read_bytes() for p in sorted(out.iterdir())]))
    assert results[0] == results[1]
    helps = [run_cli(*words, "--help").stdout for words in (["izer"], ["max7800x", "izer"])]
    assert helps[0] == helps[1] and "--config-file" in helps[0]


def test_the_max7800x_only_commands_say_so() -> None:
    from edgesynth.cli import _subcommands, build_parser

    top = _subcommands(build_parser())
    group = _subcommands(top["max7800x"])
    assert sorted(group) == ["build", "device", "izer", "plan", "simulate", "synth"]
    for name in group:
        assert f"{name} MAX7800x only: " in re.sub(r"\s+", " ", top["max7800x"].format_help())
        assert name in top  # the alias
