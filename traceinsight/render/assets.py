"""What pages inline: our static files, and JSON made safe to sit inside <script> tags."""
from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources

import numpy as np

_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def dumps_for_script(obj) -> str:
    """json.dumps with `<`, `>`, `&`, U+2028 and U+2029 escaped, safe inside
    <script type="application/json">: untrusted strings stay text."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default)
    for ch, rep in _SCRIPT_ESCAPES.items():
        s = s.replace(ch, rep)
    return s


def _default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


@lru_cache(maxsize=None)
def static_asset(name: str) -> str:
    return resources.files("traceinsight").joinpath("static", name).read_text(encoding="utf-8")


def safe_js(src: str) -> str:
    """Our own script file, made unable to close its <script> element early."""
    return src.replace("</", "<\\/")
