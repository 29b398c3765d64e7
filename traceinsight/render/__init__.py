"""render: every output is drawn from report documents (report/document.py) and nothing else.

`write_outputs` is the one entry that writes files; terminal.show prints the summary.
"""
from __future__ import annotations

from pathlib import Path

from ..report.document import Report


def write_outputs(reports: list[Report], html: Path | None = None, json: Path | None = None,
                  markdown: Path | None = None) -> None:
    from . import html as html_r, json_out, markdown as md_r
    if json is not None:
        json_out.write(reports, Path(json))
    if markdown is not None:
        md_r.write(reports, Path(markdown))
    if html is not None:
        html_r.write(reports, Path(html))
