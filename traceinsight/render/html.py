"""-o report.html: one self-contained page (no network), every trace string autoescaped."""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from ..pipeline import to_dict

_env = Environment(loader=PackageLoader("traceinsight", "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True))


def render(analyses) -> str:
    return _env.get_template("report.html.j2").render(docs=[to_dict(a) for a in analyses])


def write(analyses, path: Path) -> None:
    path.write_text(render(analyses), encoding="utf-8")
