"""Job mode of `analyze`: the files are ranks of one distributed run (or of several). One report for all
ranks: the cross-rank block (straggler and why, collective wait, exposed communication, bandwidth) comes
first, then the full single-rank report of the straggler (job.focus_rank: else the rank that arrives last but sets
no pace, else the median rank)."""
from __future__ import annotations

from pathlib import Path

from .. import job
from ..render import job_view, terminal, write_outputs
from ..report.document import Report, build_report
from ..report.timeline import items_per_trace
from .common import analyze_one, warn


def _focus(block: dict) -> tuple[int | None, str | None]:
    """The rank whose own report follows the job's (job.focus_rank), and its file."""
    want = job.focus_rank(block)
    rows = block.get("ranks") or []
    row = next((r for r in rows if r["rank"] == want), rows[0] if rows else None)
    return (row["rank"], row["file"]) if row else (None, None)


def analyze_job_and_write(files: list[str], engine: str, workers: int | None, address: str | None,
                          steps: str | None, full_ranks: str | None, html: Path | None = None,
                          json: Path | None = None, markdown: Path | None = None, show: bool = True) -> list[dict]:
    # Files the user named must read: one that does not is an error naming it (as for one trace).
    waits: dict = {}
    blocks = job.analyze_jobs(files, engine=engine, workers=workers, address=address, steps=steps,
                              full_ranks=full_ranks or (), strict=True, peer_waits_out=waits)
    focus: list[Report | None] = []
    budget = items_per_trace(len(blocks))
    for i, b in enumerate(blocks):
        for w in b.get("warnings") or []:
            warn(w)
        rank, f = _focus(b)
        # (read as the job's JSON reads it: with its waits for the other ranks taken out)
        focus.append(build_report(analyze_one(Path(f), in_job=True, peer_waits=waits.get((i, rank))),
                                  timeline_items=budget) if f else None)
    write_outputs([r for r in focus if r is not None], html=html, json=json, markdown=markdown, jobs=blocks)
    if show:     # (after the files: a summary piped into `head` must not cost them)
        for b, r in zip(blocks, focus):
            print(job_view.terminal(b))
            if r is not None:
                terminal.show([r])
    return blocks
