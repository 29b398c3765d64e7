"""Input Dims (record_shapes) as the text tables show: the model keeps each op's raw JSON bytes and turns
only the few a table shows into text."""
from __future__ import annotations

import json
import re
from functools import lru_cache


def dims_text(raw, limit: int = 200) -> str:
    """Input Dims as Kineto writes them ([[1, 8, 141, 64], []]) whatever the file's indentation (a pretty-printed
    trace's line breaks had filled the text, showing 2 of an op's 8 inputs), cut after a whole dimension."""
    b = re.sub(rb"\s+", b"", bytes(raw)).replace(b",", b", ")
    if not b or b == b"null":
        return ""
    if len(b) > limit:
        b = b[:b.rfind(b",", 0, limit) + 1 or limit] + b"..."
    return b.decode("utf-8", "replace")


def parsed(raw) -> list | None:
    """Input Dims as lists ([[4096, 768], [768, 50257]]), or None where missing or not JSON. Parsed once per distinct
    text: a program's products repeat a few shapes thousands of times. (Shared: callers read, never change, them.)"""
    if not raw:
        return None
    dims = _parsed(bytes(raw))
    return dims if isinstance(dims, list) else None


@lru_cache(maxsize=65536)
def _parsed(text: bytes):
    try:
        return json.loads(text)
    except ValueError:
        return None
