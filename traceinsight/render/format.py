"""How numbers and names look to people, and the one jinja environment every page renders with."""
from __future__ import annotations

import math
import re

from jinja2 import Environment, PackageLoader, select_autoescape

# Autoescaped: every string from a trace is untrusted.
env = Environment(loader=PackageLoader("traceinsight", "templates"),
                  autoescape=select_autoescape(default=True, default_for_string=True),
                  trim_blocks=True, lstrip_blocks=True)
env.tests["string_startswith"] = lambda s, prefix: str(s).startswith(prefix)


def fmt(v, nd: int = 3) -> str:
    """A number for people: no float noise, no exponent for ordinary values."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "n/a"
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        s = f"{v:.{nd}f}".rstrip("0").rstrip(".")
        return s if s not in ("-0", "") else "0"
    return str(v)


def cuda_version(v) -> str | None:
    """Kineto writes CUDA versions as integers, 1000 * major + 10 * minor: 12040 -> "12.4"."""
    if v is None or v == "":
        return None
    try:
        n = int(v)
    except (TypeError, ValueError):
        return str(v)
    return f"{n // 1000}.{(n % 1000) // 10}" if n >= 1000 else str(n)


_WORDS = {"pct": "%", "mb": "MB", "gb": "GB", "kb": "KB", "gbps": "GB/s", "cpu": "CPU", "gpu": "GPU"}


def label(key: str) -> str:
    """evidence keys for people: "achieved_gb_per_s" -> "achieved GB per s"."""
    return " ".join(_WORDS.get(w.lower(), w) for w in str(key).split("_") if w).strip()


def fixed(x, nd=3) -> str:
    if x is None:
        return "-"
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(x):
        return "-"
    if abs(x) >= 1000 and nd > 1:
        nd = 1
    return f"{x:.{nd}f}"


def delta(x, nd=3) -> str:
    if x is None:
        return "-"
    return f"{float(x):+.{nd}f}"


# C0 and C1 control characters but newline and tab: a trace's strings reach a terminal, where ESC
# sequences clear the screen or set its title (a review put them in a GPU name and op names).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(x):
    """A document (or string) with every control character in its strings written as a visible escape."""
    if isinstance(x, str):
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", x)
    if isinstance(x, dict):
        return {k: terminal_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [terminal_safe(v) for v in x]
    return x


def md_text(s) -> str:
    """A string from a trace as Markdown text (a table cell or a sentence): its HTML and link syntax shown,
    not rendered (a review put <img onerror=...> in a GPU name), one line, table pipes escaped."""
    s = terminal_safe(str(s).replace("\r", " ").replace("\n", " "))      # ESC and kin shown, not sent
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("[", "\\[").replace("]", "\\]").replace("|", "\\|")


def md_code(s) -> str:
    """A string from a trace as a Markdown code span, fenced by more backticks than it holds in a row (an op
    name with a backtick had closed its span and let HTML after it render)."""
    s = terminal_safe(str(s).replace("\r", " ").replace("\n", " ")).replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or run else ""
    return f"{fence}{pad}{s}{pad}{fence}"
