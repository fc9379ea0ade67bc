"""`edgesynth compile` proves what it writes before moving it into place: the emitted files run
on the target's executor (the Gati and xDNN functional models, the host build of the gap8 C)
must compute what the program's integer graph computes. A program corrupted after it was
emitted is refused with one message and no output folder; `--no-verify` writes it, warned."""

from __future__ import annotations

import dataclasses
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


# -- the executors decode with their own tables: a field the encoder misplaces is noticed -----


@pytest.fixture
def move_field():  # type: ignore[no-untyped-def]
    """`move(table, field_name)`: the encoder's field moves up one bit in its (frozen) table,
    everywhere the table is referenced, as a wrong bit position typed into the encoder would;
    restored afterwards."""
    saved: list[tuple[object, str, object]] = []

    def move(table: object, name: str) -> None:
        old = table.fields  # type: ignore[attr-defined]
        assert name in {f.name for f in old}, name
        new = tuple(dataclasses.replace(f, lsb=f.lsb + 1) if f.name == name else f for f in old)
        for attr, value in (("fields", new), ("by_name", {f.name: f for f in new})):
            if attr in vars(table):
                saved.append((table, attr, getattr(table, attr)))
                object.__setattr__(table, attr, value)

    yield move
    for table, attr, value in reversed(saved):
        object.__setattr__(table, attr, value)


def _gati_table(name: str) -> object:
    from edgesynth.targets.gati import isa

    return isa.FORMATS_BY_NAME[name]


def _xdnn_table(name: str) -> object:
    from edgesynth.targets.xdnn import regmap

    return regmap.BY_NAME[name]


# (target, instruction or register, field, whether the program still runs, to other values).
# Each of these went unnoticed while the executors decoded with the encoder's tables.
MISPLACED = [
    ("gati", "TailBlock", "QuantScale", True),  # read back as twice the scale
    ("gati", "TailBlock", "BiasStartAddress", False),  # the bias region comes out empty
    ("gati", "CONV", "WeightEndAddress", False),  # the weight region no longer fits the layer
    ("gati", "CONV", "KN", False),  # the filter count no longer matches KernelItr
    ("gati", "OutputBlock", "DispatchID", False),  # the output comes back under another id
    ("gati", "START", "TotalLayers", False),  # a bit past the program's last layer is read
    ("xdnn", "GEOMETRY", "dilation_h", True),  # read back as dilation 2
    ("xdnn", "CNN_COMMAND", "per_channel", True),  # read back as global scale/shift/bias
    ("xdnn", "IMEM_OUT_ADDR", "out_addr", False),  # outputs land at twice the address
    ("xdnn", "IN_SIZE", "in_h", False),  # the download asks for images twice as high
    ("xdnn", "OUT_SIZE", "out_w", False),  # an output width the input cannot give
    ("xdnn", "QUANT_OFFSET", "quant_offset", False),  # quantizer blocks past filters.bin
    ("xdnn", "BIAS_VALUE", "bias", False),  # a negative bias spills into reserved bits
]


@pytest.mark.parametrize(
    ("target", "table", "field", "runs"), MISPLACED, ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_field_misplaced_in_the_encoder_is_noticed_by_the_proof(
    target: str, table: str, field: str, runs: bool, tmp_path: Path, move_field, capsys
) -> None:
    """The executor's decoder has its own field table: moving one field of the encoder's table
    by one bit makes the emitted program compute something else (or nothing), and compile
    refuses it. The same program with the encoder's table untouched is proved."""
    model, calibration = _model(target, tmp_path)
    argv = ["compile", str(model), "-t", target, "--calibration", str(calibration)]
    assert main([*argv, "-o", str(tmp_path / "good")]) == 0
    assert "known answer reproduced" in capsys.readouterr().out
    move_field((_gati_table if target == "gati" else _xdnn_table)(table), field)
    out = tmp_path / "out"
    assert main([*argv, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err, err
    assert "internal error" not in err, err
    if runs:
        assert "does not compute the simulator's answer" in err, err
    assert not out.exists()
