"""`edgesynth gati compile | decode | run` through the `edgesynth` entry point."""

from __future__ import annotations

import itertools
import json
import struct
from pathlib import Path

import gati_mnist_models as mm
import numpy as np
import pytest

from cli_helpers import run_cli
from edgesynth.targets.gati import dwp, isa
from edgesynth.targets.gati.executor.machine import GatiMachine
from edgesynth.targets.gati.host import run_program
from edgesynth.targets.gati.plan import compile_onnx
from edgesynth.targets.gati.quantize import quantize_input
from edgesynth.targets.gati.reference import reference_forward

# compiled.json: `gati compile` is `compile -t gati`, whose manifest `edgesynth run` reads
FILES = [
    "compiled.json",
    "program.bin",
    "program.dwp",
    "report.json",
    "sample.dwp",
    "sample_expected.dwp",
]


@pytest.fixture(scope="module")
def compiled(lenet_onnx: Path, calibration: np.ndarray, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("cli")
    np.save(d / "calib.npy", calibration)
    out = d / "out"
    result = run_cli(
        "gati", *["compile", str(lenet_onnx), "--calibration", str(d / "calib.npy"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "4 layers, 16 instructions" in result.stdout
    assert f"wrote {out / 'program.bin'}" in result.stdout
    return out


def test_compile_outputs(compiled: Path, lenet_onnx: Path, calibration: np.ndarray) -> None:
    assert sorted(p.name for p in compiled.iterdir()) == FILES
    blob = (compiled / "program.bin").read_bytes()
    assert len(blob) == 16 * 32
    conv = ["START", "CONV", "TailBlock", "OutputBlock"]
    fc = ["START", "FC", "TailBlock", "OutputBlock"]
    assert [i.name for i in isa.decode_blob(blob)] == conv * 2 + fc * 2
    # the same as compiling in-process (deterministic)
    assert blob == compile_onnx(lenet_onnx, calibration).blob
    report = json.loads((compiled / "report.json").read_text())
    assert report["target"] == "gati"
    regions = report["dram"]["regions"]
    assert regions[0]["kind"] == "instructions" and regions[0]["start"] == 0
    assert all(r["start"] % 4 == 0 and r["end"] % 4 == 0 for r in regions)
    kinds = [r["kind"] for r in regions]
    assert (
        kinds.index("weights") < kinds.index("bias") < kinds.index("input") < kinds.index("output")
    )
    for a, b in itertools.pairwise(regions):
        assert a["end"] <= b["start"]
    layer = report["layers"][0]
    assert [i["name"] for i in layer["instructions"]] == [
        "START",
        "CONV",
        "TailBlock",
        "OutputBlock",
    ]
    conv = layer["instructions"][1]["fields"]
    assert (conv["IC"], conv["KN"], conv["KW"], conv["KH"], conv["IW"]) == (1, 6, 3, 3, 28)
    assert report["layers"][-1]["quant"]["quant_en"] is False
    assert report["total_cycles"] > 0
    # the stream: RESET, PAYLOAD_SIZE, INST_ORIGIN, then the blob at address 0
    packets = dwp.parse_stream((compiled / "program.dwp").read_bytes())
    assert [p.type for p in packets[:3]] == [
        dwp.META_RESET,
        dwp.META_PAYLOAD_SIZE,
        dwp.META_INST_ORIGIN,
    ]
    assert packets[3].address == 0 and packets[3].payload == blob
    assert packets[1].value == dwp.payload_bytes(packets)


def test_known_answer(compiled: Path, calibration: np.ndarray, lenet_onnx: Path) -> None:
    """sample.dwp = the first calibration image + DISPATCH; sample_expected.dwp = what the FPGA
    must send back, computed by the integer reference. The functional model reproduces it."""
    sample = (compiled / "sample.dwp").read_bytes()
    packets = dwp.parse_stream(sample)
    assert isinstance(packets[0], dwp.DwpPacket) and isinstance(packets[1], dwp.MetaPacket)
    assert packets[1].type == dwp.META_DISPATCH and packets[1].value == dwp.DISPATCH_RAH
    host = json.loads((compiled / "report.json").read_text())["host"]
    assert packets[0].address == host["input"]["address"]
    machine = GatiMachine((compiled / "program.dwp").read_bytes())
    (sent,) = machine.run([sample])
    assert dwp.encode_stream(sent) == (compiled / "sample_expected.dwp").read_bytes()
    (back,) = dwp.parse_stream((compiled / "sample_expected.dwp").read_bytes())
    assert isinstance(back, dwp.DwpPacket) and back.size == 40  # ten int32 logits
    logits = np.frombuffer(back.payload, dtype="<i4")
    prog = compile_onnx(lenet_onnx, calibration)
    ref = reference_forward(prog.model, quantize_input(calibration[:1], host["input"]["scale"]))
    assert logits.tolist() == ref[0].tolist()


def test_decode_blob_and_stream(compiled: Path) -> None:
    result = run_cli("gati", *["decode", str(compiled / "program.bin")])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "#0 @0x000000 START (opcode 0xf)" in out
    assert "#1 @0x000020 CONV (opcode 0x0)" in out
    rows = [line.split() for line in out.splitlines()]
    assert ["KW", "67:64", "3"] in rows
    assert ["IW", "13:4", "28"] in rows
    assert any(r[:2] == ["QuantScale", "108:93"] and int(r[2]) > 0 for r in rows)
    assert out.count("OutputBlock (opcode 0x2)") == 4
    result = run_cli("gati", *["decode", str(compiled / "program.dwp")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "@0x000000 META RESET        value=0x0 (0)"
    assert lines[2] == "@0x000020 META INST_ORIGIN  value=0x0 (0)"
    assert lines[3] == "@0x000030 DWP  address=0x00000000 size=512 (instructions)"
    # instruction offsets are file offsets: the blob's payload starts at 0x30 + 12
    assert "#0 @0x00003c (DRAM 0x00000000) START (opcode 0xf)" in result.stdout


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("sop", "byte offset 0x30: bad SOP 0xfffffffe"),
        ("truncate", "byte offset 0x"),
        ("misalign", "byte offset 0x38: DRAM address 0x2 is not 32-bit aligned"),
        ("opcode", "byte offset 0x3c: unknown opcode 0x5"),
    ],
)
def test_decode_rejects_malformed_streams(
    compiled: Path, tmp_path: Path, damage: str, message: str
) -> None:
    data = bytearray((compiled / "program.dwp").read_bytes())
    if damage == "sop":
        data[0x30] = 0xFE
    elif damage == "truncate":
        data = data[:-3]
        message = "truncated payload"
    elif damage == "misalign":
        struct.pack_into("<I", data, 0x38, 2)
    elif damage == "opcode":
        data[0x3C] = (data[0x3C] & 0xF0) | 0x5
    bad = tmp_path / "bad.dwp"
    bad.write_bytes(bytes(data))
    result = run_cli("gati", *["decode", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert message in result.stderr


def test_decode_rejects_malformed_blob(compiled: Path, tmp_path: Path) -> None:
    blob = bytearray((compiled / "program.bin").read_bytes())
    blob[32 * 5] = 0x0E  # instruction 5: opcode 0xE
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(blob))
    result = run_cli("gati", *["decode", str(bad)])
    assert result.exit_code == 1
    assert "byte offset 0xa0: unknown opcode 0xe" in result.stderr
    bad.write_bytes(bytes(blob[:40]))
    result = run_cli("gati", *["decode", str(bad), "--format", "blob"])
    assert result.exit_code == 1
    assert "byte offset 0x20: truncated instruction" in result.stderr


def test_run(compiled: Path, lenet_onnx: Path, eval_set, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    x = eval_set[0][:200]
    np.save(tmp_path / "x.npy", x)
    result = run_cli(
        "gati",
        *[
            "run",
            str(compiled),
            "--input",
            str(tmp_path / "x.npy"),
            "--output",
            str(tmp_path / "y.npy"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "ran 200 inputs" in result.stdout
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (200, 10) and y.dtype == np.float32
    # one row per input, the dequantized reference outputs
    report = json.loads((compiled / "report.json").read_text())
    host = report["host"]
    stream = (compiled / "program.dwp").read_bytes()
    y2, ints = run_program(stream, host, x)
    assert np.array_equal(y, y2.astype(np.float32))
    prog = compile_onnx(lenet_onnx, np.load(compiled.parent / "calib.npy"))
    ref = reference_forward(prog.model, quantize_input(x, host["input"]["scale"]))
    assert np.array_equal(ints[3], ref)
    np.testing.assert_allclose(y, ref * host["outputs"][0]["scale"], rtol=1e-6)
    assert (y.argmax(1) == mm.ort_run(lenet_onnx, x).argmax(1)).mean() >= 0.99


def test_run_errors(compiled: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "bad.npy", np.zeros((3, 28, 28), dtype=np.float32))
    y = tmp_path / "y.npy"
    result = run_cli("gati", *["run", str(compiled), "-i", str(tmp_path / "bad.npy"), "-o", str(y)])
    assert result.exit_code == 1
    assert "input has shape (3, 28, 28); the model takes (N, 1, 28, 28)" in result.stderr
    assert not y.exists()
    result = run_cli("gati", *["run", str(tmp_path), "-i", str(tmp_path / "bad.npy"), "-o", str(y)])
    assert result.exit_code == 1
    assert "program.dwp is missing" in result.stderr


def test_compile_output_folder_rules(compiled: Path, lenet_onnx: Path, tmp_path: Path) -> None:
    """A non-empty output folder is refused without --overwrite; with it, only the compiler's
    files are replaced and nothing else in the folder is touched; a failed compile changes
    nothing."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    calib = compiled.parent / "calib.npy"
    argv = ["gati", "compile", lenet_onnx, "-c", calib, "-o", out]
    result = run_cli(*argv)
    assert result.exit_code == 1
    assert f"the output folder {out} is not empty; pass --overwrite" in result.stderr
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    result = run_cli(*argv, "--overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, "mine.txt"])
    assert (out / "mine.txt").read_text() == "keep me"
    assert (out / "program.bin").read_bytes() == (compiled / "program.bin").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folders left behind
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    bad_calib = tmp_path / "c.npy"
    np.save(bad_calib, np.zeros((2, 3), dtype=np.float32))
    result = run_cli("gati", "compile", lenet_onnx, "-c", bad_calib, "-o", out, "--overwrite")
    assert result.exit_code == 1
    assert "calibration data has shape (2, 3)" in result.stderr
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_compile_refuses_integer_calibration_and_text_files(
    lenet_onnx: Path, calibration: np.ndarray, tmp_path: Path
) -> None:
    int8 = tmp_path / "int8.npy"
    np.save(int8, np.round(calibration[:4] * 127).astype(np.int8))
    result = run_cli("gati", "compile", lenet_onnx, "-c", int8, "-o", tmp_path / "o")
    assert result.exit_code == 1
    assert (
        f"{int8}: `--calibration`: calibration data is int8, but Gati takes float inputs"
        in result.stderr
    )
    text = tmp_path / "text.npy"
    text.write_text("0.1 0.2 0.3\n")
    result = run_cli("gati", "compile", lenet_onnx, "-c", text, "-o", tmp_path / "o")
    assert result.exit_code == 1
    assert "is a text file (it begins `0.1 0.2 0.3`)" in result.stderr
    assert "pickled" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["int8.npy", "text.npy"]


def test_dispatch_option(lenet_onnx: Path, compiled: Path, tmp_path: Path) -> None:
    calib = compiled.parent / "calib.npy"
    out = tmp_path / "o"
    result = run_cli(
        "gati",
        *["compile", str(lenet_onnx), "-c", str(calib), "-o", str(out), "--dispatch", "nope"],
    )
    assert result.exit_code == 1
    assert "--dispatch `nope` names no ONNX node" in result.stderr
    first_conv = json.loads((compiled / "report.json").read_text())["layers"][0]["name"]
    result = run_cli(
        "gati",
        *["compile", str(lenet_onnx), "-c", str(calib), "-o", str(out), "--dispatch", first_conv],
    )
    assert result.exit_code == 0
    host = json.loads((out / "report.json").read_text())["host"]
    assert [o["layer"] for o in host["outputs"]] == [0, 3]
    assert host["outputs"][0]["shape"] == [6, 14, 14]


def test_mounted_in_the_main_cli(compiled: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`edgesynth gati ...` through the project's entry point: same output, same exit codes."""
    from edgesynth.cli import main

    assert main(["gati", "decode", str(compiled / "program.bin")]) == 0
    assert "#0 @0x000000 START (opcode 0xf)" in capsys.readouterr().out
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x05" + bytes(31))
    assert main(["gati", "decode", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"edgesynth: error: {bad}: byte offset 0x0: unknown opcode 0x5"
