"""`edgesynth report` and `--report` open in headless Chromium (Debian's `chromium`): for the
MNIST flow on every target (`compile -t NAME --report`), for `compile -t all --report` with the
targets' agreement, and for `validate --report`: no console message, a screenshot 1280 px wide
that is not blank, every section, one table row per layer (the count `compile` prints), every
picture with marks of nonzero size and hover titles, the layer table sorted by a click, nothing
fetched from a network. Each page is made once (module fixtures); one browser run measures them
all. EDGESYNTH_UPDATE_DOCS=1 also copies the `-t all` page's first screen to docs/."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli
from compile_all_models import cnn
from mnist_lenet import EVAL, load_mnist
from report_browser import WIDTH, measure, screenshot

pytestmark = pytest.mark.slow
TARGETS = ["max78000", "max78002", "gati", "gap8", "xdnn"]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "report.png"
# what each target's page shows besides the layer table
MEMORY_CHARTS = {"max78000": 4, "max78002": 4, "gati": 1, "gap8": 1, "xdnn": 2}
TIMED = {"max78000", "gati", "gap8"}  # the targets with a cycle estimate per layer


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Every page, made once: per target, `-t all`, and `validate` on max78000."""
    chromium = needs.tool("chromium")
    root = tmp_path_factory.mktemp("report")
    x, y = load_mnist()
    model = cnn(root / "cnn.onnx")
    files = {name: root / f"{name}.npy" for name in ("cal", "data", "labels")}
    np.save(files["cal"], x[:200])
    np.save(files["data"], x[EVAL][:100])
    np.save(files["labels"], y[EVAL][:100])
    made: dict[str, Path] = {}
    layers: dict[str, int] = {}
    for target in TARGETS:
        out = root / target
        result = run_cli("compile", model, "-t", target, "-c", files["cal"], "-o", out, "--report")
        assert result.exit_code == 0, result.output
        layers[target] = int(re.search(r"(\d+) hardware layers?", result.stdout).group(1))
        made[target] = out / "report.html"
    out = root / "all"
    common = ["-c", files["cal"], "--data", files["data"], "--labels", files["labels"]]
    result = run_cli("compile", model, "-t", "all", *common, "-o", out, "--report")
    assert result.exit_code == 0, result.output
    made["all"] = out / "report.html"
    page = root / "validate.html"
    result = run_cli(
        "validate", model, "-t", "max78000", *common, "--per-layer", "--report", page
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    made["validate"] = page
    measured, console = measure(chromium, root, made)
    return {"chromium": chromium, "root": root, "pages": made, "layers": layers,
            "measured": measured, "console": console}  # fmt: skip


def test_no_console_message_and_nothing_fetched(pages: dict) -> None:
    assert pages["console"] == []
    for path in pages["pages"].values():
        html = path.read_text()
        assert not re.search(r"<(link|img|iframe|object|embed)\b", html), path
        assert not re.search(r"\bsrc=", html), path
        urls = set(re.findall(r"https?://[^\"' <>]+", html))
        assert urls <= {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace names no file


@pytest.mark.parametrize("target", TARGETS)
def test_target_page(pages: dict, target: str) -> None:
    page = pages["measured"][target]
    assert page["targets"] == [[target, pages["layers"][target]]]
    assert page["sections"] == ["network", "memory", "time"]
    _charts_have_data(page)
    memory = [c for c in page["charts"] if c[0] == "memory"]
    assert len(memory) == MEMORY_CHARTS[target]
    assert sum(c[0] == "time" for c in page["charts"]) == (target in TIMED)
    assert page["width"] <= WIDTH  # nothing wider than a laptop's window
    assert page["macs_up"] == sorted(page["macs_up"])
    assert page["macs_down"] == sorted(page["macs_down"], reverse=True)


def test_all_targets_side_by_side(pages: dict) -> None:
    page = pages["measured"]["all"]
    assert page["targets"] == sorted([t, pages["layers"][t]] for t in TARGETS)
    assert page["sections"] == ["comparison"] + ["network", "memory", "time"] * len(TARGETS)
    names = [c[0] for c in page["charts"]]
    for chart in ("comparison-memory", "comparison-latency", "comparison-agreement"):
        assert chart in names
    _charts_have_data(page)
    agreement = next(c for c in page["charts"] if c[0] == "comparison-agreement")
    assert agreement[3] == len(TARGETS)  # a bar per target


def test_validation_page(pages: dict) -> None:
    page = pages["measured"]["validate"]
    assert page["sections"] == ["network", "memory", "time", "validation"]
    names = [c[0] for c in page["charts"]]
    assert "confusion" in names and "per-layer" in names
    confusion = next(c for c in page["charts"] if c[0] == "confusion")
    assert confusion[3] == 100  # 10 x 10 cells
    _charts_have_data(page)


@pytest.mark.parametrize("name", ["all", "gap8"])
def test_screenshot(pages: dict, name: str) -> None:
    """The whole page at 1280 px: every section in the picture, and not blank."""
    image_module = needs.module("PIL.Image")
    height = pages["measured"][name]["height"]
    png = pages["root"] / f"{name}.png"
    console = screenshot(pages["chromium"], pages["root"], pages["pages"][name], height, png)
    assert console == []
    with image_module.open(png) as image:
        assert image.size == (WIDTH, height)
        dark = image.convert("L").point(lambda v: 255 if v < 128 else 0).histogram()[255]
        colours = image.convert("RGB").getcolors(1 << 24)
    assert dark > 0.01 * WIDTH * height  # text and pictures, not a white page
    assert len(colours) > 20  # the pictures' colours
    if name == "all" and os.environ.get("EDGESYNTH_UPDATE_DOCS") == "1":
        first = pages["root"] / "first-screen.png"
        screenshot(pages["chromium"], pages["root"], pages["pages"][name], 1800, first)
        shutil.copyfile(first, DOCS)


def _charts_have_data(page: dict) -> None:
    assert page["charts"]
    for name, width, height, marks, titles in page["charts"]:
        assert width > 0 and height > 0, name
        assert marks > 0, f"{name}: no mark of nonzero size"
        if name != "time":
            assert titles > 0, f"{name}: nothing to hover"
