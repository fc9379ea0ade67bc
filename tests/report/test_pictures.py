"""`edgesynth report --picture`: every chart of the page as a standalone SVG that parses as XML
with a title, axis labels and marks of nonzero size; DIR/ and FILE.svg name the files; PNG
through headless Chromium is a valid, non-blank image of twice the SVG's size (slow); a bad
suffix is a usage error (exit 2) and an existing file without --overwrite one message (exit 1),
nothing written either way."""

from __future__ import annotations

import math
import struct
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

import needs
from cli_helpers import run_cli, snapshot
from edgesynth.report import charts, pictures, png
from edgesynth.report.model import Report, Validation
from edgesynth.targets.report_model import AddressMap, LayerRow, Region, TargetReport, UsageChart

SVG = "{http://www.w3.org/2000/svg}"


def _report() -> Report:
    """A page with every kind of chart: an address map, per-layer use, cycles, the targets side
    by side, the confusion matrix and the error per layer."""
    layers = [LayerRow(i, f"conv{i}", "conv 3x3", "8x8x8", "8x8x8", 100, 72, "", 50 + i)
              for i in range(3)]  # fmt: skip
    memory = AddressMap("data memory", ["instance 0", "instance 1"], 4096,
                        [Region("instance 0", 0, 1024, "input 1x28x28", "input"),
                         Region("instance 1", 512, 2048, "layer 0 out", "layer 0")])  # fmt: skip
    use = UsageChart(
        "memory per layer",
        [lay.name for lay in layers],
        {"L1": [10, 20, 30], "L2": [100, 200, 300]},
        {"L1": 64, "L2": None},
    )
    target = TargetReport("gap8", "cnn", "out", layers, [memory], [use], 100_000_000, 153)
    rows = [
        {
            "target": t,
            "compiled": True,
            "weights": {"bytes": 1000},
            "seconds": 1e-3,
            "activations": {"bytes": 2000},
            "top1_agreement": 0.98,
        }
        for t in ("a", "b")
    ]
    validation = Validation("x.npy", 10, {}, [[3, 1], [0, 6]], per_layer=[("a", 0.01), ("b", 0.02)],
                            per_layer_metric="L2 relative error")  # fmt: skip
    return Report("t", [target], validation=validation, comparison=rows)


def _marks(root: ET.Element) -> list[ET.Element]:
    """The marks of the data: rectangles and points of nonzero size, lines with points."""
    found = []
    for e in root.iter():
        kind = e.tag.removeprefix(SVG)
        if kind == "rect" and e.get("class") not in {"paper", "band", "key"}:
            found += [e] if float(e.get("width")) > 0 and float(e.get("height")) > 0 else []
        elif (kind == "circle" and float(e.get("r")) > 0) or (
            kind == "polyline" and e.get("points")
        ):
            found.append(e)
    return found


def test_every_chart_a_standalone_svg() -> None:
    found = pictures.pictures(_report())
    assert [p.name for p in found] == [
        "comparison-memory", "comparison-latency", "comparison-agreement", "gap8-memory-1",
        "gap8-memory-2", "gap8-time", "validation-confusion", "validation-per-layer",
    ]  # fmt: skip
    for picture in found:
        root = ET.fromstring(pictures.svg_text(picture).encode())
        assert root.tag == f"{SVG}svg", picture.name
        width, height = pictures.size(picture)
        assert (float(root.get("width")), float(root.get("height"))) == (
            round(width, 1), round(height, 1))  # fmt: skip
        assert root.find(f"{SVG}title").text == picture.title
        paper = root.find(f"{SVG}rect")  # the first shape: the white background, all of it
        assert (paper.get("class"), paper.get("fill"), paper.get("width")) == (
            "paper", "#fff", root.get("width"))  # fmt: skip
        assert "font" in root.find(f"{SVG}style").text
        texts = {e.get("class"): e.text for e in root.iter(f"{SVG}text")}
        assert texts.get("axis"), picture.name  # an axis label
        assert picture.title.startswith(texts["heading"]), picture.name
        assert _marks(root), picture.name


def test_several_series_have_a_legend_inside_the_picture() -> None:
    chart = charts.bars(["x", "y"], {"weights": [1.0, 2.0], "activations": [3.0, 4.0]}, "bytes")
    assert [text for _, _, _, text in chart.keys] == ["weights", "activations"]
    assert all(y > chart.xlabel_y and y + 12 <= chart.height for _, y, _, _ in chart.keys)
    assert charts.bars(["x"], {"cycles": [1.0]}, "cycles").keys == []  # one series: no legend


def _png(rows: list[bytes], width: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
    data = zlib.compress(b"".join(b"\x00" + r for r in rows))
    return b"".join(
        [b"\x89PNG\r\n\x1a\n", png._chunk(b"IHDR", header), png._chunk(b"IDAT", data),
         png._chunk(b"IEND", b"")]
    )  # fmt: skip


def test_a_png_cut_to_its_first_rows() -> None:
    rows = [bytes([i] * 6) for i in range(5)]  # 2 RGB pixels a row
    cut = png.crop_rows(_png(rows, 2), 3)
    chunks = png._chunks(cut)
    assert struct.unpack(">II", chunks[0][1][:8]) == (2, 3)
    idat = b"".join(d for k, d in chunks if k == b"IDAT")
    assert zlib.decompress(idat) == b"".join(b"\x00" + r for r in rows[:3])
    for kind, data in chunks:  # every chunk's CRC right
        assert cut.count(struct.pack(">I", zlib.crc32(kind + data)))


def test_a_folder_of_svg_and_no_page(compiled: Path, tmp_path: Path) -> None:
    before = snapshot(compiled)
    result = run_cli("report", compiled, "--picture", f"{tmp_path / 'figs'}/")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == [
        "gap8-memory-1.svg", "gap8-time.svg"]  # fmt: skip
    assert snapshot(compiled) == before  # --picture alone writes no page
    for path in (tmp_path / "figs").iterdir():
        ET.parse(path)
    result = run_cli(
        "report", compiled, "--picture", tmp_path / "doc.svg", "-o", tmp_path / "p.html"
    )
    assert result.exit_code == 0, result.output
    assert {p.name for p in tmp_path.iterdir()} == {
        "figs", "doc-gap8-memory-1.svg", "doc-gap8-time.svg", "p.html"}  # fmt: skip


def test_an_unknown_suffix_is_a_usage_error(compiled: Path, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    result = run_cli("report", compiled, "--picture", tmp_path / "figure.jpg")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "figure.jpg" in errors[0] and ".png" in errors[0], result.stderr
    assert snapshot(tmp_path) == before


def test_an_existing_picture_only_with_overwrite(compiled: Path, tmp_path: Path) -> None:
    mine = tmp_path / "doc-gap8-time.svg"
    mine.write_text("mine\n")
    before = snapshot(tmp_path)
    result = run_cli("report", compiled, "--picture", tmp_path / "doc.svg")
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "--overwrite" in message, message
    assert str(mine) in message
    assert snapshot(tmp_path) == before  # not one picture written
    result = run_cli("report", compiled, "--picture", tmp_path / "doc.svg", "--overwrite")
    assert result.exit_code == 0, result.output
    ET.parse(mine)


@pytest.mark.slow
def test_png_pictures(compiled: Path, tmp_path: Path) -> None:
    needs.tool("chromium")
    image = needs.module("PIL.Image")
    result = run_cli("report", compiled, "--picture", tmp_path / "doc.png")
    assert result.exit_code == 0, result.output
    svgs = run_cli("report", compiled, "--picture", f"{tmp_path / 'svg'}/")
    assert svgs.exit_code == 0, svgs.output
    for name in ("gap8-memory-1", "gap8-time"):
        root = ET.parse(tmp_path / "svg" / f"{name}.svg").getroot()
        with image.open(tmp_path / f"doc-{name}.png") as picture:
            picture.load()
            size = (
                2 * math.ceil(float(root.get("width"))),
                2 * math.ceil(float(root.get("height"))),
            )
            assert picture.size == size, name
            rgb = picture.convert("RGB")
            assert rgb.getpixel((0, 0)) == (255, 255, 255)  # the white background
            colours = rgb.getcolors(maxcolors=1 << 20)
            assert len(colours) > 20, name  # text and marks, not a blank page
            inked = sum(n for n, c in colours if c != (255, 255, 255))
            assert inked > 0.02 * size[0] * size[1], name
