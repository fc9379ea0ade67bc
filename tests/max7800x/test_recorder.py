"""edgesynth's recorder (targets/max7800x/recorder/) on small hand-written projects: what it
records, what it completes, what it refuses. The corpus comparison with the reference recorder
is in tests/conformance/test_codegen_corpus.py."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x import regmap as rm
from edgesynth.targets.max7800x.recorder import mapgen
from edgesynth.targets.max7800x.recorder.record import record_project
from edgesynth.targets.max7800x.vdevice.trace import MARKER_BASE, PHASES


def needs_cc(test: Callable[..., None]) -> Callable[..., None]:
    """The test compiles with the host's C compiler: without gcc it fails with the apt line."""

    @functools.wraps(test)
    def checked(*args: object, **kwargs: object) -> None:
        needs.tool("gcc")
        test(*args, **kwargs)

    return checked


M0, M2 = rm.MAX78000_MAP, rm.MAX78002_MAP


def _project(folder: Path, body: dict[str, list[str]], device: str = "MAX78000") -> Path:
    """A project whose cnn_* functions hold the given C lines (the rest do nothing)."""
    folder.mkdir()
    lines = [
        f"/* test project ({device}) */",
        '#include "mxc.h"',
        "int cnn_enable(uint32_t s, uint32_t d) { (void) s; (void) d; return 0; }",
    ]
    for phase in PHASES[1:-1]:
        void = phase == "load_input"
        lines.append(("void " if void else "int ") + phase + "(void) {")
        lines += [f"  {line}" for line in body.get(phase, [])]
        lines.append("  return;" if void else "  return 0;")
        lines.append("}")
    (folder / "cnn.c").write_text("\n".join(lines) + "\n")
    (folder / "main.c").write_text("int main(void) { return 0; }\n")
    return folder


def _records(trace: Path) -> list[tuple[int, int]]:
    pairs = np.fromfile(trace, dtype="<u4").reshape(-1, 2)
    return [(int(a), int(v)) for a, v in pairs]


def _store(address: int, value: int, width: int = 32) -> str:
    return f"*((volatile uint{width}_t *) 0x{address:08x}) = 0x{value:x};"


def test_the_window_covers_every_register_and_memory_of_both_devices() -> None:
    start, end = mapgen.accelerator_window()
    for m in (M0, M2):
        for g in range(4):
            for address in (m.ctl(g, 0), m.bias(g), m.tram(g, 15), m.kernel(16 * g + 15)):
                assert start <= m.apb_base + address < end
            last_data = m.data(g) + 16 * m.instance_size * 4 - 4
            assert start <= m.apb_base + last_data < end


def test_the_header_carries_the_phase_markers_and_the_clear_rule() -> None:
    text = mapgen.header("MAX78002", 120_000_000)
    for i, phase in enumerate(PHASES):
        assert f"#define REC_MARK_{phase.upper()} 0x{MARKER_BASE + i:08x}u" in text
    clear = M2.apb_base + M2.ctl(0, rm.REG_SRAM_TEST)
    assert f"{{0x{clear:08x}u, 0x{M2.bist_zero:08x}u, 0x{M2.bist_zero_wait:08x}u}}" in text
    assert "clear" not in mapgen.header("MAX78000", 100_000_000)  # no register clear there


@needs_cc
def test_records_every_store_in_order_with_phase_markers(tmp_path: Path) -> None:
    base = M0.apb_base
    fifo = base + rm.FIFO_DATA
    byte = base + M0.data(0) + 0x10
    project = _project(
        tmp_path / "p",
        {
            "cnn_init": [_store(base + M0.ctl(0, 0), 0x8), "MXC_GCR->pclkdis0 = 1;"],
            "cnn_load_bias": [_store(byte + 1, 0xAB, 8), _store(byte + 3, 0xCD, 8)],
            "load_input": [_store(fifo, 0x55), _store(fifo, 0x55)],  # the same value twice
            "cnn_start": [_store(rm.FAST_FIFO_BASE_ADDRESS + rm.FAST_FIFO_DR, 7)],
        },
    )
    trace = tmp_path / "t.bin"
    record_project(project, trace)
    marks = {name: MARKER_BASE + i for i, name in enumerate(PHASES)}
    assert _records(trace) == [
        (marks["cnn_enable"], 0),
        (marks["cnn_init"], 0),
        (base + M0.ctl(0, 0), 0x8),  # the peripheral store (MXC_GCR) is not recorded
        (marks["cnn_load_weights"], 0),
        (marks["cnn_load_bias"], 0),
        (byte, 0xAB00),  # a byte store records the word that holds it
        (byte, 0xCD00AB00),
        (marks["cnn_configure"], 0),
        (marks["load_input"], 0),
        (fifo, 0x55),
        (fifo, 0x55),
        (marks["cnn_start"], 0),
        (rm.FAST_FIFO_BASE_ADDRESS + rm.FAST_FIFO_DR, 7),
        (marks["end"], 0),
    ]


@needs_cc
def test_a_store_that_changes_several_words_records_each(tmp_path: Path) -> None:
    """memset over accelerator memory: the stored word first, then the page's other changed
    words in address order (a libc memset may store 16 bytes at once)."""
    tram = M0.apb_base + M0.tram(0, 0)
    project = _project(
        tmp_path / "p",
        {"cnn_init": [f"memset((void *) 0x{tram:08x}, 0xff, 64);"]},
    )
    trace = tmp_path / "t.bin"
    record_project(project, trace)
    written = {a: v for a, v in _records(trace) if a < MARKER_BASE}
    assert written == {tram + 4 * i: 0xFFFFFFFF for i in range(16)}


@needs_cc
def test_waits_of_cnn_init_complete(tmp_path: Path) -> None:
    """The MAX78002 register clear and a memory self-test finish at once, as on the chip."""
    control = M2.apb_base + M2.ctl(1, rm.REG_SRAM_TEST)
    start, done, error = M2.bist["Data SRAM"]
    project = _project(
        tmp_path / "p",
        {
            "cnn_init": [
                _store(control, M2.bist_zero),
                f"while ((*((volatile uint32_t *) 0x{control:08x}) & 0x{M2.bist_zero_wait:x})"
                f" != 0x{M2.bist_zero_wait:x});",
                _store(control, start),
                f"while ((*((volatile uint32_t *) 0x{control:08x}) & 0x{done:x}) != 0x{done:x});",
                f"if (*((volatile uint32_t *) 0x{control:08x}) & 0x{error:x}) return 1;",
                _store(control, 0),
            ]
        },
        device="MAX78002",
    )
    (project / "Makefile").write_text("TARGET ?= MAX78002\n")
    trace = tmp_path / "t.bin"
    record_project(project, trace, timeout=60)
    written = [(a, v) for a, v in _records(trace) if a < MARKER_BASE]
    assert written == [(control, M2.bist_zero), (control, start), (control, 0)]


@needs_cc
def test_a_store_outside_the_device_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", {"cnn_init": [_store(0x60000000, 1)]})
    with pytest.raises(EdgesynthError, match="outside the device's memory map"):
        record_project(project, tmp_path / "t.bin")


def test_no_c_compiler_is_one_line_naming_the_package(tmp_path: Path, monkeypatch) -> None:
    project = _project(tmp_path / "p", {})
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.delenv("EDGESYNTH_DEVTRACE", raising=False)
    result = run_cli("device", "run", str(project))
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "apt-get install gcc" in result.stderr


@needs_cc
def test_a_project_that_does_not_compile_is_refused_with_the_compiler_message(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path / "p", {"cnn_init": ["this is not C;"]})
    with pytest.raises(
        EdgesynthError, match=r"compiling the project for the recorder failed: .*error"
    ):
        record_project(project, tmp_path / "t.bin")
    assert not (tmp_path / "t.bin").exists()
