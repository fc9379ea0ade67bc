"""`edgesynth compile MODEL -t all` (and `-t A,B`): every registered target compiles a float CNN
written here (calibrated on real MNIST) into OUT/<target>/, the same bytes `compile -t NAME`
writes alone; one table and its JSON; a target that refuses the network is a row naming its
rule; nothing compiling is exit 1; an unknown name is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli, snapshot
from compile_all_models import cnn
from edgesynth.targets.registry import target_names
from mnist_lenet import EVAL, load_mnist


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compile_all")
    x, y = load_mnist()
    paths = {
        "model": cnn(root / "cnn.onnx"),
        "residual": cnn(root / "residual.onnx", residual=True),
        "erf": cnn(root / "erf.onnx", unsupported=True),
        "cal": root / "cal.npy",
        "data": root / "data.npy",
        "labels": root / "labels.npy",
        "root": root,
    }
    np.save(paths["cal"], x[:200])
    np.save(paths["data"], x[EVAL][:200])
    np.save(paths["labels"], y[EVAL][:200])
    return paths


@pytest.fixture(scope="module")
def every(files: dict[str, Path]) -> tuple[object, Path, dict]:
    """`-t all` with --data, --labels and --json, once."""
    out, table = files["root"] / "all", files["root"] / "table.json"
    result = run_cli(
        "compile", files["model"], "-t", "all", "-c", files["cal"], "-o", out,
        "--data", files["data"], "--labels", files["labels"], "--json", table,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result, out, json.loads(table.read_text())


def _rows(stdout: str) -> dict[str, str]:
    """The table's lines by target (the first word of each)."""
    names = set(target_names())
    return {
        line.split()[0]: line
        for line in stdout.splitlines()
        if line.split()[:1] in [[n] for n in names]
    }


def test_every_target_writes_its_folder_and_a_row(every: tuple) -> None:
    result, out, _ = every
    assert sorted(p.name for p in out.iterdir()) == target_names()
    rows = _rows(result.stdout)
    assert sorted(rows) == target_names()
    for name, line in rows.items():
        assert line.split()[1] == "compiled", line
        assert (out / name / "compiled.json").is_file()


@pytest.mark.slow
def test_each_folder_equals_what_compile_for_that_target_alone_writes(
    every: tuple, files: dict[str, Path]
) -> None:
    _, out, _ = every
    for name in target_names():
        alone = files["root"] / "alone" / name
        single = run_cli("compile", files["model"], "-t", name, "-c", files["cal"], "-o", alone)
        assert single.exit_code == 0, single.output
        assert snapshot(out / name) == snapshot(alone), name


def test_the_json_holds_the_table(every: tuple, files: dict[str, Path]) -> None:
    result, out, table = every
    assert table["format"] == "edgesynth-compile-all/1"
    assert table["samples"] == 200
    assert [t["target"] for t in table["targets"]] == target_names()
    macs = {t["macs"] for t in table["targets"]}
    # conv1 8x28x28x9 + conv2 16x14x14x72 + gemm 10x784: the same network on every target
    assert macs == {8 * 28 * 28 * 9 + 16 * 14 * 14 * 72 + 10 * 784}
    rows = _rows(result.stdout)
    for t in table["targets"]:
        assert t["compiled"] and t["error"] is None
        assert t["folder"] == str(out / t["target"])
        assert 0.9 <= t["top1_agreement"] <= 1.0, t
        assert t["accuracy"]["target"] is not None and t["accuracy"]["float"] is not None
        assert f"{100 * t['top1_agreement']:.1f}%" in rows[t["target"]]
        assert t["weights"]["bytes"] > 0 and t["activations"]["bytes"] > 0
        if t["weights"]["capacity"] is not None:
            assert t["weights"]["bytes"] <= t["weights"]["capacity"]
        if t["seconds"] is not None:
            assert t["seconds"] == pytest.approx(t["cycles"] / t["clock_hz"])
    by = {t["target"]: t for t in table["targets"]}
    # each target's own estimates: the gap8 plan and the MAX78000 latency model have a clock
    assert by["gap8"]["clock_hz"] == 100_000_000 and by["gap8"]["cycles"] > 0
    assert by["max78000"]["clock_hz"] == 50_000_000 and by["max78000"]["cycles"] > 0
    assert by["gati"]["cycles"] > 0 and by["gati"]["seconds"] is None


def test_a_target_that_refuses_is_a_row_with_its_rule(files: dict[str, Path]) -> None:
    out = files["root"] / "residual"
    result = run_cli(
        "compile", files["residual"], "-t", "gati,max78000,xdnn", "-c", files["cal"], "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    # Gati runs the skip addition; the max pool after it reads values that can be negative
    assert "refused:" in rows["gati"] and "MaxPool over values that can be negative" in rows["gati"]
    assert rows["xdnn"].split()[1] == rows["max78000"].split()[1] == "compiled"
    assert sorted(p.name for p in out.iterdir()) == ["max78000", "xdnn"]


def test_nothing_compiles_exit_1_with_the_table(files: dict[str, Path]) -> None:
    out = files["root"] / "erf"
    result = run_cli("compile", files["erf"], "-t", "all", "-c", files["cal"], "-o", out)
    assert result.exit_code == 1
    rows = _rows(result.stdout)
    assert sorted(rows) == target_names()
    for line in rows.values():
        assert "refused:" in line and "`Erf_1 -> a_erf` (Erf)" in line
    assert "each for the same reason" in result.stderr and "(Erf)" in result.stderr
    assert not out.exists()


def test_an_unknown_name_is_a_usage_error_naming_the_targets(files: dict[str, Path]) -> None:
    out = files["root"] / "unknown"
    result = run_cli("compile", files["model"], "-t", "max78000,gatti", "-o", out)
    assert result.exit_code == 2
    assert "unknown target `gatti`" in result.stderr
    assert ", ".join(target_names()) in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["-t", "gati", "--json", "t.json"], "--json"),
        (["-t", "all", "--option", "a=1"], "--option"),
    ],
)
def test_options_for_the_other_form_are_usage_errors(
    files: dict[str, Path], extra: list[str], flag: str
) -> None:
    result = run_cli("compile", files["model"], "-o", files["root"] / "o", *extra)
    assert result.exit_code == 2
    assert flag in result.stderr


def test_a_non_empty_output_folder_is_refused_before_any_target(files: dict[str, Path]) -> None:
    out = files["root"] / "full"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    before = snapshot(out)
    result = run_cli("compile", files["model"], "-t", "all", "-c", files["cal"], "-o", out)
    assert result.exit_code == 1
    assert "--overwrite" in result.stderr
    assert snapshot(out) == before


def test_a_file_in_the_way_of_a_target_folder_is_refused_before_any_target(
    files: dict[str, Path],
) -> None:
    out = files["root"] / "in_the_way"
    out.mkdir()
    (out / "gati").write_text("a file where OUT/gati/ goes")
    before = snapshot(out)
    result = run_cli(
        "compile", files["model"], "-t", "all", "-c", files["cal"], "-o", out, "--overwrite"
    )
    assert result.exit_code == 1
    assert "gati is a file" in result.stderr
    assert "compiling for" not in result.stderr
    assert snapshot(out) == before


def test_a_missing_data_file_is_refused_before_any_target(files: dict[str, Path]) -> None:
    out = files["root"] / "no_data"
    result = run_cli(
        "compile", files["model"], "-t", "all", "-c", files["cal"], "-o", out,
        "--data", files["root"] / "missing.npy",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "missing.npy: `--data`: no such file" in result.stderr
    assert not out.exists()
