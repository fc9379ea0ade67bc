"""Float MNIST classifiers the accelerator cannot finish (issue 25), compiled for the MAX78000
with `edgesynth compile`: the accelerator runs the convolutions (and what else it can), the
Cortex-M4 the rest.

- `wide_head` ends in a 2,048-wide Linear, a Linear to 10 and a Softmax: the split is at the
  wide Linear, read from the accelerator's 8-bit output; the Cortex-M4 runs the rest.
- `leaky_head` has a LeakyReLU between its two Linear layers: the split is at the LeakyReLU,
  read from the accelerator's 32-bit accumulator; the accelerator takes the last Linear back.
- `sigmoid_mid` and `leaky_mid` have the activation after their second convolution: the
  Cortex-M4 runs it, the accelerator the rest.
- `hardswish_mid`, `silu_mid` and `mish_mid` have a Hardswish / SiLU / Mish there
  (torch.onnx writes x x HardSigmoid(x) / x x Sigmoid(x) / x x Tanh(Softplus(x)), one
  activation for the max7800x): the Cortex-M4 runs it as
  one 256-entry table on its calibrated output scale, the accelerator the rest.
- `upsample_mid` doubles its 7x7 features again with a 2x2 stride-2 transposed convolution,
  which the accelerator's rules refuse (its only transposed kernel is 3x3): the Cortex-M4 runs
  it (and the ReLU after it), the accelerator the rest.
- `placement_head` ends in a 1,024-wide Linear: within the accelerator's limits, but placement
  refuses the network; the split is before that Linear (the longest prefix that places), and
  the Cortex-M4 runs the rest.
Where the accelerator takes the network back, it is a second accelerator program (`segment2/`,
whose project the virtual device runs too).

Trained briefly on the first 8,000 t10k images (cached), calibrated on 200 others
(8,000-8,199); on images 9,000-9,999 the combined bit-exact output (`edgesynth run`) agrees with
ONNX Runtime's float top-1 on at least 98%, the virtual device runs the project's accelerator
part with every known-answer word right, and the project builds for the Cortex-M4 with -Wall
-Wextra -Werror."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import needs
from cpu_models import model_onnx
from edgesynth.cli import main
from mnist_lenet import EVAL, load_mnist

SPLITS = {
    "wide_head": "split at `/0/0.10/Gemm` (2,048 outputs, more than the accelerator's 1,024)",
    "leaky_head": "split at `/0/0.11/LeakyRelu` (the accelerator has no leaky ReLU)",
    "sigmoid_mid": "split at `/0/0.4/Sigmoid` (the accelerator has no sigmoid activation)",
    "upsample_mid": "split at `/0/0.6/ConvTranspose` (the accelerator refuses it: 2x2 is not "
    "supported for ConvTranspose2d; the only kernel size is 3x3)",
    "leaky_mid": "split at `/0/0.4/LeakyRelu` (the accelerator has no leaky ReLU)",
    "hardswish_mid": "split at `/0/0.4/Mul` (the accelerator has no hardswish activation)",
    "silu_mid": "split at `/0/0.4/Mul` (the accelerator has no swish activation)",
    "mish_mid": "split at `/0/0.4/Mul` (the accelerator has no mish activation)",
    "placement_head": "split at `/0/0.10/Gemm` (placement refuses the accelerator's part from "
    "here on: no placement exists for this network on the MAX78000: ",
}
# the accelerator takes these back after the Cortex-M4 part
BACK = {"sigmoid_mid", "leaky_mid", "upsample_mid", "leaky_head"} | {
    f"{name}_mid" for name in ("hardswish", "silu", "mish")
}


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_classifier_agrees_with_onnx_runtime(name: str, tmp_path: Path, capsys) -> None:
    ort = needs.module("onnxruntime")
    x, y = load_mnist()
    model = tmp_path / f"{name}.onnx"
    model_onnx(name, (x, y), model)
    xe = x[EVAL]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    float_top1 = session.run(None, {"input": xe})[0].argmax(1)
    assert (float_top1 == y[EVAL]).mean() >= 0.9

    np.save(tmp_path / "calibration.npy", x[8000:8200])
    out = tmp_path / "compiled"
    args = ["compile", str(model), "-t", "max78000"]
    args += ["--calibration", str(tmp_path / "calibration.npy"), "-o", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert SPLITS[name] in printed and "Cortex-M4 estimate:" in printed
    assert (out / "project" / "cpu_part.c").is_file()

    np.save(tmp_path / "x.npy", xe)
    assert (
        main(["run", str(out), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    )
    top1 = np.load(tmp_path / "y.npy").reshape(len(xe), -1).argmax(1)
    agree = float((top1 == float_top1).mean())
    assert agree >= 0.98, agree

    needs.tool("gcc")  # device run records the project (cpu_part.c included) with the host compiler
    assert (out / "segment2").is_dir() == (name in BACK)
    for project in [out / "project"] + ([out / "segment2" / "project"] if name in BACK else []):
        assert main(["device", "run", str(project)]) == 0
        report = capsys.readouterr().out
        assert "known answer: all" in report and "hazard:" not in report
    needs.tool("arm-none-eabi-gcc")  # the whole project, cpu_part.c included, -Werror
    from edgesynth.targets.max7800x.commands.firmware import build_project

    assert build_project(out / "project").elf.is_file()
    print(f"{name}: accelerator + Cortex-M4 top-1 agreement with ONNX Runtime {agree:.3f}")


@pytest.mark.slow
@pytest.mark.train
def test_cpu_only_classifier(tmp_path: Path, capsys) -> None:
    """`compile --cpu-only` on `leaky_head` (three convolutions, Linear 144->128, LeakyReLU,
    Linear 128->10, Softmax): every layer on the Cortex-M4. It prints each layer's estimated
    cycles and the accelerator's estimate of the same network (compiled without --cpu-only,
    which splits at the LeakyReLU and prints the --cpu-only estimate in turn); the proof builds
    cpu_part.c for the host; the top-1 agrees with ONNX Runtime on at least 98% of images
    9,000-9,999; the project builds for the Cortex-M4 with -Wall -Wextra -Werror."""
    ort = needs.module("onnxruntime")
    needs.tool("gcc")
    x, y = load_mnist()
    model = tmp_path / "leaky_head.onnx"
    model_onnx("leaky_head", (x, y), model)
    xe = x[EVAL]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    float_top1 = session.run(None, {"input": xe})[0].argmax(1)
    np.save(tmp_path / "calibration.npy", x[8000:8200])
    common = ["-t", "max78000", "--calibration", str(tmp_path / "calibration.npy")]

    assert main(["compile", str(model), *common, "--cpu-only", "-o", str(tmp_path / "c")]) == 0
    alone = capsys.readouterr().out.splitlines()
    assert alone[1].startswith("--cpu-only: the whole network on the Cortex-M4")
    (total,) = [line for line in alone if line.startswith("  Cortex-M4 estimate: ")]
    cycles = total.split(": ")[1].split(" cycles")[0]
    (side,) = [line for line in alone if "with the CNN accelerator" in line]
    assert "(its latency model, the Cortex-M4 part included): --cpu-only takes " in side
    assert any(line.startswith("known answer reproduced on the host build of ") for line in alone)

    assert main(["compile", str(model), *common, "-o", str(tmp_path / "a")]) == 0
    split = capsys.readouterr().out
    assert f"  the whole network on the Cortex-M4 (--cpu-only): ~{cycles} cycles" in split

    np.save(tmp_path / "x.npy", xe)
    y_path = tmp_path / "y.npy"
    assert main(["run", str(tmp_path / "c"), "-i", str(tmp_path / "x.npy"), "-o", str(y_path)]) == 0
    agree = float((np.load(y_path).reshape(len(xe), -1).argmax(1) == float_top1).mean())
    assert agree >= 0.98, agree
    needs.tool("arm-none-eabi-gcc")
    from edgesynth.targets.max7800x.commands.firmware import build_project

    assert build_project(tmp_path / "c" / "project").elf.is_file()
    print("\n".join([*alone, f"--cpu-only top-1 agreement with ONNX Runtime {agree:.3f}"]))


@pytest.mark.slow
@pytest.mark.train
def test_a_wrong_cpu_part_fails_compile(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`edgesynth compile` with the emitted rounding broken (truncation, not half up): the
    proof's host build of cpu_part.c differs from the simulator; one message naming the CPU
    layer and index, exit 1, nothing written."""
    needs.tool("gcc")
    from edgesynth.targets.max7800x.cpu import emit

    x, y = load_mnist()
    model = tmp_path / "wide_head.onnx"
    model_onnx("wide_head", (x, y), model)
    np.save(tmp_path / "calibration.npy", x[8000:8200])
    render = emit.render_cpu_part

    def truncating(*args, **kwargs):  # type: ignore[no-untyped-def]
        texts = render(*args, **kwargs)
        text = texts["cpu_part.c"].replace("((int64_t) 1 << (shift - 1))", "0")
        return {**texts, "cpu_part.c": text}

    monkeypatch.setattr(emit, "render_cpu_part", truncating)
    out = tmp_path / "compiled"
    args = ["compile", str(model), "-t", "max78000", "-o", str(out)]
    assert main([*args, "--calibration", str(tmp_path / "calibration.npy")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "edgesynth: error: the Cortex-M4 part (project/cpu_part.c), built with the host's gcc, "
        "does not compute the simulator's answer: CPU layer 0 (`/0/0.10/Gemm`, linear) "
        "is the first to differ: "
    ), err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
