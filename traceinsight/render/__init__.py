"""render: every output is drawn from report documents (report/document.py) and nothing else.

`write_outputs` is the one entry that writes files; terminal.show prints the summary.
"""
from __future__ import annotations

from pathlib import Path

from ..report.document import Report


def write_outputs(reports: list[Report], html: Path | None = None, json: Path | None = None,
                  markdown: Path | None = None, jobs: list[dict] | None = None) -> None:
    """`jobs`: a distributed job's cross-rank blocks (job/__init__.py), shown before the reports of the ranks
    they name; the JSON is the blocks themselves."""
    from . import html as html_r, job_view, json_out, markdown as md_r
    if json is not None:
        json_out.write(reports, Path(json), jobs=jobs)
    if markdown is not None:     # (with the reports' pictures beside it)
        md_r.write(reports, Path(markdown), preface="\n\n".join(job_view.markdown(b) for b in jobs or ()))
    if html is not None:
        html_r.write(reports, Path(html), preface="\n".join(job_view.html(b) for b in jobs or ()) or None)
