"""--json: one object per trace (a list under "traces" when several were given)."""
from __future__ import annotations

import json
from pathlib import Path

from ..pipeline import SCHEMA_VERSION, to_dict


def document(analyses) -> dict:
    if len(analyses) == 1:
        return to_dict(analyses[0])
    return {"schema_version": SCHEMA_VERSION, "traces": [to_dict(a) for a in analyses]}


def write(analyses, path: Path) -> None:
    path.write_text(json.dumps(document(analyses), indent=2, default=str) + "\n", encoding="utf-8")
