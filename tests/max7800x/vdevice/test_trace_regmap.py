"""Trace files, the address map and register fields."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.vdevice import regmap
from edgesynth.targets.max7800x.vdevice.regmap import MAPS, MAX78000_MAP, MAX78002_MAP, classify
from edgesynth.targets.max7800x.vdevice.trace import (
    MARKER_BASE,
    PHASES,
    from_pairs,
    read_trace,
    to_bytes,
)


def test_phases_follow_markers(tmp_path):
    pairs = np.array(
        [
            [MARKER_BASE + 0, 0],
            [MARKER_BASE + 1, 0],
            [0x50100000, 8],
            [MARKER_BASE + 5, 0],
            [0x50400000, 0x01020304],
            [0x50400004, 5],
            [MARKER_BASE + 7, 0],
        ],
        dtype="<u4",
    )
    path = tmp_path / "t.bin"
    path.write_bytes(pairs.tobytes())
    trace = read_trace(path)
    assert trace.addr.tolist() == [0x50100000, 0x50400000, 0x50400004]
    assert [PHASES[p] for p in trace.phase] == ["cnn_init", "load_input", "load_input"]
    assert len(trace.in_phase("load_input")) == 2


def test_trace_round_trip():
    pairs = np.array([[MARKER_BASE + 2, 0], [0x50180000, 0x100], [0x50180000, 7]], dtype="<u4")
    trace = from_pairs(pairs)
    again = from_pairs(np.frombuffer(to_bytes(trace), dtype="<u4").reshape(-1, 2))
    assert again.addr.tolist() == trace.addr.tolist()
    assert again.value.tolist() == trace.value.tolist()
    assert again.phase.tolist() == trace.phase.tolist()


def test_truncated_trace_is_refused(tmp_path):
    path = tmp_path / "bad.bin"
    path.write_bytes(b"\x00" * 12)
    with pytest.raises(EdgesynthError, match="multiple of 8"):
        read_trace(path)


@pytest.mark.parametrize(
    ("dmap", "address", "region", "group", "index", "offset"),
    [
        # MAX78000: control, layer registers (register-major), memories (seed 000 tables)
        (MAX78000_MAP, 0x50100000, regmap.GLOBAL, 0, -1, 0x0),
        (MAX78000_MAP, 0x50D00008, regmap.GLOBAL, 3, -1, 0x8),
        (MAX78000_MAP, 0x50100010 + 0x80 * 15 + 4 * 7, regmap.LAYER, 0, 7, 15),  # POST, layer 7
        (MAX78000_MAP, 0x50508004, regmap.BIAS, 1, -1, 1),
        (MAX78000_MAP, 0x50184010, regmap.MRAM, 0, 1, 0x10),
        (MAX78000_MAP, 0x50C18004, regmap.SRAM, 2, 11, 1),
        (MAX78000_MAP, 0x51000000, regmap.SRAM, 3, 12, 0),
        (MAX78000_MAP, 0x5000000C, regmap.FIFO_DATA, -1, 1, -1),
        (MAX78000_MAP, 0x400C0410, regmap.FAST_FIFO, -1, -1, 4),
        # MAX78002: layer-major registers, separate stream registers
        (MAX78002_MAP, 0x51000000, regmap.GLOBAL, 0, -1, 0x0),
        (MAX78002_MAP, 0x52100000 + 0x100 * 9 + 4 * 19, regmap.LAYER, 1, 9, 19),
        (MAX78002_MAP, 0x51108024, regmap.STREAM, 0, 1, 1),
        (MAX78002_MAP, 0x51108060, regmap.GLOBAL, 0, -1, 0x108060),  # IFRM
        (MAX78002_MAP, 0x51820004, regmap.SRAM, 0, 1, 1),
        (MAX78002_MAP, 0x51420000, regmap.MRAM, 0, 1, 0),
    ],
)
def test_classify(dmap, address, region, group, index, offset):
    c = classify(dmap, np.array([address]))
    assert int(c.region[0]) == region, regmap.REGION_NAMES[int(c.region[0])]
    if group >= 0:
        assert int(c.group[0]) == group
    if index >= 0:
        assert int(c.index[0]) == index
    if offset >= 0:
        assert int(c.offset[0]) == offset


def test_register_addresses_round_trip():
    for dmap in MAPS.values():
        for reg in dmap.layer_regs:
            for group, layer in ((0, 0), (3, dmap.max_layers - 1), (2, 5)):
                address = dmap.layer_reg_address(group, layer, reg.name)
                c = classify(dmap, np.array([address]))
                assert (int(c.region[0]), int(c.group[0]), int(c.index[0])) == (
                    regmap.LAYER,
                    group,
                    layer,
                ), (dmap.name, reg.name)
                assert int(c.offset[0]) == reg.index


@given(st.integers(0, 2**32 - 1))
def test_fields_decode_every_bit_once(value):
    for dmap in MAPS.values():
        for reg in (*dmap.layer_regs, *dmap.global_regs.values()):
            rebuilt = 0
            for f in reg.fields:
                rebuilt |= f.get(value) << f.lsb
            covered = 0
            for f in reg.fields:
                covered |= ((1 << f.width) - 1) << f.lsb
            assert rebuilt == value & covered, reg.name


def test_fields_do_not_overlap():
    for dmap in MAPS.values():
        for reg in (*dmap.layer_regs, *dmap.global_regs.values(), *dmap.stream_regs):
            seen = 0
            for f in reg.fields:
                bits = ((1 << f.width) - 1) << f.lsb
                assert not seen & bits, f"{dmap.name} {reg.name}.{f.name} overlaps"
                assert f.lsb + f.width <= 32
                seen |= bits


def test_every_fact_names_its_source():
    sources = {regmap.UG, regmap.TC, regmap.BE, regmap.SEED, regmap.INF}
    for dmap in MAPS.values():
        assert dmap.sources
        for reg in (*dmap.layer_regs, *dmap.global_regs.values(), *dmap.stream_regs):
            assert set(reg.source.split("+")) <= sources
            for f in reg.fields:
                assert set(f.source.split("+")) <= sources
