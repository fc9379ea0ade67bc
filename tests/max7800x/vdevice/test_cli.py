"""`edgesynth device decode | run`: the command layer and its plain functions."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.vdevice import cli, commands
from edgesynth.targets.max7800x.vdevice.knownanswer import load_kat, parse_sampleoutput
from edgesynth.targets.max7800x.vdevice.trace import PHASES, read_trace

CASES = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "cases"
MNIST = CASES / "MAX78000" / "mnist"

pytestmark = pytest.mark.corpus


def _sampleoutput(kat_path: Path) -> str:
    """sampleoutput.h text for a kat.npz: { addr, mask, length, words..., 0 }."""
    with np.load(kat_path) as kat:
        values: list[int] = []
        start = 0
        for a, m, n in zip(kat["addr"], kat["mask"], kat["length"], strict=True):
            values += [int(a), int(m), int(n)] + [int(v) for v in kat["data"][start : start + n]]
            start += int(n)
    body = ", ".join(f"0x{v:08x}" for v in [*values, 0])
    return f"#define SAMPLE_OUTPUT {{ \\\n  {body} \\\n}}\n"


def test_decode_names_registers_and_fields():
    text = commands.decode_trace(MNIST / "trace.bin")  # device detected from the trace
    assert text.startswith("device MAX78000")
    assert "LCTRL0" in text and "act_en=1" in text and "mcnt_max=472" in text
    assert "processor  0: words 0-59, 128-146" in text  # layers 0 and 4; 146: block padding
    assert "bias memory" in text


def test_run_writes_output_and_layers(tmp_path):
    report = commands.run_device(
        trace=MNIST / "trace.bin",
        device="MAX78000",
        kat=MNIST / "kat.npz",
        output=tmp_path / "out.npy",
        layers=tmp_path / "layers",
    )
    assert report.ok
    assert any("all 10 words match" in line for line in report.lines)
    assert np.array_equal(np.load(tmp_path / "out.npy"), np.load(MNIST / "expected_output.npy"))
    saved = sorted(p.name for p in (tmp_path / "layers").iterdir())
    assert saved == [f"layer{i:02d}.npy" for i in range(5)]
    assert np.load(tmp_path / "layers" / "layer00.npy").shape == (60, 28, 28)


def test_mismatch_fails_with_the_layer(tmp_path):
    with np.load(MNIST / "kat.npz") as kat:
        arrays = {k: kat[k].copy() for k in kat}
    arrays["data"][0] ^= 1
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    report = commands.run_device(trace=MNIST / "trace.bin", kat=bad)
    assert not report.ok
    assert any("1 of 10 words differ" in line and "layer 4" in line for line in report.lines)


def test_sampleoutput_header_equals_kat(tmp_path):
    header = tmp_path / "sampleoutput.h"
    header.write_text(_sampleoutput(MNIST / "kat.npz"))
    a, b = parse_sampleoutput(header), load_kat(MNIST / "kat.npz")
    for name in ("addr", "mask", "expected"):
        assert np.array_equal(getattr(a, name), getattr(b, name))


def test_sampleoutput_header_errors(tmp_path):
    header = tmp_path / "sampleoutput.h"
    header.write_text("#define SAMPLE_OUTPUT { 0x50400000, 0xffffffff, 0x00000003, 0x1, 0 }\n")
    with pytest.raises(EdgesynthError, match="announces 3 words"):
        parse_sampleoutput(header)


def test_argparse_registration_and_exit_status(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="edgesynth")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["device", "run", "--trace", str(MNIST / "trace.bin")])
    assert args.handler(args) == 0
    assert "5 layers run" in capsys.readouterr().out
    from edgesynth.cli import main

    assert main(["device", "run", "--trace", str(tmp_path / "missing.bin")]) == 1
    assert "cannot read the trace" in capsys.readouterr().err
    assert main(["device", "run"]) == 2  # neither a project nor --trace: a usage error
    assert "give either a project folder or --trace TRACE" in capsys.readouterr().err


def _project_from_trace(trace_path: Path, folder: Path) -> None:
    """A C project whose cnn_* functions make exactly the writes of a trace, phase by phase."""
    trace = read_trace(trace_path)
    folder.mkdir()
    lines = ["#include <stdint.h>", "int cnn_enable(uint32_t s, uint32_t d) { return 0; }"]
    for index, phase in enumerate(PHASES[1:-1], start=1):
        signature = "void load_input(void)" if phase == "load_input" else f"int {phase}(void)"
        lines.append(signature + " {")
        keep = trace.phase == index
        for a, v in zip(trace.addr[keep].tolist(), trace.value[keep].tolist(), strict=True):
            lines.append(f"  *((volatile uint32_t *) 0x{a:08x}) = 0x{v:08x};")
        lines.append("  return;" if phase == "load_input" else "  return 0;")
        lines.append("}")
    (folder / "cnn.c").write_text("\n".join(lines) + "\n")
    (folder / "main.c").write_text("int main(void) { return 0; }\n")


def test_project_folder_is_recorded_and_checked(tmp_path):
    needs.devtrace()
    project = tmp_path / "mnist"
    _project_from_trace(MNIST / "trace.bin", project)
    (project / "sampleoutput.h").write_text(_sampleoutput(MNIST / "kat.npz"))
    report = commands.run_device(project=project, output=tmp_path / "out.npy")
    assert report.ok, report.lines
    assert any("all 10 words match" in line for line in report.lines)
    assert np.array_equal(np.load(tmp_path / "out.npy"), np.load(MNIST / "expected_output.npy"))


def test_project_folder_needs_cnn_c(tmp_path):
    with pytest.raises(EdgesynthError, match=r"no cnn\.c"):
        commands.run_device(project=tmp_path)


def test_wired_into_the_edgesynth_command_line(capsys):
    """`edgesynth device ...` through the one command line."""
    import edgesynth.cli as top

    code = top.run(
        ["device", "run", "--trace", str(MNIST / "trace.bin"), "--kat", str(MNIST / "kat.npz")]
    )
    assert code == 0
    assert "all 10 words match" in capsys.readouterr().out
    assert top.run(["device", "decode", str(MNIST / "trace.bin"), "--no-memories"]) == 0
    assert "layers run, as the registers say" in capsys.readouterr().out
