"""Code generation pieces on their own: C array formatting, the kernel loader's packing, the
trace format, and refusals that only code generation finds (one message, no folder left)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import needs
from edgesynth.cli import main
from edgesynth.targets.max7800x.device import MAX78000, MAX78002
from edgesynth.targets.max7800x.emit.carrays import define
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.plan.kernel_loader import kernel_blocks
from edgesynth.targets.max7800x.plan.kernels import FREE, KernelMemory
from edgesynth.targets.max7800x.plan.trace import MARKER, read_trace


def _parse(text: str) -> list[int]:
    body = text[text.index("{") + 1 : text.rindex("}")]
    return [int(v, 16) for v in re.findall(r"0x[0-9a-f]+", body)]


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=200),
    per_line=st.integers(1, 16),
)
def test_c_initializer_round_trip(values: list[int], per_line: int) -> None:
    text = define("X", np.array(values, dtype=np.uint64), 8, per_line)
    assert text.startswith("#define X { \\\n")
    assert _parse(text) == values
    # every line but the last ends with a continuation
    assert all(line.endswith("\\") for line in text.splitlines()[:-1])


@settings(max_examples=40, deadline=None)
@given(
    device=st.sampled_from([MAX78000, MAX78002]),
    runs=st.lists(
        st.tuples(st.integers(0, 63), st.integers(0, 700), st.integers(1, 60)),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**16),
    mexpress=st.booleans(),
)
def test_kernel_loader_blocks_decode_to_the_memory_image(device, runs, seed, mexpress) -> None:
    """Every used kernel word appears once, at its address, with its 9 bytes in order."""
    chip = Chip.of(device)
    width = chip.regs.mask_width_large
    owner = np.full((chip.max_proc, width), FREE, dtype=np.int32)
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(chip.max_proc, width, 9), dtype=np.uint8)
    for layer, (p, start, length) in enumerate(runs):
        owner[p, start : start + length] = layer
    memory = KernelMemory(owner=owner, data=data)
    stride = chip.regs.mask_stride
    seen: dict[tuple[int, int], np.ndarray] = {}
    for block in kernel_blocks(memory, chip, mexpress, zero_sram=False):
        if mexpress:
            base = block.address & ~(stride - 1)
            start_word = (block.address & (stride - 1)) // 4  # the address counter: word index
            flat = block.words.astype(">u4").view(np.uint8)
            count = block.length * 4 // 9
            kernels = flat[: count * 9].reshape(count, 9)
            assert not flat[count * 9 :].any()  # padding of the last word
        else:
            base = block.address & ~(stride - 1)
            start_word = (block.address & (stride - 1)) // 16
            w = block.words.reshape(-1, 4).astype(np.uint64)
            assert not w[:, 3].any()  # the fourth word of each kernel executes the write
            kernels = np.stack(
                [w[:, 0]]
                + [(w[:, 1] >> s) & 0xFF for s in (24, 16, 8, 0)]
                + [(w[:, 2] >> s) & 0xFF for s in (24, 16, 8, 0)],
                axis=1,
            ).astype(np.uint8)
        offset = base - chip.regs.apb_base - chip.regs.mram_base
        group, rest = divmod(offset, chip.regs.group_stride)
        processor = group * chip.per_group + rest // stride
        for i, k in enumerate(kernels):
            key = (processor, start_word + i)
            assert key not in seen
            seen[key] = k
    used = {(int(p), int(c)) for p, c in zip(*np.nonzero(owner != FREE), strict=True)}
    assert set(seen) == used
    for (p, c), k in seen.items():
        np.testing.assert_array_equal(k, data[p, c])


def test_trace_phases(tmp_path: Path) -> None:
    records = [MARKER, 0, MARKER + 1, 0, 0x50001000, 0, MARKER + 2, 0, 1, 2, 3, 4]
    for i in range(3, 8):
        records += [MARKER + i, 0]
    path = tmp_path / "t.trace"
    np.array(records, dtype="<u4").tofile(path)
    phases = read_trace(path)
    assert [p.shape[0] for p in phases] == [0, 1, 2, 0, 0, 0, 0]
    assert phases[2].tolist() == [[1, 2], [3, 4]]


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "tests").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write_network(root: Path, layers: str, weights: list[np.ndarray], sample: np.ndarray) -> None:
    (root / "net.yaml").write_text(
        "arch: test\ndataset: t\nlayers:\n" + textwrap.indent(textwrap.dedent(layers), "  ")
    )
    np.save(root / "tests" / "sample_t.npy", sample.astype(np.int64))
    with open(root / "tests" / "weights_t.npy", "wb") as f:
        for w in weights:
            np.save(f, w.astype(np.int64))


def test_kernel_memory_fragmentation_is_refused_by_name(project: Path, capsys) -> None:
    """Every processor has room for its layers' kernels in total (the device rules pass), but
    the last layer finds no run of 320 columns free in both its processors: only the kernel
    allocator can tell. One message naming the file and layer; no project folder."""
    rng = np.random.default_rng(0)

    def w(out: int) -> np.ndarray:
        return rng.integers(-100, 100, size=(out, 2, 3, 3))

    # MAX78000, 768 kernel words per processor. Layer 0 (processors 1, 2) takes columns
    # 0-299, layer 1 (processors 0, 1) 300-719; layer 2 (processors 0, 2) needs 320 columns:
    # processor 0 has 300 + 48 free, processor 2 has 468 free, no common run of 320.
    _write_network(
        project,
        """
        - {processors: 0x6, output_processors: 0x0fffffffffffffff, out_offset: 0x4000,
           op: conv2d, pad: 1}
        - {processors: 0x3, output_processors: 0x0fffffffffffffff, in_offset: 0,
           out_offset: 0x4000, op: conv2d, pad: 1, in_sequences: [input]}
        - {processors: 0x5, output_processors: 0xffffffffffffffff, in_offset: 0,
           out_offset: 0x4000, op: conv2d, pad: 1, in_sequences: [input]}
        """,
        [w(300), w(400), w(320)],
        rng.integers(-50, 50, size=(2, 4, 4)),
    )
    status = main(
        [
            "izer",
            "--device",
            "MAX78000",
            "--config-file",
            "net.yaml",
            "--test-dir",
            "out",
            "--prefix",
            "p",
            "--sample-numpy-filename",
            "kat",
        ]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err
    assert "net.yaml" in err and "layer 2" in err and "kernel memory exhausted" in err
    assert not (project / "out").exists()


def _two_conv_layers(project: Path, seed: int) -> None:
    """Two 3x3 convolutions (2 -> 4 -> 4 channels, 4x4) with random weights and sample."""
    rng = np.random.default_rng(seed)
    _write_network(
        project,
        """
        - {processors: 0x3, output_processors: 0xf, out_offset: 0x2000, op: conv2d, pad: 1}
        - {processors: 0xf, output_processors: 0xf, out_offset: 0x0, op: conv2d, pad: 1}
        """,
        [rng.integers(-100, 100, size=(4, 2, 3, 3)), rng.integers(-100, 100, size=(4, 4, 3, 3))],
        rng.integers(-50, 50, size=(2, 4, 4)),
    )


@pytest.mark.parametrize("unload", [True, False])
def test_no_unload_leaves_cnn_unload_declared_but_not_defined(
    project: Path, capsys, unload: bool
) -> None:
    """As the vendor's tool: with --no-unload, cnn.h still declares cnn_unload() but cnn.c
    does not define it and main.c does not call it."""
    _two_conv_layers(project, seed=1)
    argv = ["izer", "--device", "MAX78000", "--config-file", "net.yaml"]
    argv += ["--test-dir", "out", "--prefix", "p", *([] if unload else ["--no-unload"])]
    assert main(argv) == 0
    capsys.readouterr()
    folder = project / "out" / "p"
    assert "int cnn_unload(uint32_t *out_buf);" in (folder / "cnn.h").read_text()
    assert ("int cnn_unload(uint32_t *out_buf)\n{" in (folder / "cnn.c").read_text()) == unload
    assert ("cnn_unload(" in (folder / "main.c").read_text()) == unload


def test_fixed_input_loads_a_pattern_instead_of_the_sample(project: Path, capsys) -> None:
    """As the vendor's tool: --fixed-input drops the sample arrays, defines memcpy32_const()
    (0x55555555, 0xaaaaaaaa, ...) in cnn.c and calls it per input block; the project builds."""
    _two_conv_layers(project, seed=2)
    argv = ["izer", "--device", "MAX78000", "--config-file", "net.yaml"]
    assert main([*argv, "--test-dir", "out", "--prefix", "p", "--fixed-input"]) == 0
    capsys.readouterr()
    folder = project / "out" / "p"
    assert "SAMPLE_INPUT" not in (folder / "sampledata.h").read_text()
    assert "void memcpy32_const(uint32_t *dst, int n)\n{" in (folder / "cnn.c").read_text()
    assert "memcpy32_const((uint32_t *) 0x50400000, 16);" in (folder / "main.c").read_text()
    from edgesynth.targets.max7800x.commands.firmware import build_project

    needs.tool("arm-none-eabi-gcc")
    build_project(folder)
