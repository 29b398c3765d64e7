"""--json: one object per trace (a list under "traces" when several were given); for a distributed job, its
cross-rank block ("job", or "jobs" when the files held several runs)."""
from __future__ import annotations

import json
from pathlib import Path

from ..report.document import SCHEMA_VERSION, Report


def document(reports: list[Report]) -> dict:
    if len(reports) == 1:
        return reports[0].doc
    return {"schema_version": SCHEMA_VERSION, "traces": [r.doc for r in reports]}


def job_document(blocks: list[dict]) -> dict:
    return {"schema_version": SCHEMA_VERSION, **({"job": blocks[0]} if len(blocks) == 1 else {"jobs": blocks})}


def text(reports: list[Report], jobs: list[dict] | None = None) -> str:
    doc = job_document(jobs) if jobs else document(reports)
    return json.dumps(doc, indent=2, default=str) + "\n"


def write(reports: list[Report], path: Path, jobs: list[dict] | None = None) -> None:
    Path(path).write_text(text(reports, jobs), encoding="utf-8")
