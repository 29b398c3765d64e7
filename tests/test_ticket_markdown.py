"""--markdown ticket.md is ticket-ready: the representative step's timeline as ticket.png beside it
(GPU busy and idle gaps coloured by cause, the top fix's gaps marked), referenced from the Markdown,
details folded into <details>; an existing PNG is never overwritten without --force."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from conftest import REPO_ROOT
from traceinsight.analyses import CAUSE_COLORS
from traceinsight.render.png import MARK, png_bytes
from traceinsight.report.timeline import BUSY_COLOR

LAUNCH_BOUND = REPO_ROOT / "sample_traces" / "launch_tiny_conv__before.json.gz"


def read_png(path: Path) -> np.ndarray:
    """An independent reader for the PNGs we write: 8-bit RGB, filter 0 rows."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        n, tag = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(tag + body) & 0xFFFFFFFF
        if tag == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2)
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    assert not raw[:, 0].any()
    return raw[:, 1:].reshape(h, w, 3)


def _has(img: np.ndarray, hex_color: str) -> bool:
    rgb = [int(hex_color.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]
    return bool((img == rgb).all(axis=2).any())


def test_png_writer_round_trips():
    img = np.zeros((3, 4, 3), np.uint8)
    img[1, 2] = (10, 200, 30)
    p = Path(__file__).parent / ".png_roundtrip.png"
    try:
        p.write_bytes(png_bytes(img))
        assert (read_png(p) == img).all()
    finally:
        p.unlink()


def test_markdown_writes_and_references_the_step_picture(run_cli, tmp_path):
    md = tmp_path / "ticket.md"
    p = run_cli(["analyze", LAUNCH_BOUND, "--markdown", md, "-q"])
    assert p.returncode == 0, p.stderr
    text = md.read_text()
    png = tmp_path / "ticket.png"
    assert png.is_file() and "](ticket.png)" in text
    img = read_png(png)
    assert img.shape[1] == 1200 and img.shape[0] > 60
    assert _has(img, BUSY_COLOR)                                   # GPU busy
    assert any(_has(img, c) for c in CAUSE_COLORS.values())      # idle gaps by cause
    assert _has(img, MARK) and "Black marks above a GPU row: the idle gaps of the top fix" in text
    assert "<details>" in text and "</details>" in text
    assert text.index("](ticket.png)") < text.index("<details>")   # the picture before the folded details


def test_an_existing_png_is_not_overwritten_without_force(run_cli, tmp_path):
    png = tmp_path / "ticket.png"
    png.write_bytes(b"mine")
    p = run_cli(["analyze", LAUNCH_BOUND, "--markdown", tmp_path / "ticket.md", "-q"])
    assert p.returncode == 2 and "ticket.png: already exists" in p.stderr
    assert png.read_bytes() == b"mine" and not (tmp_path / "ticket.md").exists()
    p = run_cli(["analyze", LAUNCH_BOUND, "--markdown", tmp_path / "ticket.md", "-q", "--force"])
    assert p.returncode == 0 and png.read_bytes()[:4] == b"\x89PNG"
