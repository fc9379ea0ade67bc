"""The functional model executes what the stream says, and refuses what makes no sense."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gati_netcheck import export_module, run_and_compare

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati import dwp, isa
from edgesynth.targets.gati.executor.machine import GatiMachine
from edgesynth.targets.gati.host import host_contract, input_streams, run_program
from edgesynth.targets.gati.plan import CompiledProgram, compile_onnx
from edgesynth.targets.gati.quantize import quantize_input


def _small_cnn():  # type: ignore[no-untyped-def]
    import torch
    import torch.nn as nn

    torch.manual_seed(3)
    return nn.Sequential(
        nn.Conv2d(2, 10, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(10, 9, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(9 * 2 * 2, 5),
    )


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[CompiledProgram, np.ndarray]:  # type: ignore[no-untyped-def]
    path = export_module(_small_cnn(), tmp_path_factory.mktemp("fs") / "s.onnx", (2, 8, 8))
    x = np.random.default_rng(0).standard_normal((40, 2, 8, 8)).astype(np.float32)
    return compile_onnx(path, x), x


def _with_blob(prog: CompiledProgram, edit) -> bytes:  # type: ignore[no-untyped-def]
    """The program stream with the instruction blob changed by `edit(list of instructions)`."""
    insts = isa.decode_blob(prog.blob)
    edit(insts)
    blob = b"".join(isa.encode_bytes(i) for i in insts)
    packets = dwp.parse_stream(prog.stream)
    out: list[dwp.Packet] = []
    for p in packets:
        if isinstance(p, dwp.DwpPacket) and p.address == 0:
            p = dwp.DwpPacket(0, blob)
        out.append(p)
    return dwp.encode_stream(out)


def _run(prog: CompiledProgram, stream: bytes, x: np.ndarray) -> np.ndarray:
    return run_program(stream, host_contract(prog), x)[0]


def test_dispatched_packets(small) -> None:  # type: ignore[no-untyped-def]
    prog, x = small
    host = host_contract(prog)
    machine = GatiMachine(prog.stream)
    xq = quantize_input(x[:3], host["input"]["scale"])
    results = machine.run(input_streams(host, xq))
    assert len(results) == 3
    for plist in results:
        assert len(plist) == 1
        (pkt,) = plist
        assert pkt.address == host["outputs"][0]["dispatch_id"]
        assert pkt.size == 20  # five int32 logits (the last layer keeps 32 bits)
    # the functional model is deterministic and batch-independent
    one = machine.run(input_streams(host, xq[1:2]))[0][0]
    assert one.payload == results[1][0].payload


def test_read_only_program_area(small) -> None:  # type: ignore[no-untyped-def]
    prog, x = small

    def output_into_weights(insts: list[isa.Instruction]) -> None:
        insts[3].fields["OutputAddr"] = insts[1]["WeightStartAddress"]

    with pytest.raises(
        EdgesynthError, match="write into the program/weight area, which is read-only"
    ):
        _run(prog, _with_blob(prog, output_into_weights), x[:2])


def test_inconsistent_instructions(small) -> None:  # type: ignore[no-untyped-def]
    prog, x = small

    def wrong_end(insts: list[isa.Instruction]) -> None:
        insts[1].fields["ImageEndAddress"] += 4

    with pytest.raises(EdgesynthError, match=r"DRAM address 0x0: image spans \d+ bytes, the layer"):
        _run(prog, _with_blob(prog, wrong_end), x[:2])

    def wrong_layer_number(insts: list[isa.Instruction]) -> None:
        insts[4].fields["LayerNumber"] = 7

    with pytest.raises(EdgesynthError, match="DRAM address 0x80: START says layer 7 of 3"):
        GatiMachine(_with_blob(prog, wrong_layer_number))

    def swapped(insts: list[isa.Instruction]) -> None:
        insts[2], insts[3] = insts[3], insts[2]

    with pytest.raises(
        EdgesynthError, match="DRAM address 0x40: expected TailBlock, found OutputBlock"
    ):
        GatiMachine(_with_blob(prog, swapped))

    def batchnorm(insts: list[isa.Instruction]) -> None:
        insts[2].fields["BNEn"] = 1

    with pytest.raises(EdgesynthError, match="BNEn is set"):
        _run(prog, _with_blob(prog, batchnorm), x[:2])


def test_accumulation_flag_is_obeyed(small) -> None:  # type: ignore[no-untyped-def]
    """The second conv has 10 input channels (2 channel iterations); without AccEn the first
    iteration's partial sums are dropped, so the result changes."""
    prog, x = small
    assert isa.decode_blob(prog.blob)[7]["ChannelItr"] == 2

    def no_acc(insts: list[isa.Instruction]) -> None:
        insts[7].fields["AccEn"] = 0

    assert not np.array_equal(_run(prog, _with_blob(prog, no_acc), x), _run(prog, prog.stream, x))


def test_stream_meta_checks(small) -> None:  # type: ignore[no-untyped-def]
    prog, _ = small
    packets = dwp.parse_stream(prog.stream)
    bad = [
        dwp.MetaPacket(dwp.META_PAYLOAD_SIZE, 12) if i == 1 else p for i, p in enumerate(packets)
    ]
    with pytest.raises(EdgesynthError, match=r"PAYLOAD_SIZE announced 12 bytes"):
        GatiMachine(dwp.encode_stream(bad))
    with pytest.raises(EdgesynthError, match="DISPATCH in the program stream"):
        GatiMachine(prog.stream + dwp.encode_meta(dwp.META_DISPATCH))
    machine = GatiMachine(prog.stream)
    host = host_contract(prog)
    good = input_streams(host, np.zeros((1, 2, 8, 8), dtype=np.int8))[0]
    with pytest.raises(EdgesynthError, match="inference 0: no META DISPATCH"):
        machine.run([good[: -dwp.META_BYTES]])
    with pytest.raises(EdgesynthError, match="outside the data area"):
        machine.run([dwp.encode_dwp(0, b"\0" * 4) + dwp.encode_meta(dwp.META_DISPATCH)])


def _mlp():  # type: ignore[no-untyped-def]
    import torch
    import torch.nn as nn

    torch.manual_seed(5)
    net = nn.Sequential(nn.Linear(50, 40), nn.Tanh(), nn.ReLU(), nn.Linear(40, 7))
    with torch.no_grad():
        net[3].bias.mul_(1e-3)  # small enough for an 8-bit bias
    return net


def test_mlp_on_vectors(tmp_path: Path) -> None:
    """A rank-2 input (vector layout, no Flatten), an activation that needs its own identity FC
    layer (Relu after Tanh), and an 8-bit bias."""
    path = export_module(_mlp(), tmp_path / "mlp.onnx", (50,))
    rng = np.random.default_rng(1)
    out = run_and_compare(
        path,
        rng.standard_normal((300, 50)).astype(np.float32),
        rng.standard_normal((200, 50)).astype(np.float32),
    )
    assert out.prog.model.input_layout == "vector"
    assert [c.engine for c in out.prog.layers] == ["fc", "fc", "fc"]
    insts = isa.decode_blob(out.prog.blob)
    assert [i["Flatten"] for i in insts[1::4]] == [0, 0, 0]
    assert [t["BiasWidth"] for t in insts[2::4]] == [32, 0, 8]
    assert out.rel_error < 0.05
    assert (out.y.argmax(1) == out.y_ort.argmax(1)).mean() > 0.95
