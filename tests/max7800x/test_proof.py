"""The proof `izer`, `synth`, `compile -t max78000|max78002` and `plan` run before a project is
moved into place: its writes, replayed on the virtual device, leave the known answer in data
memory. A project that misses it is refused with one message (the first failing layer, the
hazard, what the board would do, what to do) and no folder; `--no-verify` writes it, warned.
The corpus cases whose vendor project misses (tests/conformance/test_proof_corpus.py) are the
real-world check; here a project is corrupted on purpose."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.targets.max7800x import codegen
from edgesynth.targets.max7800x.plan import plan as plan_module
from edgesynth.targets.max7800x.proof import explain, failure_message, hazard_phrase
from edgesynth.targets.max7800x.vdevice.hazards import Hazard
from edgesynth.targets.max7800x.vdevice.runner import KatReport

# -- the message -------------------------------------------------------------------------------


def _overlap(layer: int, other: int, processor: int) -> Hazard:
    return Hazard(
        "overlapping kernel blocks",
        layer,
        other,
        f"layers {other} and {layer} read the same 9 kernel-memory words (processor "
        f"{processor}, words 4-6) (their kernel blocks overlap)",
    )


def test_kernels_written_over_name_the_victim_and_the_calcx4_layer() -> None:
    hazards = [_overlap(3, 0, p) for p in (16, 32, 48)]
    assert explain(0, hazards, calcx4={1, 2, 3}) == (
        "layer 3's calcx4 kernels are written over layer 0's kernels "
        "(processors 16, 32 and 48, kernel words 4-6)"
    )
    # the later layer is the one computing wrong values: its kernels were written over
    assert explain(3, hazards[:1], calcx4={0}) == (
        "layer 0's calcx4 kernels are written over layer 3's kernels "
        "(processor 16, kernel words 4-6)"
    )


def test_the_hazard_of_the_first_failing_layer_is_chosen() -> None:
    unwritten = Hazard(
        "unwritten input",
        2,
        None,
        "layer 2: processor 16 reads its input from the fast FIFO and gets only zero bytes",
    )
    clobbered = Hazard("clobbered input", 1, 0, "layer 1 reads 8 bytes of layer 0's output")
    assert explain(2, [clobbered, unwritten], calcx4=set()) == (
        "layer 2's input is never written in full: processor 16 reads its input from the fast "
        "FIFO and gets only zero bytes"
    )
    assert explain(1, [clobbered, unwritten], calcx4=set()).startswith(
        "layer 0's output is written over data layer 1 still reads"
    )
    assert explain(1, [], calcx4=set()) is None
    missing = Hazard("unwritten kernels", 4, None, "layer 4 reads 9 kernel-memory words ...")
    assert hazard_phrase("unwritten kernels", 4, None, [missing], set()).startswith(
        "layer 4's kernels are never loaded: reads 9 kernel-memory words"
    )


@pytest.mark.parametrize("checks", [True, False])
def test_the_message_says_what_the_board_would_do_and_what_to_do(checks: bool) -> None:
    message = failure_message(
        "MAX78002",
        KatReport(words=48, mismatches=48, first_bad_layer=3),
        "layer 0 (conv1)",
        "layer 3's calcx4 kernels are written over layer 0's kernels",
        checks=checks,
        remedy="Run `edgesynth plan`.",
    )
    assert message.startswith(
        "the project misses its known answer on the virtual MAX78002 (48 of 48 words differ): "
        "layer 0 (conv1) is the first to compute wrong values: layer 3's calcx4 kernels are "
        "written over layer 0's kernels. On the board, "
    )
    assert ("*** FAIL ***" in message) == checks
    assert ("nothing checks them" in message) != checks
    assert message.endswith("Run `edgesynth plan`.")
    unexplained = failure_message(
        "MAX78000", KatReport(4, 1, None), None, None, checks=True, remedy="R."
    )
    assert "(1 of 4 words differ): no memory hazard explains it. On the board" in unexplained


# -- the commands ------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """Two 3x3 convolutions (2 -> 4 -> 4 channels, 4x4, random weights) in `net.yaml`."""
    (tmp_path / "tests").mkdir()
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(5)
    (tmp_path / "net.yaml").write_text(
        "arch: test\ndataset: t\nlayers:\n"
        + textwrap.indent(
            "- {processors: 0x3, output_processors: 0xf, out_offset: 0x2000, op: conv2d, "
            "pad: 1}\n- {processors: 0xf, output_processors: 0xf, out_offset: 0x0, "
            "op: conv2d, pad: 1}\n",
            "  ",
        )
    )
    np.save(tmp_path / "tests" / "sample_t.npy", rng.integers(-50, 50, size=(2, 4, 4)))
    with open(tmp_path / "tests" / "weights_t.npy", "wb") as f:
        for shape in ((4, 2, 3, 3), (4, 4, 3, 3)):
            np.save(f, rng.integers(-100, 100, size=shape))
    return tmp_path


def _lose_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's plan (every write its C makes) without its kernel writes."""
    original = codegen.project_files

    def corrupted(result, opts, name):  # type: ignore[no-untyped-def]
        plan, files = original(result, opts, name)
        plan.kernels = []
        return plan, files

    monkeypatch.setattr(codegen, "project_files", corrupted)


def _plan_without_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan made (what `compile`'s plan step makes) without its kernel writes."""
    original = plan_module.make_plan

    def corrupted(result, opts):  # type: ignore[no-untyped-def]
        plan = original(result, opts)
        plan.kernels = []
        return plan

    monkeypatch.setattr(plan_module, "make_plan", corrupted)


IZER = ["izer", "--device", "MAX78000", "--config-file", "net.yaml", "--test-dir", "out"]


def test_izer_prints_the_proof_line(project: Path, capsys) -> None:
    assert main([*IZER, "--prefix", "p"]) == 0
    out = capsys.readouterr().out
    assert "known answer reproduced on the virtual MAX78000: 16 of 16 words\n" in out
    assert (project / "out" / "p" / "cnn.c").is_file()


def test_izer_refuses_a_project_that_misses_its_known_answer(
    project: Path, monkeypatch, capsys
) -> None:
    _lose_the_kernels(monkeypatch)
    assert main([*IZER, "--prefix", "p"]) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err
    assert err.startswith(
        "edgesynth: error: net.yaml: the project misses its known answer on the virtual "
        "MAX78000 (16 of 16 words differ): layer 0 is the first to compute wrong values: "
        "layer 0's kernels are never loaded"
    )
    assert "*** FAIL ***" in err and "edgesynth plan" in err and "--no-verify" in err
    assert "known answer reproduced" not in captured.out
    assert not (project / "out").exists()


def test_izer_no_verify_writes_the_project_with_a_warning(
    project: Path, monkeypatch, capsys
) -> None:
    _lose_the_kernels(monkeypatch)
    assert main([*IZER, "--prefix", "p", "--no-verify"]) == 0
    captured = capsys.readouterr()
    assert (
        "edgesynth: warning: --no-verify: the project was written without running it on the "
        "virtual MAX78000" in captured.err
    )
    assert "known answer reproduced" not in captured.out
    assert (project / "out" / "p" / "cnn.c").is_file()


def test_synth_proves_and_passes_no_verify_on(project: Path, monkeypatch, capsys) -> None:
    synth = ["synth", "net.yaml", "-o", "out/s"]
    assert main(synth) == 0
    assert "known answer reproduced on the virtual MAX78000" in capsys.readouterr().out
    _lose_the_kernels(monkeypatch)
    assert main([*synth[:-1], "out/t"]) == 1
    assert "layer 0's kernels are never loaded" in capsys.readouterr().err
    assert not (project / "out" / "t").exists()
    assert main([*synth[:-1], "out/t", "--no-verify"]) == 0
    assert "warning: --no-verify" in capsys.readouterr().err


def test_compile_for_the_max78000_proves_its_project(project: Path, monkeypatch, capsys) -> None:
    compile_ = ["compile", "net.yaml", "-t", "max78000", "--sample-input", "tests/sample_t.npy"]
    compile_ += ["-o", "c1"]
    assert main(compile_) == 0
    assert "known answer reproduced on the virtual MAX78000" in capsys.readouterr().out
    _plan_without_kernels(monkeypatch)
    assert main([*compile_[:-1], "c2"]) == 1
    err = capsys.readouterr().err
    assert "layer 0's kernels are never loaded" in err and "defect in edgesynth" in err
    assert not (project / "c2").exists()
