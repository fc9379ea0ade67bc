"""SVG to PNG through headless Chromium (Debian's `chromium`, which scripts/setup.sh installs;
no Python library): one browser run per picture, at twice the SVG's size so that the picture
stays sharp in print. Headless Chromium keeps part of its window's height for itself, so the
window is made taller than the picture and the PNG's rows below the picture are cut off (a PNG's
rows are cut with zlib alone: each row's filter reads only the rows above it)."""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

from edgesynth.errors import EdgesynthError

SCALE = 2  # device pixels per SVG pixel
SPARE = 400  # px of window height beyond the picture
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    f"--force-device-scale-factor={SCALE}",
]  # fmt: skip
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type -> bytes per pixel at 8 bits


def browser() -> str:
    """The headless browser's path, or one message saying how to get one."""
    for name in BROWSERS:
        if found := shutil.which(name):
            return found
    raise EdgesynthError(
        "--picture: a .png picture is drawn by headless Chromium, and none was found "
        f"(looked for {', '.join(BROWSERS)}); install Debian's `chromium` (scripts/setup.sh does) "
        "or write .svg pictures."
    )


def to_png(svgs: list[tuple[str, str, float, float]]) -> list[bytes]:
    """Each (name, SVG text, width, height) drawn as PNG bytes, SCALE times its size."""
    path = browser()
    found = []
    with tempfile.TemporaryDirectory(prefix="edgesynth-picture-") as tmp:
        for name, text, width, height in svgs:
            source, shot = Path(tmp) / f"{name}.svg", Path(tmp) / f"{name}.png"
            source.write_text(text, encoding="utf-8")
            w, h = math.ceil(width), math.ceil(height)
            window = [f"--window-size={w},{h + SPARE}", f"--screenshot={shot}"]
            command = [path, *FLAGS, f"--user-data-dir={tmp}/profile", *window, source.as_uri()]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                raise EdgesynthError(f"--picture: {path} took over 120 s to draw {name}") from None
            if done.returncode != 0 or not shot.is_file():
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise EdgesynthError(f"--picture: {path} could not draw {name}: {last}")
            found.append(crop_rows(shot.read_bytes(), h * SCALE))
    return found


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise EdgesynthError("--picture: the browser's screenshot is not a PNG")
    chunks, at = [], 8
    while at < len(png):
        (size,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + size]))
        at += 12 + size
    return chunks


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def crop_rows(png: bytes, height: int) -> bytes:
    """The PNG's first `height` rows (8-bit, not interlaced, as Chromium writes them)."""
    chunks = _chunks(png)
    width, tall, depth, colour, method, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1]
    )
    if depth != 8 or interlace or colour not in CHANNELS or tall < height:
        raise EdgesynthError(
            f"--picture: the browser's screenshot ({width}x{tall}, {depth}-bit) cannot be cut "
            f"to {height} rows"
        )
    raw = zlib.decompress(b"".join(data for kind, data in chunks if kind == b"IDAT"))
    row = 1 + width * CHANNELS[colour]
    header = struct.pack(">IIBBBBB", width, height, depth, colour, method, filtering, 0)
    kept = [_chunk(k, d) for k, d in chunks[1:] if k not in (b"IDAT", b"IEND")]
    return b"".join(
        [png[:8], _chunk(b"IHDR", header), *kept,
         _chunk(b"IDAT", zlib.compress(raw[: row * height], 9)), _chunk(b"IEND", b"")]
    )  # fmt: skip
