"""`cpu: true` in a vendor YAML: `edgesynth synth` runs the marked trailing layers on the
Cortex-M4 (issue 25, item 1, for `synth`).

Corpus networks (the vendor's YAML and quantized checkpoint) with their last layers marked:
the accelerator runs the rest (its project proven on the virtual device), cpu_part.c the
marked layers, and the project's known answer equals the corpus's `expected_output.npy` value
for value, since the Cortex-M4 part computes the accelerator's own arithmetic; cpu_part.c built
for this PC computes it too, and the project builds for the Cortex-M4 with -Wall -Wextra
-Werror. A YAML without the key (or with `cpu: false`) writes the project it wrote before. Bad
input is one message naming the file, line, layer and key; `izer` refuses the key.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.cli import main
from edgesynth.sim import ops
from edgesynth.targets.max7800x.cpu.from_layers import lower_layers, requantizer
from edgesynth.targets.max7800x.cpu.simulate import requantize
from edgesynth.targets.max7800x.description.yamlcfg import load_spec

CASES = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases" / "MAX78000"
MNIST = ("mnist", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar",
         "tests/sample_mnist.npy")  # fmt: skip
CIFAR = ("cifar-10", "networks/cifar10-nas.yaml", "trained/ai85-cifar10-qat8-q.pth.tar",
         "tests/sample_cifar-10.npy")  # fmt: skip


def mark(src: Path, dst: Path, count: int, value: str = "true") -> Path:
    """`src` with `cpu: VALUE` added to its last `count` layers, written to `dst`."""
    lines = src.read_text().splitlines(keepends=True)
    for ls in reversed(load_spec(src).layers[len(load_spec(src).layers) - count :]):
        first = lines[ls.line - 1]  # the layer's `- key: value` line
        indent = len(first) - len(first.lstrip(" -"))
        lines.insert(ls.line, " " * indent + f"cpu: {value}\n")
    dst.write_text("".join(lines))
    return dst


def synth(case: tuple[str, ...], yaml: Path, out: Path, *extra: str, root: Path = CASES) -> int:
    folder = needs.in_corpus(root / case[0])
    args = ["synth", str(yaml), str(folder / case[2]), "--sample-input", str(folder / case[3]),
            "--softmax", "-o", str(out), "--izer-option=--sample-numpy-filename",
            "--izer-option=answer.npy", *extra]  # fmt: skip
    return main(args)


@pytest.mark.parametrize("shift", range(-8, 12))
def test_the_requantizer_is_the_accelerators_output_shift(shift: int) -> None:
    """The CPU part's (acc x mult + 2**(shift-1)) >> shift, clamped, equals the accelerator's
    clamp(floor(acc x 2**shift / 128 + 1/2)) for every shift a layer can have."""
    acc = np.arange(-(2**17), 2**17, 7, dtype=np.int64)
    mult, right = requantizer(shift)
    assert right >= 1
    assert np.array_equal(requantize(acc, mult, right), ops.requantize(acc, shift))


@pytest.mark.corpus
def test_mnist_mlp_on_the_cortex_m4_gives_the_corpus_answer(tmp_path: Path, capsys) -> None:
    """MNIST's last layer (the 192 -> 10 MLP, 32-bit output) marked: the accelerator runs the
    four convolutions, cpu_part.c the MLP; the proof covers both; the known answer is the
    corpus's expected output, value for value."""
    yaml = mark(CASES / MNIST[0] / MNIST[1], tmp_path / "mnist.yaml", 1)
    assert synth(MNIST, yaml, tmp_path / "out") == 0
    printed = capsys.readouterr().out
    split = "CNN accelerator runs layers 0 to 3; the Cortex-M4 (cpu_part.c) runs layer 4: ~"
    assert split in printed
    assert "known answer reproduced on the virtual MAX78000" in printed
    assert "known answer reproduced on the host build of project/cpu_part.c" in printed
    expected = np.load(CASES / MNIST[0] / "expected_output.npy")
    answer = np.load(tmp_path / "out" / "answer.npy")
    assert answer.shape == expected.shape and np.array_equal(answer, expected)
    main_c = (tmp_path / "out" / "main.c").read_text()
    assert "cpu_part(" in main_c and "softmax_layer();" not in main_c  # cpu_part.c runs it
    assert "cpu_part.c" in (tmp_path / "out" / "Makefile").read_text()


@pytest.mark.corpus
@pytest.mark.parametrize("count", [1, 2, 3])
def test_cifar10_trailing_layers_on_the_cortex_m4(count: int, tmp_path: Path) -> None:
    """CIFAR-10's last 1, 2 or 3 layers (MLP; 1x1 conv with max pooling and ReLU; 3x3 conv
    with padding and ReLU) on the Cortex-M4: the known answer is the corpus's expected
    output; with two marked, cpu_part.c built for this PC, fed the accelerator's output (the
    network simulated to the last unmarked layer), computes it too; the project builds for the
    Cortex-M4 (-Wall -Wextra -Werror)."""
    yaml = mark(CASES / CIFAR[0] / CIFAR[1], tmp_path / "cifar.yaml", count)
    out = tmp_path / "out"
    assert synth(CIFAR, yaml, out) == 0
    expected = np.load(CASES / CIFAR[0] / "expected_output.npy")
    assert np.array_equal(np.load(out / "answer.npy"), expected)
    if count != 2:
        return
    assert np.array_equal(host_build_output(yaml, out, 11 - count), expected.reshape(-1))
    needs.tool("arm-none-eabi-gcc")
    from edgesynth.targets.max7800x.commands.firmware import build_project

    assert build_project(out).elf.is_file()


@pytest.mark.corpus
def test_max78002_cifar10_last_three_layers_on_the_cortex_m4(tmp_path: Path) -> None:
    """The MAX78002's CIFAR-10 case, its last three layers marked: the corpus's answer."""
    root = CASES.parent / "MAX78002"
    yaml = mark(needs.in_corpus(root / CIFAR[0]) / CIFAR[1], tmp_path / "cifar.yaml", 3)
    out = tmp_path / "out"
    assert synth(CIFAR, yaml, out, "--device", "MAX78002", root=root) == 0
    expected = np.load(root / CIFAR[0] / "expected_output.npy")
    assert np.array_equal(np.load(out / "answer.npy"), expected)


def host_build_output(yaml: Path, project: Path, first: int) -> np.ndarray:
    """The project's cpu_part.c built with gcc and run on the accelerator's output for the
    sample (the simulator, stopped after layer `first - 1`): its last layer's values."""
    from edgesynth.targets.max7800x.commands.synth_cmd import SynthOptions, native_options
    from edgesynth.targets.max7800x.cpu.host import build, run_layers
    from edgesynth.targets.max7800x.pipeline import SynthesisJob, synthesize

    folder = CASES / CIFAR[0]
    opts = native_options(SynthOptions(yaml, folder / CIFAR[2], project,
                                       sample_input=folder / CIFAR[3]))  # fmt: skip
    opts = replace(opts, build=replace(opts.build, stop_after=first - 1, cpu_layers=True))
    result = synthesize(SynthesisJob(str(yaml), opts))
    program, _ = lower_layers(result.network, first, softmax=True)
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(project, program, Path(tmp))
        return run_layers(binary, program, result.output.reshape(1, -1))[-1][0]


SYNTHETIC = """arch: test
dataset: syn
layers:
  - processors: 0x1
    in_channels: 1
    in_dim: [8, 8]
    data_format: HWC
    op: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
  - op: mlp
    cpu: true
    flatten: true
    activate: ReLU
  - op: mlp
    cpu: true
    output_width: 32
    activate: None
"""


def test_a_linear_wider_than_the_accelerator_runs_on_the_cortex_m4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Synthetic weights (`arch: test`): a 256 -> 1,500 linear layer (more outputs than the
    accelerator's 1,024 channels; 8-bit output, ReLU), then 1,500 -> 10 (32-bit), marked: the
    known answer is the accelerator's arithmetic on its first layer's output, computed here
    with NumPy (the same YAML without the marked layers gives that output)."""
    monkeypatch.chdir(tmp_path)  # tests/weights_syn.npy, as the vendor looks it up
    rng = np.random.default_rng(1)
    w1 = rng.integers(-128, 128, (1500, 256))
    w2 = rng.integers(-128, 128, (10, 1500))
    (tmp_path / "tests").mkdir()
    with open(tmp_path / "tests" / "weights_syn.npy", "wb") as handle:
        for w in (rng.integers(-128, 128, (4, 1, 3, 3)), w1, w2):
            np.save(handle, w.astype(np.int64))
    np.save(tmp_path / "tests" / "sample_syn.npy", rng.integers(-128, 128, (1, 8, 8)))
    (tmp_path / "net.yaml").write_text(SYNTHETIC)
    (tmp_path / "head.yaml").write_text(SYNTHETIC[: SYNTHETIC.index("  - op: mlp")])
    answer = ["--izer-option=--sample-numpy-filename", "--izer-option=answer.npy"]
    for name in ("net", "head"):
        args = ["synth", str(tmp_path / f"{name}.yaml"), "-o", str(tmp_path / name), *answer,
                "--sample-input", str(tmp_path / "tests" / "sample_syn.npy")]  # fmt: skip
        assert main(args) == 0
    head = np.load(tmp_path / "head" / "answer.npy").reshape(-1)
    hidden = ops.activate(ops.requantize(w1 @ head, 0), "relu")
    assert np.array_equal(np.load(tmp_path / "net" / "answer.npy").reshape(-1), w2 @ hidden)


@pytest.mark.corpus
def test_cpu_false_writes_the_project_without_the_key(tmp_path: Path) -> None:
    """`cpu: false` on every layer: the same files, byte for byte, as the YAML without it."""
    yaml, out = tmp_path / "net.yaml", tmp_path / "out"
    written = []
    for text in (CASES / MNIST[0] / MNIST[1]).read_text(), None:
        if text is None:
            mark(CASES / MNIST[0] / MNIST[1], yaml, 5, "false")
        else:
            yaml.write_text(text)
        assert synth(MNIST, yaml, out) == 0
        written.append({p.name: p.read_bytes() for p in out.iterdir()})
        shutil.rmtree(out)
    assert "cpu: false" in yaml.read_text() and "cpu_part.c" not in written[0]
    assert written[0] == written[1]


def _edit(yaml: Path, old: str, new: str) -> Path:
    text = yaml.read_text()
    assert old in text
    yaml.write_text(text.replace(old, new, 1))
    return yaml


BAD = {
    # name: (layers marked, (old, new) edit of the marked text, line, layer, key, words)
    "middle": (2, ("  - op: mlp\n    cpu: true\n", "  - op: mlp\n"), 30, "layer 3", "`cpu`",
               "marks a trailing run of layers, but layer 4 after it (line 37)"),
    "avg_pool": (2, None, 29, "layer 3", "`avg_pool`", "average pooling"),
    "first_layer": (5, None, 10, "layer 0", "`cpu`", "every layer is marked"),
    "abs": (1, ("activate: None", "activate: Abs"), 42, "layer 4", "`activation`",
            "Abs on a layer marked `cpu: true`: the Cortex-M4 part runs conv2d, linear"),
    "operation": (1, ("op: mlp", "op: conv1d"), 36, "layer 4", "`operation`",
                  "`conv1d` on a layer marked"),
    "value": (1, ("cpu: true", "cpu: maybe"), 37, "layer 4", "`cpu`", "must be true or false"),
    "wide_before": (1, ("    out_offset: 0\n    processors: 0x0f",
                        "    output_width: 32\n    out_offset: 0\n    processors: 0x0f"), 33,
                    "layer 3", "`output_width`", "output_width must be 8 here"),
}  # fmt: skip


@pytest.mark.corpus
@pytest.mark.parametrize("name", list(BAD))
def test_bad_marks_are_one_message_naming_line_layer_and_key(
    name: str, tmp_path: Path, capsys
) -> None:
    count, edit, line, layer, key, words = BAD[name]
    yaml = mark(CASES / MNIST[0] / MNIST[1], tmp_path / "bad.yaml", count)
    if edit is not None:
        _edit(yaml, *edit)
    assert synth(MNIST, yaml, tmp_path / "out") == 1
    err = capsys.readouterr().err.strip()
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err
    assert f"{yaml}:{line}: {layer}: {key}:" in err and words in err
    assert not (tmp_path / "out").exists()


@pytest.mark.corpus
def test_izer_refuses_the_key_naming_its_line(tmp_path: Path, capsys) -> None:
    """The vendor's command line has no `cpu` key: one message naming the line and key."""
    folder = needs.in_corpus(CASES / MNIST[0])
    yaml = mark(folder / MNIST[1], tmp_path / "m.yaml", 1)
    args = ["izer", "--device", "MAX78000", "--config-file", str(yaml), "--checkpoint-file",
            str(folder / MNIST[2]), "--sample-input", str(folder / MNIST[3]), "--test-dir",
            str(tmp_path), "--prefix", "p"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"edgesynth: error: {yaml}:37: layer 4: `cpu`: `cpu: true` is ")
    assert "`edgesynth izer` reads the vendor's keys only" in err and err.count("\n") == 0
    assert not (tmp_path / "p").exists()


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("--izer-option=--stop-after=2", "--stop-after and layers marked `cpu: true` both choose"),
        ("--izer-option=--output-width=32", "--output-width and layers marked `cpu: true`"),
        ("--no-unload", "read the accelerator's output through cnn_unload(): drop --no-unload"),
    ],
)
def test_options_that_contradict_the_marks_are_refused(
    option: str, words: str, tmp_path: Path, capsys
) -> None:
    yaml = mark(CASES / MNIST[0] / MNIST[1], tmp_path / "m.yaml", 1)
    assert synth(MNIST, yaml, tmp_path / "out", option) == 1
    err = capsys.readouterr().err
    assert err.count("edgesynth: error:") == 1 and words in err
    assert not (tmp_path / "out").exists()
