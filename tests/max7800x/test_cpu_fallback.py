"""Networks the MAX7800x accelerator cannot finish: the rest runs on the Cortex-M4 (issue 25).

Small float graphs built operator by operator (random weights, no training): the graph splits
at the first operator the accelerator cannot run, the generated cpu_part.c built for this PC
equals the CPU part's simulator value for value, the project cross-compiles for the Cortex-M4
with -Wall -Wextra -Werror, and bad input is refused with one message naming the node or the
tensor. (The trained MNIST classifier: test_cpu_fallback_mnist.py.)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import needs
from cpu_graphs import head_graph
from edgesynth.errors import EdgesynthError
from edgesynth.flow import compile_to
from edgesynth.ir import graph as g
from edgesynth.targets.max7800x.cpu.simulate import simulate

CC = shutil.which("gcc") or "gcc"


def mid_graph(activation: str) -> g.Graph:
    """Conv(1->4) -> ReLU -> MaxPool 2 (the accelerator), then `activation`, Conv(4->6, 3x3,
    pad 1) -> ReLU -> AvgPool 2 -> Conv(6->8, 1x1, groups 2) -> global max pool -> Flatten ->
    Linear(8->10) -> LeakyReLU -> Softmax (the Cortex-M4 from `activation` on: the last
    LeakyReLU keeps the accelerator from taking the network back)."""
    graph = head_graph([], softmax=False)
    graph.nodes.pop()  # the flatten
    del graph.tensors["f"]
    rng = np.random.default_rng(9)

    def add(node: g.Node, shape: tuple[int, ...]) -> None:
        graph.add(node, shape)

    def conv(name: str, src: str, cin: int, cout: int, k: int, hw: int, groups: int = 1) -> None:
        w = rng.normal(0, 1 / np.sqrt(cin * k * k / groups), (cout, cin // groups, k, k))
        pad = k // 2
        add(g.Conv(name=name, inputs=[src], outputs=[name], weight=w, bias=rng.normal(0, 0.1, cout),
                   pads=(pad,) * 4, groups=groups), (cout, hw, hw))  # fmt: skip

    act: g.Node = (
        g.LeakyRelu(name="act", inputs=["p"], outputs=["act"], alpha=0.05)
        if activation == "leaky_relu"
        else g.Activation(name="act", inputs=["p"], outputs=["act"], kind=activation)
    )
    add(act, (4, 4, 4))
    conv("conv2", "act", 4, 6, 3, 4)
    add(g.Activation(name="relu2", inputs=["conv2"], outputs=["r2"], kind="relu"), (6, 4, 4))
    add(g.Pool(name="avg", inputs=["r2"], outputs=["a"], kind="avg", kernel=(2, 2), stride=(2, 2),
               method="float"), (6, 2, 2))  # fmt: skip
    conv("conv3", "a", 6, 8, 1, 2, groups=2)
    add(g.GlobalPool(name="gmax", inputs=["conv3"], outputs=["gm"], kind="max"), (8, 1, 1))
    add(g.Flatten(name="flat2", inputs=["gm"], outputs=["f2"]), (8,))
    add(g.Linear(name="fc", inputs=["f2"], outputs=["fc"], weight=rng.normal(0, 0.4, (10, 8)),
                 bias=rng.normal(0, 0.1, 10)), (10,))  # fmt: skip
    add(g.LeakyRelu(name="fc_act", inputs=["fc"], outputs=["fc_act"], alpha=0.5), (10,))
    add(g.Softmax(name="softmax", inputs=["fc_act"], outputs=["y"]), (10,))
    graph.outputs = ["y"]
    return graph


def upsample_graph(k: int, stride: int, pad: int, groups: int = 1) -> g.Graph:
    """Conv(1->4) -> ReLU -> MaxPool 2 (4x4x4), then ConvTranspose(4->6, k x k, `stride`, padding
    `pad`, `groups`) -> ReLU -> Flatten -> Linear(->10) -> LeakyReLU -> Softmax (the LeakyReLU
    keeps the accelerator from taking the network back)."""
    graph = head_graph([], softmax=False)
    graph.nodes.pop()  # the flatten
    del graph.tensors["f"]
    rng = np.random.default_rng(11)
    hw = 3 * stride - 2 * pad + k
    # the convolution form: (out, in / groups, k, k), padded by k - 1 - pad after the stuffing
    w = rng.normal(0, 1 / np.sqrt(4 * k * k / groups), (6, 4 // groups, k, k))
    graph.add(g.Conv(name="up", inputs=["p"], outputs=["up"], weight=w, bias=rng.normal(0, 0.1, 6),
                     stride=(stride, stride), pads=(k - 1 - pad,) * 4, groups=groups,
                     transposed=True), (6, hw, hw))  # fmt: skip
    graph.add(g.Activation(name="relu2", inputs=["up"], outputs=["r2"], kind="relu"), (6, hw, hw))
    graph.add(g.Flatten(name="flat2", inputs=["r2"], outputs=["f2"]), (6 * hw * hw,))
    graph.add(g.Linear(name="fc", inputs=["f2"], outputs=["fc"], bias=rng.normal(0, 0.1, 10),
                       weight=rng.normal(0, 1 / np.sqrt(6 * hw * hw), (10, 6 * hw * hw))),
              (10,))  # fmt: skip
    graph.add(g.LeakyRelu(name="fc_act", inputs=["fc"], outputs=["fc_act"], alpha=0.5), (10,))
    graph.add(g.Softmax(name="softmax", inputs=["fc_act"], outputs=["y"]), (10,))
    graph.outputs = ["y"]
    return graph


def calibration(n: int = 32) -> np.ndarray:
    return np.random.default_rng(6).normal(0, 1, (n, 1, 8, 8))


WIDE = [("linear", 2048), ("relu", 0), ("linear", 10)]
LEAKY = [("linear", 1200), ("leaky_relu", 0), ("linear", 10)]
TABLES = [("linear", 1500), ("sigmoid", 0), ("linear", 64), ("tanh", 0), ("linear", 10)]


def test_a_wide_linear_splits_the_network() -> None:
    program, _ = compile_to(head_graph(WIDE), "max78000", calibration=calibration())
    assert program.cpu is not None
    assert [layer.kind for layer in program.cpu.layers] == ["linear", "relu", "linear"]
    assert [layer.out_bits for layer in program.cpu.layers] == [8, 8, 32]
    assert program.cpu.in_shape == (4, 4, 4) and program.cpu.softmax
    notes = program.notes
    assert notes[0] == "split at `linear0` (2,048 outputs, more than the accelerator's 1,024):"
    assert notes[1] == "  CNN accelerator: `conv`, `relu`, `pool`"
    cpu = [line.split(":")[0].strip() for line in notes if line.startswith("    ")]
    assert cpu == ["`flat` (flatten)", "`linear0` (linear)", "`relu1` (activation)",
                   "`linear2` (linear)", "`softmax` (softmax)"]  # fmt: skip
    assert f"    `linear0` (linear): ~{64 * 2048 * 6 + 2048 * 20:,} cycles" in notes
    assert notes[2].startswith("  CNN accelerator estimate: ")
    assert "Cortex-M4 estimate:" in notes[-2] and "not a measurement" in notes[-2]
    assert notes[-1].startswith("  the whole network on the Cortex-M4 (--cpu-only): ~")
    assert program.outputs[0].shape == (10,) and program.outputs[0].bits == 32


def test_the_summary_adds_the_cortex_m4_estimate() -> None:
    from edgesynth.targets.base import get_target
    from edgesynth.targets.max7800x.cpu.emit import estimate

    program, _ = compile_to(head_graph(WIDE), "max78000", calibration=calibration())
    assert program.cpu is not None and program.plan is not None
    summary = get_target("max78000").summarize(program)
    latency = program.plan.project.latency
    assert latency is not None and summary.clock_hz == 100_000_000
    cpu = sum(c.cycles for c in estimate(program.cpu))
    assert summary.cycles == latency.total * 2 + cpu  # the CNN clock is 50 MHz


def test_a_network_the_accelerator_runs_whole_is_not_split() -> None:
    program, _ = compile_to(head_graph([("linear", 10)]), "max78000", calibration=calibration())
    assert program.cpu is None
    assert not program.options.cpu_part


@pytest.mark.parametrize(
    "graph",
    [head_graph(WIDE), head_graph(LEAKY), head_graph(TABLES), mid_graph("sigmoid"),
     upsample_graph(2, 2, 0), upsample_graph(3, 3, 1, groups=2)],
    ids=["relu", "leaky", "sigmoid-tanh", "conv-pool", "convtranspose", "convtranspose-groups"],
)  # fmt: skip
def test_the_proof_builds_the_cpu_part_for_the_host(graph: g.Graph, tmp_path: Path) -> None:
    """`compile`'s proof (verify=True) runs the accelerator's part on the virtual device and
    the project's cpu_part.c, built with gcc -Wall -Wextra -Werror, on its output and on
    pseudo-random inputs: every layer equals the simulator value for value."""
    needs.tool("gcc")
    from edgesynth.targets.max7800x.cpu.host import EXECUTOR, RANDOM_INPUTS, proof_inputs

    out = tmp_path / "out"
    program, _ = compile_to(graph, "max78000", calibration=calibration(), out=out, verify=True)
    assert program.proof is not None and program.cpu is not None
    device, cpu = program.proof.line.splitlines()
    assert device.startswith("known answer reproduced on the virtual MAX78000: ")
    total = (RANDOM_INPUTS + 1) * sum(layer.size for layer in program.cpu.layers)
    assert cpu == f"known answer reproduced on {EXECUTOR}: {total:} of {total} values"
    assert program.plan is not None
    x = proof_inputs(program.cpu, program.plan.result.output)
    assert len(np.unique(simulate(program.cpu, x).argmax(1))) > 1  # the outputs are not alike


def _broken_rounding(text: str) -> str:
    """The requantization without its rounding term (truncation instead of half up)."""
    return text.replace("((int64_t) 1 << (shift - 1))", "0")


def _broken_syntax(text: str) -> str:
    return text.replace("cpu_part_forward(const", "cpu_part_forward((const")


@pytest.mark.parametrize(
    ("broken", "message"),
    [(_broken_rounding, "the Cortex-M4 part (project/cpu_part.c), built with the host's gcc, "
      "does not compute the simulator's answer: CPU layer 0 (`linear0`, linear) is the first "
      "to differ: "),
     (_broken_syntax, "the Cortex-M4 part (project/cpu_part.c) does not build with the host's "
      "gcc (-O2 -std=gnu11 -Wall -Wextra -Werror): project/cpu_part.c:")],
    ids=["rounding", "syntax"],
)  # fmt: skip
def test_a_wrong_cpu_part_fails_the_proof_and_nothing_is_written(
    broken, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs.tool("gcc")
    from edgesynth.proof import ProofFailed
    from edgesynth.targets.max7800x.cpu import emit

    render = emit.render_cpu_part

    def wrong(*args, **kwargs):  # type: ignore[no-untyped-def]
        texts = render(*args, **kwargs)
        return {**texts, "cpu_part.c": broken(texts["cpu_part.c"])}

    monkeypatch.setattr(emit, "render_cpu_part", wrong)
    out = tmp_path / "out"
    with pytest.raises(ProofFailed) as err:
        compile_to(head_graph(WIDE), "max78000", calibration=calibration(), out=out, verify=True)
    assert str(err.value).startswith(message)
    assert "Nothing was written" in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()
    program, _ = compile_to(head_graph(WIDE), "max78000", calibration=calibration(), out=out)
    assert program.proof is None and (out / "project" / "cpu_part.c").is_file()  # --no-verify


@pytest.mark.parametrize(
    "graph",
    [head_graph(TABLES), head_graph([("linear", 10), ("sigmoid", 0)], False), mid_graph("tanh"),
     upsample_graph(2, 2, 0)],
    ids=["8-bit-unload", "32-bit-unload", "conv-pool", "convtranspose"],
)  # fmt: skip
def test_the_project_builds_for_the_cortex_m4(graph: g.Graph, tmp_path: Path) -> None:
    needs.tool("arm-none-eabi-gcc")
    from edgesynth.targets.max7800x.commands.firmware import build_project

    out = tmp_path / "out"
    compile_to(graph, "max78000", calibration=calibration(), out=out)
    assert "cpu_part.c" in (out / "project" / "Makefile").read_text()
    assert "cpu_part(" in (out / "project" / "main.c").read_text()
    result = build_project(out / "project")  # -Wall -Wextra -Werror
    assert result.elf.is_file()


def test_an_operator_neither_side_runs_is_named() -> None:
    graph = head_graph([("linear", 2048), ("abs", 0), ("linear", 10)])
    with pytest.raises(EdgesynthError) as err:
        compile_to(graph, "max78000", calibration=calibration())
    message = str(err.value)
    assert message.startswith(
        "operator `abs1` (activation abs): neither the MAX78000's CNN accelerator nor its "
        "Cortex-M4 part runs it here: the network leaves the accelerator at `linear0`, and the "
        "Cortex-M4 part, which runs the rest, runs Linear (Gemm/MatMul), 2-D convolution"
    )
    assert "\n" not in message


def test_a_cpu_part_larger_than_the_sram_is_refused_naming_the_tensor() -> None:
    graph = head_graph([("linear", 30000)], softmax=False)  # 120,000 bytes of accumulators
    with pytest.raises(EdgesynthError) as err:
        compile_to(graph, "max78000", calibration=calibration(8))
    assert "tensor `linear0` (120,000 bytes) does not fit the MAX78000's SRAM" in str(err.value)
    program, _ = compile_to(graph, "max78002", calibration=calibration(8))  # 384 KiB: it fits
    assert program.cpu is not None


def test_a_sigmoid_after_the_accelerators_accumulator(tmp_path: Path) -> None:
    """The accelerator's last layer keeps its 32-bit accumulator; the Cortex-M4 requantizes it
    to 8 bits for the sigmoid's table."""
    graph = head_graph([("linear", 10), ("sigmoid", 0)], softmax=False)
    out = tmp_path / "out"
    program, _ = compile_to(graph, "max78000", calibration=calibration(), out=out, verify=True)
    assert program.cpu is not None and program.cpu.in_bits == 32
    assert [layer.kind for layer in program.cpu.layers] == ["requantize", "lut"]
    assert program.proof is not None  # the host build on 32-bit unloaded words
    assert program.proof.line.splitlines()[1].endswith(": 320 of 320 values")  # 16 x (10 + 10)


def test_a_leaky_relu_leaves_the_accelerator() -> None:
    """LeakyReLU, which the accelerator lacks, is where the network splits; the accelerator
    takes it back for the Linear after it (the vector as C x 1 x 1)."""
    graph = head_graph([("linear", 32), ("leaky_relu", 0), ("linear", 10)])
    program, _ = compile_to(graph, "max78000", calibration=calibration())
    assert program.cpu is not None
    assert program.notes[0] == "split at `leaky_relu1` (the accelerator has no leaky ReLU):"
    assert [layer.kind for layer in program.cpu.layers] == ["requantize", "leaky", "rescale"]
    assert program.then is not None and program.then.inputs[0].shape == (32, 1, 1)


@pytest.mark.parametrize("activation", ["sigmoid", "leaky_relu"])
def test_an_activation_in_the_middle_moves_the_rest_to_the_cortex_m4(activation: str) -> None:
    """Where the accelerator cannot take the network back (an operator it lacks at the end),
    everything after the split runs on the Cortex-M4: convolutions and pooling too."""
    program, _ = compile_to(mid_graph(activation), "max78000", calibration=calibration())
    assert program.cpu is not None
    kinds = [layer.kind for layer in program.cpu.layers]
    first = "lut" if activation == "sigmoid" else "leaky"
    assert kinds == [first, "conv", "relu", "pool", "conv", "pool", "linear", "leaky"]
    assert program.then is None
    x = np.random.default_rng(3).normal(0, 1, (16, 1, 8, 8))
    from edgesynth.flow import run_program
    from edgesynth.sim.graph import run

    codes = run_program(program, x).codes
    want = run(mid_graph(activation), x, keep=True)["fc"]
    assert (codes.argmax(1) == want.argmax(1)).mean() >= 0.8


@pytest.mark.parametrize(
    ("k", "stride", "pad", "groups", "why"),
    [(2, 2, 0, 1, "2x2 is not supported for ConvTranspose2d; the only kernel size is 3x3"),
     (3, 3, 1, 2, "a transposed convolution upsamples by 2 only, not 3")],
)  # fmt: skip
def test_a_transposed_convolution_the_accelerator_refuses_runs_on_the_cortex_m4(
    k: int, stride: int, pad: int, groups: int, why: str
) -> None:
    """The accelerator's rules refuse these transposed convolutions (a 2x2 kernel; a stride of
    3): the network splits at the operator they name, and the Cortex-M4 part computes what the
    float graph does."""
    graph = upsample_graph(k, stride, pad, groups)
    program, _ = compile_to(graph, "max78000", calibration=calibration())
    assert program.cpu is not None
    assert program.notes[0].startswith("split at `up` (the accelerator refuses it: ")
    assert why in program.notes[0]
    assert program.notes[1] == "  CNN accelerator: `conv`, `relu`, `pool`"
    assert [layer.kind for layer in program.cpu.layers] == ["convt", "relu", "linear", "leaky"]
    x = np.random.default_rng(3).normal(0, 1, (32, 1, 8, 8))
    from edgesynth.flow import run_program
    from edgesynth.sim.graph import run

    codes = run_program(program, x).codes
    want = run(graph, x, keep=True)["fc"]
    assert (codes.argmax(1) == want.argmax(1)).mean() >= 0.8


def test_a_network_returning_an_accelerator_tensor_too_is_refused() -> None:
    """The Cortex-M4 part returns the network's one result; a second output before the split
    is refused, naming the operator where the network would leave the accelerator."""
    graph = head_graph([("linear", 2048), ("linear", 10)], softmax=False)
    graph.outputs = ["p", "linear1"]
    with pytest.raises(EdgesynthError) as err:
        compile_to(graph, "max78000", calibration=calibration(8))
    assert str(err.value).startswith(
        "operator `linear0` (linear): the network would leave the accelerator here, but the "
        "operators from here on read 1 tensor of the accelerator's part, and the network "
        "returns 1 of them too"
    )


HARNESS = Path(__file__).parent / "harness" / "kat_harness.c"


@pytest.mark.corpus  # the devtrace headers of ../shared/tools
@pytest.mark.parametrize(
    "graph",
    [head_graph(WIDE), mid_graph("tanh"), upsample_graph(2, 2, 0)],
    ids=["8-bit", "32-bit", "convtranspose"],
)
def test_cnn_unload_feeds_the_cpu_part(graph: g.Graph, tmp_path: Path) -> None:
    """The project's own cnn.c on the PC (tests/max7800x/harness): with the accelerator's known
    answer in data memory, cnn_unload() leaves exactly what the CPU part's simulator reads, and
    cpu_part.c on that buffer computes the network's result."""
    from edgesynth.targets.max7800x.emit.unload import output_layers
    from edgesynth.targets.max7800x.plan.kat import expected_words

    include = needs.devtrace() / "include"
    out = tmp_path / "out"
    program, _ = compile_to(graph, "max78000", calibration=calibration(), out=out)
    assert program.plan is not None and program.cpu is not None
    plan, result, project = program.plan.project, program.plan.result, out / "project"
    s = plan.settings
    (last,) = [s.by_index[i] for i in output_layers(plan)]
    words = expected_words(last, s, result.layers[last.index].output)
    np.asarray([(a, v) for _, a, v in words], "<u4").tofile(tmp_path / "out.memory")
    unload_bytes = program.cpu.in_words * 4
    binary = tmp_path / "harness"
    flags = [CC, "-O0", "-w", "-fno-builtin", f"-I{include}", f"-I{project}"]
    main_o = tmp_path / "main.o"  # main.c calls cpu_part(): it links as it does on the chip
    subprocess.run([*flags, "-Dmain=generated_main", "-c", str(project / "main.c"), "-o",
                    str(main_o)], check=True)  # fmt: skip
    sources = [project / name for name in ("cnn.c", "softmax.c", "cpu_part.c")]
    subprocess.run(
        [*flags, '-DSAMPLE_OUTPUT_HEADER="sampleoutput.h"', f"-DUNLOAD_BYTES={unload_bytes}",
         str(HARNESS), str(main_o), *map(str, sources), "-no-pie", "-o", str(binary), "-lm"],
        check=True,
    )  # fmt: skip
    run = subprocess.run([str(binary), str(tmp_path / "out")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    raw = (tmp_path / "out.unload").read_bytes()[:unload_bytes]
    unloaded = np.frombuffer(raw, "<u4")
    kind = "<i4" if program.cpu.in_bits == 32 else np.int8
    values = np.frombuffer(raw, kind)[: program.cpu.in_size].astype(np.int64)
    np.testing.assert_array_equal(values, result.output.reshape(-1))

    from edgesynth.targets.max7800x.cpu.host import build, run_layers, unload_words

    np.testing.assert_array_equal(unloaded, unload_words(program.cpu, values[None])[0])
    (tmp_path / "driver").mkdir()
    got = run_layers(build(project, program.cpu, tmp_path / "driver"), program.cpu, values[None])
    np.testing.assert_array_equal(got[-1], simulate(program.cpu, values[None]))


def test_riscv_runs_the_cpu_part_on_the_riscv_core(tmp_path: Path) -> None:
    """`compile --riscv` (option `riscv`): the RISC-V core runs the network, the CPU part
    included (main_riscv.c calls cpu_part()); `edgesynth build` cross-compiles cpu_part.c for it
    with riscv64-unknown-elf-gcc -march=rv32imc -mabi=ilp32 -Wall -Wextra -Werror (the MSDK's
    RISC-V flags) and links the Cortex-M4's main.c."""
    needs.tool("arm-none-eabi-gcc")
    needs.tool("riscv64-unknown-elf-gcc")
    from edgesynth.targets.max7800x.commands.firmware import RISCV_FLAGS, WARNINGS, build_project
    from edgesynth.targets.max7800x.target import RISCV_NOTE

    out = tmp_path / "out"
    program, _ = compile_to(head_graph(TABLES), "max78000", calibration=calibration(), out=out,
                            options={"riscv": True}, verify=True)  # fmt: skip
    assert program.proof is not None and len(program.proof.line.splitlines()) == 2
    assert program.notes[-1] == RISCV_NOTE
    project = out / "project"
    assert "SRCS := main_riscv.c cnn.c softmax.c cpu_part.c\n" in (project / "Makefile").read_text()
    assert "cpu_part(" in (project / "main_riscv.c").read_text()
    assert "cpu_part(" not in (project / "main.c").read_text()
    assert RISCV_FLAGS == ["-march=rv32imc", "-mabi=ilp32"] and "-Werror" in WARNINGS
    result = build_project(project)
    assert project / "build" / "riscv" / "cpu_part.o" in result.riscv_objects
    assert result.riscv is not None and result.elf.is_file()


def test_cpu_only_compiles_the_whole_network_for_the_cortex_m4(tmp_path: Path) -> None:
    """`compile --cpu-only` (option `cpu_only`): every operator on the Cortex-M4, no accelerator
    layers; the notes give each layer's estimated cycles and the accelerator's estimate beside
    them; the proof builds cpu_part.c for the host; the project links for the Cortex-M4 with
    -Wall -Wextra -Werror; `edgesynth run` is the simulator, close to the float graph."""
    needs.tool("gcc")
    from edgesynth.flow import run_folder
    from edgesynth.sim.graph import run
    from edgesynth.targets.base import get_target
    from edgesynth.targets.max7800x.cpu.emit import estimate

    graph, out = mid_graph("sigmoid"), tmp_path / "out"
    program, files = compile_to(graph, "max78000", calibration=calibration(), out=out,
                                options={"cpu_only": True}, verify=True)  # fmt: skip
    assert program.cpu is not None and program.layers == [] and program.network is None
    kinds = [layer.kind for layer in program.cpu.layers]
    assert kinds == ["conv", "relu", "pool", "lut", "conv", "relu", "pool", "conv", "pool",
                     "linear", "leaky"]  # fmt: skip
    assert program.cpu.in_shape == (1, 8, 8) and program.cpu.in_bits == 8
    notes, total = program.notes, sum(c.cycles for c in estimate(program.cpu))
    assert notes[0].startswith("--cpu-only: the whole network on the Cortex-M4")
    assert notes[1] == f"    `conv` (conv): ~{estimate(program.cpu)[0].cycles:,} cycles"
    assert notes[-2].startswith(f"  Cortex-M4 estimate: {total:,} cycles, ")
    assert "not a measurement" in notes[-2]
    assert notes[-1].startswith("  with the CNN accelerator (compile without --cpu-only): ")
    assert "the Cortex-M4 part included): --cpu-only takes " in notes[-1]  # it splits
    assert program.proof is not None and "\n" not in program.proof.line
    assert program.proof.line.startswith("known answer reproduced on the host build of ")
    assert "project/cnn.c" not in files and "network.yaml" not in files
    summary = get_target("max78000").summarize(program)
    assert summary.cycles == total and summary.clock_hz == 100_000_000

    x = np.random.default_rng(3).normal(0, 1, (32, 1, 8, 8))
    result = run_folder(out, x)
    fmt = result.program.inputs[0]
    np.testing.assert_array_equal(result.codes, simulate(program.cpu, fmt.quantize(x)))
    want = run(graph, x, keep=True)["fc"]
    assert (result.codes.argmax(1) == want.argmax(1)).mean() >= 0.8

    needs.tool("arm-none-eabi-gcc")
    from edgesynth.targets.max7800x.commands.firmware import build_project

    assert build_project(out / "project").elf.is_file()  # -Wall -Wextra -Werror


def test_cpu_only_refusals() -> None:
    """An operator the Cortex-M4 part does not run is named; an integer network or one without
    calibration data is refused naming --cpu-only."""
    graph = head_graph([("linear", 16), ("abs", 0), ("linear", 10)])
    with pytest.raises(EdgesynthError) as err:
        compile_to(graph, "max78000", calibration=calibration(), options={"cpu_only": True})
    assert str(err.value).startswith(
        "operator `abs1` (activation abs): --cpu-only runs the whole network on the MAX78000's "
        "Cortex-M4, which runs Linear (Gemm/MatMul)"
    )
    with pytest.raises(EdgesynthError) as err:
        compile_to(head_graph(WIDE), "max78000", options={"cpu_only": True})
    assert err.value.key == "--cpu-only" and "given no --calibration data" in str(err.value)
