"""report.html in a real headless browser: the screenshot shows the charts (not a blank page).

Skipped where no Chromium/Chrome is installed (Debian: `apt-get install chromium`). The PNG is
decoded here (zlib + the five PNG row filters) so the test needs no imaging library.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from pipeline.report.html import HTML_NAME
from pipeline.report.svg import KEPT

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# a browser that fetches nothing, keeps no profile and needs no GPU or display
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(browser: str, page: Path, out: Path, profile: Path, size=(800, 600)) -> None:
    cmd = [
        browser,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
        f"--screenshot={out}",
        page.resolve().as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.is_file(), f"no screenshot (exit {res.returncode}): {res.stderr[-2000:]}"


def _unfilter(kind: int, row: bytearray, prior: bytearray, bpp: int) -> bytearray:
    """Undo one PNG row filter in place (0 none, 1 sub, 2 up, 3 average, 4 paeth)."""
    n = len(row)
    if kind == 1:
        for i in range(bpp, n):
            row[i] = (row[i] + row[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            row[i] = (row[i] + prior[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = row[i - bpp] if i >= bpp else 0
            row[i] = (row[i] + ((left + prior[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prior[i], prior[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    return row


def decode_png(data: bytes) -> np.ndarray:
    """uint8 [height, width, channels] of an 8-bit RGB or RGBA non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prior, rows = bytearray(stride), []
    for y in range(height):
        start = y * (stride + 1)
        row = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prior, bpp)
        rows.append(bytes(row))
        prior = row
    return np.frombuffer(b"".join(rows), np.uint8).reshape(height, width, bpp)


def test_png_decoder_on_a_known_image():
    """A 2x2 RGB image, row 0 filtered with Sub, row 1 with Paeth: red, green / blue, white."""
    r0 = bytes([1, 255, 0, 0, 1, 255, 0])  # sub: (255,0,0) then (0,255,0) - (255,0,0)
    # paeth: pixel 0 predicts from above, (255,0,0): 1+255, 0+0, 255+0 = blue; pixel 1 predicts
    # R from the left (0), G from above (255), B from the left (255): 255, 0, 0 give white
    r1 = bytes([4, 1, 0, 255, 255, 0, 0])
    img = decode_png(_png(2, 2, r0 + r1))
    assert img.tolist() == [[[255, 0, 0], [0, 255, 0]], [[0, 0, 255], [255, 255, 255]]]


def _png(width: int, height: int, filtered: bytes) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(filtered))
        + chunk(b"IEND", b"")
    )


def test_report_html_renders_charts_in_a_headless_browser(report_runs, tmp_path):
    browser = find_browser()
    if browser is None:
        pytest.skip("no chromium/chrome installed (Debian: apt-get install chromium)")
    out = tmp_path / "report.png"
    screenshot(browser, report_runs["a"] / HTML_NAME, out, tmp_path / "profile")
    img = decode_png(out.read_bytes())[:, :, :3]
    assert img.shape[:2] == (600, 800)
    colours, counts = np.unique(img.reshape(-1, 3), axis=0, return_counts=True)
    assert len(colours) >= 16  # text, bars, grid lines: not a blank page
    assert counts.max() < 0.95 * counts.sum()  # the background is not everything
    bar = tuple(int(KEPT[i : i + 2], 16) for i in (1, 3, 5))
    assert (img == bar).all(axis=2).sum() > 500  # the funnel's bars were drawn


def test_docs_screenshot_is_a_small_png_the_docs_show():
    root = Path(__file__).resolve().parent.parent
    png = root / "docs" / "report.png"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 300_000
    assert "](report.png)" in (root / "docs" / "overview.md").read_text(encoding="utf-8")
