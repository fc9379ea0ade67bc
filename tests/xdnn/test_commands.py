"""The XN* command readers on ml-suite's own files: every command, every field by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import commands
from edgesynth.targets.xdnn.cli import decode_file


def test_cmd_file_every_command_by_name(mlsuite: Path) -> None:
    prog = commands.read_program(mlsuite / "googlenet_v1_28.cmd")
    ops = [c.op for c in prog.commands]
    assert (ops.count("XNConv"), ops.count("XNMaxPool"), ops.count("XNAvgPool")) == (57, 13, 1)
    first = prog.commands[0]
    assert first.id == 2 and first.name == "conv1/7x7_s2"
    assert first.int("kernel_w") == 7 and first.int("strides_h") == 2
    assert (first.int("preshift"), first.int("scale"), first.int("postshift")) == (16, 26, 2)
    assert (first.int("inaddr"), first.int("outaddr"), first.int("outchan")) == (0, 0x70000, 64)
    avg = next(c for c in prog.commands if c.op == "XNAvgPool")
    assert avg.int("fcmode") == 1 and avg.int("kernel_h") == 7 and avg.int("outsize_w") == 1
    # the long-form templates of the file are read too
    assert "XNConv" in prog.templates and prog.templates["XNConv"][0][0] == "name"
    assert len([n for n in prog.notes if n.op == "XNConcat"]) == 9


def test_compiler_json_agrees_with_the_cmd_file(mlsuite: Path) -> None:
    cmd = commands.read_program(mlsuite / "googlenet_v1_28.cmd").commands
    js = commands.read_program(mlsuite / "googlenet_v1_28.json").commands
    assert [c.op for c in js] == ["XNGather"] + [c.op for c in cmd] + ["XNScatter"]
    keys = ("kernel_w", "kernel_h", "strides_w", "inaddr", "insize_h", "inchan", "outaddr")
    for a, b in zip(cmd, js[1:-1], strict=True):
        assert a.name == b.name
        for k in keys:
            if b.get(k) is not None:
                assert a.get(k) == b.get(k), (a.name, k)
    gather = js[0]
    assert gather.fields["uram_dest"] == 0 and gather.int("end_row") == 223
    assert gather.fields["srcAddrReadFromImgQ"] == 1
    assert js[-1].int("outchan") == 1024


def test_long_form_lines_round_trip(mlsuite: Path) -> None:
    for c in commands.read_program(mlsuite / "googlenet_v1_28.json").commands:
        again = commands.parse_line(c.format())
        assert (again.id, again.op, again.fields) == (c.id, c.op, c.fields)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("7 XNConv conv1 7 2 16\n", "XNConv with 4 fields fits no known layout"),
        ("x XNConv a\n", "the command id must be a number"),
        ("3 XNFoo 1 2\n", "unknown operation 'XNFoo'"),
        ("# ok\n\n5 XNMaxPool p 3 2 0 0x0 7 64 notanaddr 3\n", "XNMaxPool with 9 fields"),
    ],
)
def test_malformed_lines_are_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(EdgesynthError, match=message) as err:
        commands.parse_cmd(text, "bad.cmd")
    assert "bad.cmd:" in str(err.value)


def test_decode_cli_text(mlsuite: Path) -> None:
    text = decode_file(mlsuite / "googlenet_v1_28.cmd")
    assert "conv1/7x7_s2" in text and "outaddr" in text and "XNConcat" in text
    with pytest.raises(EdgesynthError, match="quantization file"):
        decode_file(mlsuite / "googlenet_v1_8b.json")
