"""render: every output is drawn from report documents (report/document.py) and nothing else.

`write_outputs` is the one entry that writes files (all or nothing: render/files.py); terminal.show prints the summary.
"""
from __future__ import annotations

from pathlib import Path

from ..report.document import Report


def write_outputs(reports: list[Report], html: Path | None = None, json: Path | None = None,
                  markdown: Path | None = None, jobs: list[dict] | None = None) -> None:
    """`jobs`: a distributed job's cross-rank blocks (job/__init__.py), shown before the reports of the ranks
    they name; the JSON is the blocks themselves."""
    from . import html as html_r, job_view, json_out, markdown as md_r
    from .files import write_all
    files: dict[Path, str | bytes] = {}
    if json is not None:
        files[Path(json)] = json_out.text(reports, jobs=jobs)
    if markdown is not None:     # (with the reports' pictures beside it)
        files.update(md_r.files(reports, Path(markdown),
                                preface="\n\n".join(job_view.markdown(b) for b in jobs or ())))
    if html is not None:
        files[Path(html)] = html_r.render(reports, preface="\n".join(job_view.html(b) for b in jobs or ()) or None)
    write_all(files)
