"""--json: one object per trace (a list under "traces" when several were given)."""
from __future__ import annotations

import json
from pathlib import Path

from ..report.document import SCHEMA_VERSION, Report


def document(reports: list[Report]) -> dict:
    if len(reports) == 1:
        return reports[0].doc
    return {"schema_version": SCHEMA_VERSION, "traces": [r.doc for r in reports]}


def write(reports: list[Report], path: Path) -> None:
    path.write_text(json.dumps(document(reports), indent=2, default=str) + "\n", encoding="utf-8")
