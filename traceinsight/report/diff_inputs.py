"""The two sides of a diff: a trace (analyzed here) or an earlier analyze --json output."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TraceError
from ..trace.reader import head, is_our_document, read_bytes
from .analyze import Analysis, analyze_file
from .document import build_report, thaw

@dataclass
class Side:
    """One side of a diff: the analyze document, and the Analysis when the side was a trace."""
    path: str
    source: str                    # "trace" | "json"
    doc: dict
    report: Any = None             # report.document.Report for a trace (its timeline is drawn)
    full_tables: bool = False      # kernel/op tables list everything (trace) or the top 50 (json)
    warnings: list[str] = field(default_factory=list)


def load_analysis_json(path: Path) -> dict | None:
    data, _ = read_bytes(path)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceError(path, f"not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(doc, dict):
        raise TraceError(path, "not a Kineto trace nor a traceinsight analyze --json output")
    if "traceEvents" in doc:
        return None        # a trace after all (its "traceEvents" came late): the caller analyzes it
    if doc.get("kind") == "traceinsight.diff":
        raise TraceError(path, "a traceinsight diff output; give a trace or an analyze --json output")
    if "traces" in doc and "findings" not in doc:
        n = len(doc["traces"]) if isinstance(doc["traces"], list) else "several"
        raise TraceError(path, f"an analyze --json output of {n} traces; diff compares one trace per side "
                               "(give the trace files, or analyze --json one trace at a time)")
    if "job" in doc and "findings" not in doc:
        raise TraceError(path, "an analyze --json output of a multi-rank job; diff compares one trace per side "
                               "(give a rank's trace, or its own analyze --json output)")
    missing = [k for k in ("schema_version", "summary", "findings") if k not in doc]
    if missing:
        raise TraceError(path, "JSON with \"schema_version\" but not a traceinsight analyze --json output "
                               f"(no {', '.join(repr(k) for k in missing)})")
    if not isinstance(doc["summary"], dict) or not isinstance(doc["findings"], list):
        raise TraceError(path, "not a traceinsight analyze --json output (summary/findings have the wrong type)")
    wrong = _wrong_types(doc)
    if wrong:      # (an edited file had crashed the diff: "trace": "x", a finding's kind null)
        raise TraceError(path, f"not a traceinsight analyze --json output ({wrong} has the wrong type)")
    if doc.get("summary", {}).get("median_step_ms") is None:
        raise TraceError(path, "analyze --json output without a median step time; nothing to compare")
    return doc


def _wrong_types(doc: dict) -> str | None:
    """The first field diff reads that does not have the type analyze writes, or None."""
    if not isinstance(doc.get("trace", {}), dict):
        return "trace"
    for key in ("findings", "minor_findings", "notes", "steps", "top_kernels", "top_ops"):
        rows = doc.get(key, [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            return key
    for key in ("findings", "minor_findings", "notes"):
        if not all(isinstance(f.get("kind"), str) for f in doc.get(key, [])):
            return f"a kind in {key}"
    for key in ("whatif", "summary"):
        if not isinstance(doc.get(key, {}), dict):
            return key
    return None


def load_side(path: str | Path) -> Side:
    """A trace file or an analyze --json output -> Side. Raises TraceError on bad input."""
    path = Path(path)
    if path.is_dir():
        raise TraceError(path, "is a directory; diff takes one trace file (or one analyze --json output) "
                               "per side")
    if is_our_document(head(path)):
        doc = load_analysis_json(path)
        if doc is not None:
            return Side(path=str(path), source="json", doc=doc, report=None, full_tables=False)
    return side_from_analysis(analyze_file(path), str(path))


# Two timelines on one diff page: a lighter item budget for each than a report's one.
DIFF_TIMELINE_ITEMS = 12_000


def side_from_analysis(a: Analysis, path: str | None = None, timeline_items: int = DIFF_TIMELINE_ITEMS) -> Side:
    # The full tables, not the top 50: then "removed" and "added" are exact.
    r = build_report(a, timeline_items=timeline_items, full_tables=True)
    return Side(path=path or str(a.model.path), source="trace", doc=thaw(r.doc), report=r, full_tables=True,
                warnings=list(r.warnings))
