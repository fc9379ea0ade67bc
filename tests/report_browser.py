"""Headless Chromium (Debian's `chromium`) for the report tests: a page's console messages, its
pictures' sizes and table rows as the browser lays them out, and a screenshot. The page is
loaded in an iframe of a small harness page whose script measures it (file:// pages may read
each other with --allow-file-access-from-files); `--dump-dom` prints the measurements."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
WIDTH = 1280

HARNESS = """<!DOCTYPE html><html><body><pre id="out"></pre>
<script>
var pages = %(pages)s, done = 0, results = {};
function measure(frame, name) {
  var d = frame.contentDocument, r = {}, box = function (e) { var b = e.getBoundingClientRect();
    return [b.width, b.height]; };
  r.title = d.title;
  r.height = d.documentElement.scrollHeight;
  r.width = d.documentElement.scrollWidth;
  r.sections = Array.from(d.querySelectorAll("[data-section]")).map(function (s) {
    return s.dataset.section; });
  r.targets = Array.from(d.querySelectorAll("section[data-target]")).map(function (s) {
    return [s.dataset.target, s.querySelectorAll("table.layers tbody tr").length]; });
  r.charts = Array.from(d.querySelectorAll("svg")).map(function (s) {
    var marks = Array.from(s.querySelectorAll("rect, circle, polyline")).filter(function (m) {
      var b = box(m); return b[0] > 0 && b[1] > 0; });
    return [s.dataset.chart].concat(box(s)).concat([marks.length,
      s.querySelectorAll("title").length]); });
  var table = d.querySelector("table.layers");
  if (table) {
    var th = table.tHead.rows[0].cells[5], col = function () {
      return Array.from(table.tBodies[0].rows).map(function (row) {
        return parseFloat(row.cells[5].dataset.v); }); };
    th.click(); r.macs_up = col(); th.click(); r.macs_down = col();
  }
  results[name] = r;
  if (++done === pages.length) {
    document.getElementById("out").textContent = "RESULT" + JSON.stringify(results) + "END";
  }
}
pages.forEach(function (p) {
  var f = document.createElement("iframe");
  f.width = %(width)d; f.height = 900;
  f.onload = function () { measure(f, p[0]); };
  f.src = p[1];
  document.body.appendChild(f);
});
</script></body></html>
"""


def run(chromium: str, profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [chromium, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def console_lines(stderr: str) -> list[str]:
    """What the pages wrote to the console (errors, warnings, logs)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def measure(chromium: str, tmp: Path, pages: dict[str, Path]) -> tuple[dict, list[str]]:
    """Every page measured in one browser run; and the console lines it logged."""
    harness = tmp / "harness.html"
    listed = [[name, path.resolve().as_uri()] for name, path in pages.items()]
    harness.write_text(HARNESS % {"pages": json.dumps(listed), "width": WIDTH})
    done = run(
        chromium,
        tmp / "profile-measure",
        [
            "--allow-file-access-from-files",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            harness.as_uri(),
        ],
    )
    found = re.search(r"RESULT(.*)END", done.stdout)
    assert found, f"the harness gave no result:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"')), console_lines(done.stderr)


def screenshot(chromium: str, tmp: Path, page: Path, height: int, png: Path) -> list[str]:
    """`page` at 1280 px wide and `height` tall into `png`; the console lines it logged."""
    done = run(
        chromium,
        tmp / f"profile-{png.stem}",
        [
            f"--window-size={WIDTH},{height}",
            f"--screenshot={png}",
            "--enable-logging=stderr",
            "--v=0",
            page.resolve().as_uri(),
        ],
    )
    assert png.is_file(), f"no screenshot:\n{done.stderr[-2000:]}"
    return console_lines(done.stderr)
