"""`edgesynth report OUT/`: a folder no command wrote, a file, a missing folder, results of
another format: one message, exit 1, nothing written; an existing page is replaced only with
--overwrite; the page of a compiled folder lists its layers as the compiler's files give them."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import run_cli, snapshot


def _refused(args: list, root: Path, *words: str) -> None:
    before = snapshot(root)
    result = run_cli("report", *args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    for word in words:
        assert word in message, message
    assert snapshot(root) == before  # nothing written


def test_a_folder_no_command_wrote(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine\n")
    _refused([tmp_path / "notes"], tmp_path, "not an output folder of edgesynth compile")


def test_a_file_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text("{}")
    _refused([tmp_path / "f.json"], tmp_path, "is a file")
    _refused([tmp_path / "missing"], tmp_path, "is not there")


def test_a_broken_manifest(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "compiled.json").write_text("{not json")
    _refused([tmp_path / "out"], tmp_path, "compiled.json")


def test_results_of_another_format(compiled: Path, tmp_path: Path) -> None:
    results = tmp_path / "other.json"
    results.write_text(json.dumps({"format": "something-else/1"}))
    page = tmp_path / "page.html"
    _refused(
        [compiled, "--results", results, "-o", page], tmp_path, "other.json", "edgesynth validate"
    )


def test_a_compiled_folder_missing_the_file_its_target_reads(
    compiled: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "compiled.json").write_text((compiled / "compiled.json").read_text())
    _refused([broken], tmp_path, "plan.json")


def test_the_page_and_overwrite(compiled: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    assert run_cli("report", compiled, "-o", page).exit_code == 0
    html = page.read_text()
    plan = json.loads((compiled / "plan.json").read_text())
    assert html.count('<tr><td class="n" data-v=') == len(plan["layers"])
    for layer in plan["layers"]:
        assert f"<td>{layer['name'].replace('>', '&gt;')}</td>" in html
    page.write_text("mine\n")
    result = run_cli("report", compiled, "-o", page)
    assert result.exit_code == 1 and "--overwrite" in result.stderr
    assert page.read_text() == "mine\n"
    assert run_cli("report", compiled, "-o", page, "--overwrite").exit_code == 0
    assert page.read_text() == html  # the same page again


def test_default_page_is_beside_the_files(compiled: Path) -> None:
    result = run_cli("report", compiled)
    assert result.exit_code == 0, result.output
    assert (compiled / "report.html").is_file()
    (compiled / "report.html").unlink()


def test_results_missing(compiled: Path, tmp_path: Path) -> None:
    _refused(
        [compiled, "--results", tmp_path / "none.json", "-o", tmp_path / "p.html"],
        tmp_path,
        "none.json",
        "no such file",
    )
