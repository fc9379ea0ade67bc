"""The host build the proof runs: every C file compiled with warnings as errors (one compiler
per file, at once), the executable outside the program's folder, a failing file named with the
compiler's message; the simulator running meanwhile does not hide its own errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from onnxgen import nemo_network

from edgesynth.errors import EdgesynthError
from edgesynth.targets.pulp import cli
from edgesynth.targets.pulp.executor.build import build, start_build
from edgesynth.targets.pulp.target import _host_run
from needs import tools


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tools("gcc")
    model = nemo_network(tmp_path_factory.mktemp("nemo"), np.random.default_rng(21))
    folder = tmp_path_factory.mktemp("prog") / "prog"
    cli.compile_network(model, folder)
    return folder


def _inputs(folder: Path) -> list[np.ndarray]:
    from edgesynth.targets.pulp.executor.build import read_layout

    shapes = [e["shape_chw"] for e in read_layout(folder)["inputs"]]
    return [np.random.default_rng(3).integers(0, 256, (1, *s)) for s in shapes]


def test_the_proofs_run_adds_nothing_to_the_folder(program: Path) -> None:
    before = sorted(p.name for p in program.iterdir())
    result, also = _host_run(program, _inputs(program), "no gcc", lambda: "simulated")
    assert also == "simulated"
    assert result.outputs and len(result.outputs[0]) == len(result.layout["layers"])
    assert sorted(p.name for p in program.iterdir()) == before


def test_a_warning_in_any_file_fails_the_build_naming_it(program: Path, tmp_path: Path) -> None:
    work = tmp_path / "prog"
    shutil.copytree(program, work)
    kernels = work / "es_kernels.c"
    kernels.write_text(kernels.read_text() + "\nstatic int es_unused_helper(void) { return 1; }\n")
    failed = r"(?s)gcc failed on .*es_kernels\.c.*es_unused_helper"
    with pytest.raises(EdgesynthError, match=failed):
        build(work, "host")
    assert not (work / "network_host").exists()


def test_a_failing_link_is_an_error(program: Path, tmp_path: Path) -> None:
    work = tmp_path / "prog"
    shutil.copytree(program, work)
    main = work / "main.c"
    main.write_text(main.read_text().replace("int main(", "int es_not_main(", 1))
    with pytest.raises(EdgesynthError, match=r"(?s)gcc failed on .*undefined reference to .main"):
        build(work, "host")


def test_an_error_while_the_compilers_run_is_not_hidden(program: Path) -> None:
    def fails() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _host_run(program, _inputs(program), "no gcc", fails)


def test_a_cancelled_build_stops_its_compilers(program: Path, tmp_path: Path) -> None:
    pending = start_build(program, "host", binary=tmp_path / "network_host")
    pending.cancel()
    assert all(job.poll() is not None for job in pending.jobs)
    assert not Path(pending._objects.name).exists()
    assert not (tmp_path / "network_host").exists()
