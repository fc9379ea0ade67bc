"""`edgesynth compile` proves what it writes before moving it into place: the emitted files run
on the target's executor (the Gati and xDNN functional models, the host build of the gap8 C)
must compute what the program's integer graph computes. A program corrupted after it was
emitted is refused with one message and no output folder; `--no-verify` writes it, warned."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.flow import compile_to, load_model
from edgesynth.proof import Proof, ProofFailed, compare, first_difference
from edgesynth.targets.base import get_target

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "gati"))
sys.path.insert(0, str(HERE / "pulp"))

import gati_golden_models as golden  # noqa: E402
from onnxgen import nemo_network  # noqa: E402

# -- the generic comparison --------------------------------------------------------------------


def test_the_proof_line_counts_what_was_compared() -> None:
    proof = Proof("the virtual MAX78000", 10, 10)
    assert proof.line == "known answer reproduced on the virtual MAX78000: 10 of 10 words"


def test_compare_passes_equal_outputs_and_names_the_first_difference() -> None:
    expected = np.arange(24).reshape(1, 2, 3, 4)
    assert compare(expected, expected.copy(), "the model", "the program", "Fix it.").line == (
        "known answer reproduced on the model: 24 of 24 values"
    )
    got = expected.copy()
    got[0, 1, 2, 0] = 99
    got[0, 1, 2, 3] = -5
    assert first_difference(expected, got) == (
        "2 of 24 values differ; the first at index (0, 1, 2, 0): 99 instead of 20"
    )
    with pytest.raises(ProofFailed, match=r"the program on the model does not compute .*Fix it\."):
        compare(expected, got, "the model", "the program", "Fix it.")
    with pytest.raises(ProofFailed, match="shape"):
        compare(expected, got[:, :1], "the model", "the program", "Fix it.")


# -- each target: the proof passes, and catches a corrupted program ----------------------------


def _xor_file(path: Path, pattern: int) -> None:
    data = np.frombuffer(path.read_bytes(), dtype=np.uint8) ^ np.uint8(pattern)
    path.write_bytes(data.tobytes())


def _corrupt_gati(folder: Path) -> None:
    """Every weight byte of program.dwp's largest DRAM write changed (the stream stays valid)."""
    from edgesynth.targets.gati import dwp

    path = folder / "program.dwp"
    packets = dwp.parse_stream(path.read_bytes())
    sizes = [p.size if isinstance(p, dwp.DwpPacket) else -1 for p in packets]
    i = int(np.argmax(sizes))
    payload = bytes(b ^ 0x11 for b in packets[i].payload)
    packets[i] = dwp.DwpPacket(packets[i].address, payload)
    path.write_bytes(dwp.encode_stream(packets))


CORRUPT = {
    "gati": _corrupt_gati,
    "xdnn": lambda folder: _xor_file(folder / "filters.bin", 0x11),
    "gap8": lambda folder: _xor_file(folder / "weights.bin", 0x11),
}


def _model(target: str, tmp_path: Path) -> tuple[Path, Path | None]:
    if target == "gap8":
        return nemo_network(tmp_path, np.random.default_rng(3)), None
    model, calibration, _ = golden.write_case("lenet", tmp_path)
    return model, calibration


def _corrupting_emit(monkeypatch: pytest.MonkeyPatch, target_name: str) -> None:
    target = type(get_target(target_name))
    emit = target.emit

    def corrupted(self, program, folder):  # type: ignore[no-untyped-def]
        files = emit(self, program, folder)
        CORRUPT[target_name](Path(folder))
        return files

    monkeypatch.setattr(target, "emit", corrupted)


@pytest.mark.parametrize("target", ["gati", "xdnn", "gap8"])
def test_compile_proves_the_emitted_files(target: str, tmp_path: Path, capsys) -> None:
    model, calibration = _model(target, tmp_path)
    argv = ["compile", str(model), "-t", target, "-o", str(tmp_path / "out")]
    argv += ["--calibration", str(calibration)] if calibration else []
    assert main(argv) == 0
    out = capsys.readouterr().out
    executor = get_target(target).executor
    assert f"known answer reproduced on {executor}: " in out


@pytest.mark.parametrize("target", ["gati", "xdnn", "gap8"])
def test_a_corrupted_program_is_refused_and_nothing_written(
    target: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    model, calibration = _model(target, tmp_path)
    _corrupting_emit(monkeypatch, target)
    out = tmp_path / "out"
    argv = ["compile", str(model), "-t", target, "-o", str(out)]
    argv += ["--calibration", str(calibration)] if calibration else []
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err
    assert "does not compute the simulator's answer" in err and "values differ" in err
    assert "--no-verify" in err
    assert not out.exists()

    assert main([*argv, "--no-verify"]) == 0
    captured = capsys.readouterr()
    assert "warning: --no-verify: the program was written without running it" in captured.err
    assert "known answer reproduced" not in captured.out
    assert (out / "compiled.json").is_file()


def test_the_library_call_proves_only_when_asked(tmp_path: Path, monkeypatch) -> None:
    model, calibration = _model("xdnn", tmp_path)
    x = np.load(calibration)
    _corrupting_emit(monkeypatch, "xdnn")
    graph = load_model(model)
    program, _ = compile_to(graph, "xdnn", calibration=x, out=tmp_path / "a")
    assert program.proof is None
    with pytest.raises(ProofFailed):
        compile_to(graph, "xdnn", calibration=x, out=tmp_path / "b", verify=True)
    assert not (tmp_path / "b").exists()
