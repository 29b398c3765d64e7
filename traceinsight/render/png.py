"""The representative step's timeline as a PNG, for a ticket: no plotting library, a numpy RGB array
written with zlib + struct. Per GPU one wide lane (busy green, idle gaps coloured by cause) with the
top fix's gaps marked above it in black, then the GPU's streams, under the CPU rows of the step's
thread; ticks along the bottom. The legend and the scale are Markdown text beside the image (there
are no fonts here)."""
from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from ..analyses import CAUSES
from ..report.timeline import BUSY_COLOR
from . import sections as S

WIDTH = 1200
MARK = "#111111"
LANE = {"cpu": 12, "idle": 28, "gpu": 14}
MAX_CPU_ROWS, MAX_STREAMS = 3, 6


def png_bytes(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB image (h, w, 3) as PNG bytes (no filter, zlib level 9: deterministic)."""
    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rgb.astype(np.uint8).reshape(h, w * 3)], axis=1)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 9)) + chunk(b"IEND", b""))


def _rgb(hex_color: str) -> tuple[int, int, int]:
    h = hex_color.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _ticks(dur_us: float) -> float:
    """A round tick spacing (us) giving 5-12 ticks over the step."""
    raw = dur_us / 8
    p = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * p for m in (1, 2, 5, 10) if m * p >= raw)


def _lanes(tl) -> list[dict]:
    rows = tl.get("rows") or []
    cpu = [r for r in rows if r.get("group") == "cpu"]
    first = cpu[0]["id"].split(":")[1] if cpu else None
    out = [r for r in cpu if r["id"].split(":")[1] == first][:MAX_CPU_ROWS]
    devices = sorted({r.get("device") for r in rows if r.get("group") in ("idle", "gpu")})
    for dev in devices:
        streams = [r for r in rows if r.get("group") == "gpu" and r.get("device") == dev]
        idle = [r for r in rows if r.get("group") == "idle" and r.get("device") == dev]
        out.append({"id": f"device:{dev}", "group": "idle", "device": dev, "label": f"GPU {dev}",
                    "items": (idle[0]["items"] if idle else []), "busy": [it for s in streams for it in s["items"]]})
        out += streams[:MAX_STREAMS]
    return out


def picture(report) -> tuple[np.ndarray, dict] | None:
    """(RGB array, what it shows) for the report's representative step, or None without a timeline."""
    tl = report.timeline
    if not tl or not tl.get("rows"):
        return None
    dur = float(tl.get("duration_us") or 0) or 1.0
    lanes = _lanes(tl)
    if not lanes:
        return None
    fx = S.fixes(report.doc)
    top = fx[0]["kind"] if fx else None
    mark_cls = f"idle:{top}" if top in CAUSES else None
    classes, palette = list(tl["classes"]), dict(tl["palette"])
    mark_id = classes.index(mark_cls) if mark_cls in classes else -1
    pad, gap, axis = 6, 3, 10
    height = pad + sum(LANE[l["group"]] + gap + (6 if l["id"].startswith("device:") else 0) for l in lanes) + axis + pad
    img = np.full((height, WIDTH, 3), 255, np.uint8)
    scale = WIDTH / dur
    used, marked = {}, 0

    def span(s, d):
        x0 = int(max(0, math.floor(s * scale)))
        x1 = int(min(WIDTH, max(x0 + 1, math.ceil((s + d) * scale))))
        return x0, x1

    y = pad
    for lane in lanes:
        if lane["id"].startswith("device:"):
            y += 6  # the marker strip of the top fix
        h = LANE[lane["group"]]
        img[y:y + h, :] = (243, 243, 243)
        if lane["id"].startswith("device:"):
            for s, d, *_ in lane["busy"]:
                x0, x1 = span(s, d)
                img[y:y + h, x0:x1] = _rgb(BUSY_COLOR)
            if lane["busy"]:
                used["GPU busy"] = BUSY_COLOR
        for s, d, _name, c, *_ in lane["items"]:
            x0, x1 = span(s, d)
            if x1 <= 0 or x0 >= WIDTH:
                continue
            col = palette.get(classes[c], "#999999")
            img[y:y + h, x0:x1] = _rgb(col)
            if not (col == BUSY_COLOR and "GPU busy" in used):  # kernels are the busy colour
                used[tl["labels"].get(classes[c], classes[c])] = col
            if c == mark_id and lane["id"].startswith("device:"):
                img[y - 5:y - 1, x0:x1] = _rgb(MARK)
                marked += 1
        y += h + gap
    tick = _ticks(dur)
    for k in range(int(dur // tick) + 1):
        x = min(WIDTH - 1, int(round(k * tick * scale)))
        img[y:y + (axis if k % 5 == 0 else axis // 2), x] = (90, 90, 90)
    return img, {"step": tl.get("step"), "duration_ms": dur / 1000, "tick_ms": tick / 1000, "legend": used,
                 "lanes": [l.get("label") or l["id"] for l in lanes], "top": top, "marked": marked,
                 "mark_color": MARK}


def picture_file(report) -> tuple[bytes, dict] | None:
    """The PNG's bytes and what it shows (the Markdown's caption), or None where there is no timeline."""
    pic = picture(report)
    if pic is None:
        return None
    img, meta = pic
    return png_bytes(img), meta
