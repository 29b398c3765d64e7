"""Job mode of `analyze`: the files are ranks of one distributed run (or of several). One report for all
ranks: the cross-rank block (straggler and why, collective wait, exposed communication, bandwidth) comes
first, then the full single-rank report of the straggler (or of the median rank when none)."""
from __future__ import annotations

import json as _json
from pathlib import Path

from .. import job
from ..render import html as html_r, job_view, markdown as md_r, terminal
from ..report.document import SCHEMA_VERSION, Report, build_report
from ..report.timeline import items_per_trace
from .common import analyze_one, warn


def _focus_file(block: dict) -> str | None:
    """The rank whose own report follows the job's: the straggler, else the median rank."""
    want = (block.get("straggler") or {}).get("rank")
    if want is None:
        want = block.get("median_rank")
    rows = block.get("ranks") or []
    return next((r["file"] for r in rows if r["rank"] == want), rows[0]["file"] if rows else None)


def analyze_job_and_write(files: list[str], engine: str, workers: int | None, address: str | None,
                          steps: str | None, full_ranks: str | None, html: Path | None = None,
                          json: Path | None = None, markdown: Path | None = None, show: bool = True) -> list[dict]:
    # Files the user named must read: one that does not is an error naming it (as for one trace).
    blocks = job.analyze_jobs(files, engine=engine, workers=workers, address=address, steps=steps,
                              full_ranks=full_ranks or (), strict=True)
    focus: list[Report | None] = []
    budget = items_per_trace(len(blocks))
    for b in blocks:
        for w in b.get("warnings") or []:
            warn(w)
        f = _focus_file(b)
        focus.append(build_report(analyze_one(Path(f), in_job=True), timeline_items=budget) if f else None)
    if json is not None:
        doc = {"schema_version": SCHEMA_VERSION}
        doc.update({"job": blocks[0]} if len(blocks) == 1 else {"jobs": blocks})
        Path(json).write_text(_json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    reports = [r for r in focus if r is not None]
    if markdown is not None:     # (with the focus ranks' pictures beside it, as for one trace)
        md_r.write(reports, Path(markdown), preface="\n\n".join(job_view.markdown(b) for b in blocks))
    if html is not None:
        html_r.write(reports, Path(html), preface="\n".join(job_view.html(b) for b in blocks))
    if show:     # (after the files: a summary piped into `head` must not cost them)
        for b, r in zip(blocks, focus):
            print(job_view.terminal(b))
            if r is not None:
                terminal.show([r])
    return blocks
