"""The MAX7800x split (issue 25) where placement refuses the accelerator's part, and the
element-wise and concatenation operators on the Cortex-M4: random-weight float graphs built
operator by operator; the host build of the generated cpu_part.c equals the CPU part's
simulator value for value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import needs
from cpu_host import host_build, host_outputs
from edgesynth.errors import EdgesynthError
from edgesynth.flow import compile_to, run_program
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.max7800x.cpu.program import CpuProgram
from edgesynth.targets.max7800x.cpu.simulate import simulate


class Builder:
    """A float graph, one operator at a time, with random weights."""

    def __init__(self, shape: tuple[int, ...], seed: int = 5) -> None:
        self.graph = g.Graph("net")
        self.graph.add_input("x", shape)
        self.rng = np.random.default_rng(seed)
        self.t = "x"

    def shape(self, t: str | None = None) -> tuple[int, ...]:
        return self.graph.tensors[t or self.t].shape

    def add(self, node: g.Node, shape: tuple[int, ...]) -> str:
        self.graph.add(node, shape)
        self.t = node.output
        return self.t

    def conv(self, name: str, cout: int, k: int = 3, src: str | None = None) -> str:
        src = src or self.t
        cin, h, w = self.shape(src)
        weight = self.rng.normal(0, 1 / np.sqrt(cin * k * k), (cout, cin, k, k))
        return self.add(g.Conv(name=name, inputs=[src], outputs=[name], weight=weight,
                               bias=self.rng.normal(0, 0.1, cout), pads=(k // 2,) * 4),
                        (cout, h, w))  # fmt: skip

    def act(self, name: str, kind: str, src: str | None = None) -> str:
        src = src or self.t
        return self.add(g.Activation(name=name, inputs=[src], outputs=[name], kind=kind),
                        self.shape(src))  # fmt: skip

    def pool(self, name: str) -> str:
        c, h, w = self.shape()
        return self.add(g.Pool(name=name, inputs=[self.t], outputs=[name], kind="max",
                               kernel=(2, 2), stride=(2, 2), method="float"),
                        (c, h // 2, w // 2))  # fmt: skip

    def eltwise(self, name: str, kind: str, a: str, b: str) -> str:
        node = g.Eltwise(name=name, inputs=[a, b], outputs=[name], kind=kind)
        return self.add(node, self.shape(a))

    def concat(self, name: str, *srcs: str) -> str:
        c = sum(self.shape(t)[0] for t in srcs)
        node = g.Concat(name=name, inputs=list(srcs), outputs=[name])
        return self.add(node, (c, *self.shape(srcs[0])[1:]))

    def head(self, *widths: int) -> g.Graph:
        """Flatten, Linear(-> width) + ReLU for each width but the last, then a Softmax."""
        self.add(g.Flatten(name="flat", inputs=[self.t], outputs=["flat"]),
                 (int(np.prod(self.shape())),))  # fmt: skip
        for i, width in enumerate(widths):
            size = self.shape()[0]
            weight = self.rng.normal(0, 1 / np.sqrt(size), (width, size))
            self.add(g.Linear(name=f"fc{i}", inputs=[self.t], outputs=[f"fc{i}"], weight=weight,
                              bias=self.rng.normal(0, 0.1, width)), (width,))  # fmt: skip
            if i < len(widths) - 1:
                self.act(f"fc{i}_relu", "relu")
        self.add(g.Softmax(name="softmax", inputs=[self.t], outputs=["y"]), (widths[-1],))
        self.graph.outputs = ["y"]
        return self.graph


def features(b: Builder) -> None:
    """Three Conv+ReLU+MaxPool blocks, 1 -> 8 -> 16 -> 16 channels, 28x28 -> 3x3."""
    for i, cout in enumerate((8, 16, 16)):
        b.conv(f"conv{i}", cout)
        b.act(f"relu{i}", "relu")
        b.pool(f"pool{i}")


def placement_refused(*widths: int) -> g.Graph:
    b = Builder((1, 28, 28))
    features(b)
    return b.head(*widths)


def mnist_like(n: int = 16) -> np.ndarray:
    return np.random.default_rng(6).normal(0, 1, (n, 1, 28, 28))


# -- placement ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("widths", "first"),
    [((1024, 10), "fc0"), ((512, 512, 10), "fc1")],
    ids=["wide-linear", "longest-prefix"],
)
def test_a_split_where_placement_refuses_the_accelerators_part(
    widths: tuple[int, ...], first: str
) -> None:
    """Every layer is within the accelerator's limits, but placement refuses the whole network
    (it is refused as it was without a Cortex-M4 part: tested below); the longest prefix that
    places stays on the accelerator, the rest runs on the Cortex-M4."""
    graph = placement_refused(*widths)
    program, _ = compile_to(graph, "max78000", calibration=mnist_like())
    assert program.cpu is not None and program.plan is not None
    assert program.notes[0].startswith(
        f"split at `{first}` (placement refuses the accelerator's part from here on: "
        "no placement exists for this network on the MAX78000: "
    )
    moved = [n.name for n in graph.nodes].index(first)
    accelerator = ", ".join(f"`{n.name}`" for n in graph.nodes[: moved - (first == "fc0")])
    assert program.notes[1] == f"  CNN accelerator: {accelerator}"
    assert program.notes[2].startswith("  CNN accelerator estimate: ")
    x = mnist_like(24)
    codes = run_program(program, x).codes
    want = run(graph, x, keep=True)[f"fc{len(widths) - 1}"]
    assert (codes.argmax(1) == want.argmax(1)).mean() >= 0.8


def test_without_the_split_placement_refuses_the_network() -> None:
    """The graph of the test above is one placement refuses (so the split is what placed it)."""
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.targets.max7800x.quantize import quantize

    graph = placement_refused(1024, 10)
    quantized = quantize(graph, mnist_like(), get_device("MAX78000"))
    with pytest.raises(EdgesynthError, match="no placement exists for this network"):
        compile_to(quantized, "max78000")


def test_a_placement_refusal_the_cortex_m4_cannot_take_stands() -> None:
    """No prefix places with a Cortex-M4 part that fits the flash: placement's refusal stands."""
    graph = placement_refused(1024, 1024, 10)
    with pytest.raises(EdgesynthError, match=r"^net: no placement exists for this network"):
        compile_to(graph, "max78000", calibration=mnist_like())


# -- element-wise operators and concatenation on the Cortex-M4 ------------------------------


def residual_graph(seed: int = 7) -> g.Graph:
    """Conv(1->4)+ReLU+MaxPool on the accelerator; then a Sigmoid (the split), a convolution
    added back to it (the residual), ReLU, a convolution minus its input, times the sigmoid's
    output (the accelerator has no `mul`), concatenated with the ReLU's output, plus the
    accelerator's output concatenated with itself; Flatten, Linear(128 -> 10), Softmax (the
    accelerator again)."""
    b = Builder((1, 8, 8), seed)
    b.conv("conv0", 4)
    b.act("relu0", "relu")
    p = b.pool("pool0")
    s = b.act("sig", "sigmoid")
    c = b.conv("conv1", 4)
    r = b.act("relu1", "relu", b.eltwise("res", "add", c, s))
    d = b.eltwise("diff", "sub", b.conv("conv2", 4, k=1), r)
    m = b.eltwise("prod", "mul", d, s)
    b.eltwise("skip", "add", b.concat("cat", r, m), b.concat("cat2", p, p))
    return b.head(10)


def small(n: int = 32) -> np.ndarray:
    return np.random.default_rng(6).normal(0, 1, (n, 1, 8, 8))


def test_element_wise_operators_after_the_split_run_on_the_cortex_m4() -> None:
    graph = residual_graph()
    program, _ = compile_to(graph, "max78000", calibration=small())
    assert program.cpu is not None
    assert program.notes[0] == "split at `sig` (the accelerator has no sigmoid activation):"
    kinds = [layer.kind for layer in program.cpu.layers]
    assert kinds == ["lut", "conv", "add", "relu", "conv", "sub", "mul", "concat", "concat",
                     "add", "rescale"]  # fmt: skip
    assert program.then is not None  # the accelerator takes the Linear back
    assert [n.name for n in program.then.graph.nodes][-1] == "fc0"
    sources = [layer.sources for layer in program.cpu.layers]
    assert sources[2] == [1, 0] and sources[5] == [4, 3] and sources[8] == [-1, -1]
    x = small(64)
    codes = run_program(program, x).codes
    want = run(graph, x, keep=True)["fc0"]
    assert (codes.argmax(1) == want.argmax(1)).mean() >= 0.8


def test_the_host_build_of_element_wise_operators_equals_the_simulator(tmp_path: Path) -> None:
    out = tmp_path / "out"
    compile_to(residual_graph(), "max78000", calibration=small(), out=out)
    cpu = CpuProgram.load(out)
    assert cpu is not None and cpu.in_bits == 8
    binary = host_build(out / "project", tmp_path / "host")
    x = np.random.default_rng(8).integers(-128, 128, (50, cpu.in_size))
    x[:25] = np.maximum(x[:25], 0)  # the accelerator's ReLU'd outputs too
    want = simulate(cpu, x)
    np.testing.assert_array_equal(host_outputs(binary, x, 8), want)
    assert len(np.unique(want.argmax(1))) > 1


def test_an_element_wise_operator_on_the_accelerators_accumulator(tmp_path: Path) -> None:
    """The accelerator's last layer keeps its 32-bit accumulator: both sources are requantized
    once to 8 bits (one `requantize` layer), then multiplied."""
    b = Builder((1, 8, 8))
    b.conv("conv0", 4)
    b.act("relu0", "relu")
    b.pool("pool0")
    b.add(g.Flatten(name="f", inputs=["pool0"], outputs=["f"]), (64,))
    lin = b.add(g.Linear(name="lin", inputs=["f"], outputs=["lin"], bias=np.zeros(16),
                         weight=b.rng.normal(0, 0.2, (16, 64))), (16,))  # fmt: skip
    b.eltwise("sq", "mul", lin, lin)
    graph = b.graph
    graph.outputs = ["sq"]
    out = tmp_path / "out"
    program, _ = compile_to(graph, "max78000", calibration=small(), out=out)
    assert program.cpu is not None and program.cpu.in_bits == 32
    assert [layer.kind for layer in program.cpu.layers] == ["requantize", "mul"]
    assert program.cpu.layers[1].sources == [0, 0]
    binary = host_build(out / "project", tmp_path / "host")
    x = np.random.default_rng(8).integers(-(2**18), 2**18, (30, 16))
    np.testing.assert_array_equal(host_outputs(binary, x, 32), simulate(program.cpu, x))


def test_the_residual_project_builds_for_the_cortex_m4(tmp_path: Path) -> None:
    needs.tool("arm-none-eabi-gcc")
    from edgesynth.targets.max7800x.commands.firmware import build_project

    out = tmp_path / "out"
    compile_to(residual_graph(), "max78000", calibration=small(), out=out)
    assert build_project(out / "project").elf.is_file()  # -Wall -Wextra -Werror


# -- accelerator, Cortex-M4, accelerator ----------------------------------------------------


def back_graph(activation: str = "leaky_relu") -> g.Graph:
    """Conv(1->8)+ReLU+MaxPool, Conv(8->16) on the accelerator; `activation` (which it lacks)
    on the Cortex-M4; MaxPool, Conv(16->16)+ReLU+MaxPool, Flatten, Linear(144 -> 10), Softmax
    on the accelerator again."""
    b = Builder((1, 28, 28))
    b.conv("conv0", 8)
    b.act("relu0", "relu")
    b.pool("pool0")
    b.conv("conv1", 16)
    if activation == "leaky_relu":
        b.add(g.LeakyRelu(name="act", inputs=["conv1"], outputs=["act"], alpha=0.1), b.shape())
    else:
        b.act("act", activation)
    b.pool("pool1")
    b.conv("conv2", 16)
    b.act("relu2", "relu")
    b.pool("pool2")
    return b.head(10)


@pytest.mark.parametrize("activation", ["leaky_relu", "sigmoid"])
def test_the_accelerator_takes_the_network_back_after_the_cortex_m4(activation: str) -> None:
    graph = back_graph(activation)
    program, _ = compile_to(graph, "max78000", calibration=mnist_like())
    assert program.cpu is not None and program.then is not None
    first = "leaky" if activation == "leaky_relu" else "lut"
    assert [layer.kind for layer in program.cpu.layers] == ["requantize", first, "rescale"]
    assert [n.name for n in program.then.graph.nodes][:2] == ["pool1", "conv2"]
    assert program.notes[-2].startswith(
        "  CNN accelerator again (segment2/project, reading `act` as the Cortex-M4 part leaves "
        "it in data memory): `pool1`, `conv2`, `relu2`, `pool2`, `flat`, `fc0`, `softmax`"
    )
    assert program.notes[-1].startswith("    CNN accelerator estimate: ")
    # the second program's known answer's input: the CPU part's known answer
    assert program.plan is not None and program.then.plan is not None
    cpu_answer = simulate(program.cpu, program.plan.result.output.reshape(1, -1))[0]
    np.testing.assert_array_equal(program.then.sample.reshape(-1), cpu_answer)
    x = mnist_like(24)
    codes = run_program(program, x).codes
    want = run(graph, x, keep=True)["fc0"]
    assert codes.shape == want.shape and (codes.argmax(1) == want.argmax(1)).mean() >= 0.8


def test_with_riscv_the_cpu_part_runs_to_the_end(tmp_path: Path) -> None:
    """`--riscv` (main_riscv.c has no second accelerator program): the network that returns to
    the accelerator without it runs its CPU part to the end; the notes give the --cpu-only
    estimate and the RISC-V note; the proof covers the accelerator and the host build."""
    from edgesynth.targets.max7800x.target import RISCV_NOTE

    out = tmp_path / "out"
    program, files = compile_to(back_graph(), "max78000", calibration=mnist_like(), out=out,
                                options={"riscv": True}, verify=True)  # fmt: skip
    assert program.cpu is not None and program.then is None
    assert [layer.kind for layer in program.cpu.layers][:2] == ["requantize", "leaky"]
    assert program.notes[-2].startswith("  the whole network on the Cortex-M4 (--cpu-only): ")
    assert program.notes[-1] == RISCV_NOTE
    assert not any(name.startswith("segment2") for name in files)
    assert program.proof is not None
    assert program.proof.line.splitlines()[1].startswith(
        "known answer reproduced on the host build of project/cpu_part.c"
    )


def test_a_network_the_accelerator_cannot_take_back_stays_on_the_cortex_m4() -> None:
    """After the last operator the accelerator lacks, nothing it could run reads one tensor of
    the CPU part: the CPU part runs to the end."""
    b = Builder((1, 8, 8))
    b.conv("conv0", 4)
    b.act("relu0", "relu")
    b.pool("pool0")
    b.act("sig", "sigmoid")
    b.add(g.Flatten(name="f", inputs=["sig"], outputs=["f"]), (64,))
    b.add(g.Linear(name="fc", inputs=["f"], outputs=["fc"], weight=b.rng.normal(0, 0.2, (10, 64)),
                   bias=np.zeros(10)), (10,))  # fmt: skip
    b.act("tanh", "tanh")
    b.graph.outputs = ["tanh"]
    program, _ = compile_to(b.graph, "max78000", calibration=small())
    assert program.cpu is not None and program.then is None
    assert [layer.kind for layer in program.cpu.layers] == ["lut", "linear", "lut"]


def _compiled_back(tmp_path: Path):  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    program, _ = compile_to(back_graph(), "max78000", calibration=mnist_like(), out=out)
    return program, out


_LOADER_DRIVER = """#include <stdio.h>
#include <stdint.h>
#include "segment2.h"
static uint32_t addresses[1 << 16], values[1 << 16];
static int n;
volatile uint32_t *slot(uint32_t address) { addresses[n] = address; return &values[n++]; }
int main(void) {
  static int8_t x[SEGMENT2_INPUTS];
  int v, i;
  for (;;) {
    for (i = 0; i < SEGMENT2_INPUTS; i++)
      if (scanf("%d", &v) != 1) return 0; else x[i] = (int8_t) v;
    n = 0;
    segment2_load_input(x);
    for (i = 0; i < n; i++) printf("%u:%u ", (unsigned) addresses[i], (unsigned) values[i]);
    printf("\\n");
  }
}
"""


def test_the_cortex_m4_writes_its_result_where_the_second_program_reads_it(
    tmp_path: Path,
) -> None:
    """segment2_input.c built for this PC (its data memory writes captured): for any result,
    the words the second program's own load_input() would write for it as its input."""
    import subprocess

    from cpu_host import CC
    from edgesynth.targets.max7800x.plan.inputs import plan_input

    needs.tool("gcc")
    program, out = _compiled_back(tmp_path)
    then = program.then
    assert then is not None and then.plan is not None
    project, work = out / "project", tmp_path / "loader"
    work.mkdir()
    (work / "driver.c").write_text(_LOADER_DRIVER)
    (work / "slot.h").write_text("#include <stdint.h>\nvolatile uint32_t *slot(uint32_t);\n")
    binary = work / "loader"
    subprocess.run(
        [CC, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{project}", "-include", str(work / "slot.h"),
         "-DSEGMENT2_WORD(a)=(*slot(a))", str(project / "segment2_input.c"),
         str(work / "driver.c"), "-o", str(binary)],
        check=True,
    )  # fmt: skip
    shape = then.inputs[0].shape
    x = np.random.default_rng(4).integers(-128, 128, (6, int(np.prod(shape))))
    x[0] = then.sample.reshape(-1)  # the known answer's input
    stdin = "\n".join(" ".join(map(str, row)) for row in x)
    done = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, check=True)
    for row, line in zip(x, done.stdout.splitlines(), strict=True):
        got = [tuple(map(int, pair.split(":"))) for pair in line.split()]
        planned = plan_input(then.plan.project.settings, row.reshape(shape))
        want = [(block.address + 4 * i, int(word)) for block in planned.blocks
                for i, word in enumerate(block.words)]  # fmt: skip
        assert got == want


def test_the_two_program_project_builds_and_each_program_runs_on_the_virtual_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    needs.tool("gcc")  # the recorder
    from edgesynth.cli import main
    from edgesynth.targets.max7800x.commands.firmware import build_project

    _, out = _compiled_back(tmp_path)
    capsys.readouterr()
    for project, words in ((out / "project", 3136), (out / "segment2" / "project", 10)):
        assert main(["device", "run", str(project)]) == 0
        report = capsys.readouterr().out
        assert f"known answer: all {words} words match" in report and "hazard:" not in report
    needs.tool("arm-none-eabi-gcc")
    assert "cnn_segment2.c" in (out / "project" / "Makefile").read_text()
    assert build_project(out / "project").elf.is_file()  # -Wall -Wextra -Werror


def test_an_operator_reading_two_accelerator_tensors_splits_earlier(tmp_path: Path) -> None:
    """y * conv(y): the accelerator has no `mul`, and the multiplication reads two tensors of
    the accelerator's part, so the split comes earlier, at the convolution (the rest then reads
    `y` alone); the accelerator takes the network back after the ReLU. Both programs' known
    answers are proven on the virtual device."""
    b = Builder((1, 28, 28))
    b.conv("conv0", 8)
    b.act("relu0", "relu")
    y = b.pool("pool0")
    c = b.conv("conv1", 8)
    b.act("relu1", "relu", b.eltwise("prod", "mul", y, c))
    b.conv("conv2", 16)
    b.act("relu2", "relu")
    b.pool("pool2")
    graph = b.head(10)
    program, _ = compile_to(
        graph, "max78000", calibration=mnist_like(), out=tmp_path / "out", verify=True
    )
    assert program.cpu is not None and program.then is not None
    assert program.notes[0] == (
        "split at `conv1` (`prod`: the accelerator has no `mul` here; it reads several tensors "
        "of the accelerator's part, so the split comes before it):"
    )
    assert program.notes[1] == "  CNN accelerator: `conv0`, `relu0`, `pool0`"
    assert [layer.kind for layer in program.cpu.layers] == ["conv", "mul", "relu", "rescale"]
    assert program.cpu.layers[1].sources == [-1, 0]  # the accelerator's output and conv1's
    assert program.proof is not None and program.proof.matched == program.proof.total
    assert program.proof.total == 8 * 14 * 14 // 4 + 10  # both programs' known answers
    (host,) = program.proof.more  # the host build of cpu_part.c, the mul's two sources too
    assert host.line.startswith("known answer reproduced on the host build of project/cpu_part.c")
    assert host.matched == host.total == 16 * sum(layer.size for layer in program.cpu.layers)
    x = mnist_like(24)
    codes = run_program(program, x).codes
    assert (codes.argmax(1) == run(graph, x, keep=True)["fc0"].argmax(1)).mean() >= 0.8


def test_an_operator_reading_two_tensors_with_no_split_point_is_refused() -> None:
    """x * conv(x) on the network's input: no split point reads one tensor of the accelerator's
    part (the accelerator would run nothing), so the refusal names the multiplication."""
    b = Builder((1, 8, 8))
    c = b.conv("conv0", 1)
    b.eltwise("prod", "mul", "x", c)
    b.graph.outputs = ["prod"]
    with pytest.raises(EdgesynthError, match=r"^operator `prod` \(eltwise\): the network would"):
        compile_to(b.graph, "max78000", calibration=small())


def test_the_report_shows_where_each_layer_runs(tmp_path: Path) -> None:
    """`edgesynth report`'s layer table: the accelerator's layers, the Cortex-M4's (with their
    estimated cycles) and the accelerator's second program, in the order they run."""
    from edgesynth.targets.base import get_target, read_manifest

    out = tmp_path / "back"
    compile_to(back_graph(), "max78000", calibration=mnist_like(), out=out)
    report = get_target("max78000").report_data(out, read_manifest(out))
    where = [row.where for row in report.layers]
    first_cpu = next(i for i, w in enumerate(where) if w.startswith("Cortex-M4"))
    again = next(i for i, w in enumerate(where) if w.startswith("CNN accelerator again"))
    assert 0 < first_cpu < again and where[0].startswith("processors")
    assert [row.index for row in report.layers] == list(range(len(where)))
    cpu = [row for row in report.layers if row.where.startswith("Cortex-M4")]
    assert all(row.cycles and row.cycles > 0 for row in cpu)
    # every part counted (each accelerator program's latency adds a few cycles to its layers')
    rows = sum(row.cycles or 0 for row in report.layers)
    assert report.total_cycles is not None and rows <= report.total_cycles <= rows + 16
