"""The two sides of a diff: a trace (analyzed here) or an earlier analyze --json output; and whether the two
are like for like (same machine, program and profiler options)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analyses.fusion_candidates import ELEMENTWISE
from ..errors import TraceError
from ..trace.facts import TRITON_KERNEL
from ..trace.kernel_names import normalize_kernel
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


# --------------------------------------------------------------------------- like for like

TOP_OPS_FOR_SHAPES = 5
OPS_TO_VOUCH = 2           # ops compared by shapes before that check says the programs are alike
NO_OP_SHARE = 0.5          # of a side's GPU time with no op that launched it (a graph replay): ops cannot vouch
# Kernel overlap below which two programs are not alike: the larger of the time-weighted overlap of the
# normalized kernel names and the share of names in common. A graph replay runs the eager program's kernels
# (launch_tiny_conv: 0.98 weighted); real fixes swap some (TF32's GEMMs: fp32_matmul 0.62 of names, channels_last,
# torch.compile's Triton kernels); the eight sample workloads' cross pairs stay at or below 0.25 where the
# other checks cannot tell them apart.
KERNEL_OVERLAP_MIN = 0.4
PROFILER_OPTIONS = ("with_stack", "record_shapes", "profile_memory", "with_flops")


def profiler_options(doc: dict) -> list[str] | None:
    """The options the side was profiled with (the analysis's reading of the header and the events), or None."""
    said = (doc.get("whatif") or {}).get("profiler_options")
    if isinstance(said, str):
        return [o for o in PROFILER_OPTIONS if o in said]
    hdr = (doc.get("trace") or {}).get("profiler")
    if isinstance(hdr, dict) and any(k in hdr for k in PROFILER_OPTIONS):
        return [o for o in PROFILER_OPTIONS if hdr.get(o)]
    return None


def options_words(opts: list[str]) -> str:
    return " + ".join(opts) if opts else "default options"


def _shape_check(db: dict, da: dict) -> tuple[dict | None, int]:
    """The first of the before trace's top ops (by GPU time, or a CPU-only run's by self time; with recorded
    shapes) that the after trace runs only with other input shapes (a different batch size or model), and how
    many shared ops were compared."""
    def by_op(doc):
        rows, ms = (doc.get("top_ops"), "gpu_ms_per_step") if doc.get("top_ops") else (
            (doc.get("cpu_time") or {}).get("top_ops"), "self_ms_per_step")
        out: dict[str, list[tuple[str, float]]] = {}
        for r in rows or []:
            if isinstance(r, dict) and r.get("input_dims") and r.get("op") != "(no op)":
                out.setdefault(r["op"], []).append((str(r["input_dims"]), _num(r.get(ms))))
        return out
    ob, oa = by_op(db), by_op(da)
    ranked = sorted(ob, key=lambda op: -max(ms for _, ms in ob[op]))
    checked = 0
    for op in ranked:
        if op not in oa:
            continue
        checked += 1
        if not {d for d, _ in ob[op]} & {d for d, _ in oa[op]}:
            return {"op": op, "before": max(ob[op], key=lambda x: x[1])[0],
                    "after": max(oa[op], key=lambda x: x[1])[0]}, checked
        if checked >= TOP_OPS_FOR_SHAPES:
            break
    return None, checked


def _num(x) -> float:
    try:
        return float(x or 0.0)
    except (TypeError, ValueError):
        return 0.0


def _no_op_share(doc: dict) -> float:
    rows = [r for r in doc.get("top_ops") or [] if isinstance(r, dict)]
    total = sum(_num(r.get("gpu_ms_per_step")) for r in rows)
    return sum(_num(r.get("gpu_ms_per_step")) for r in rows if r.get("op") == "(no op)") / total if total else 0.0


def _kernels(doc: dict) -> list[tuple[str, float]]:
    return [(str(r.get("name", "")), _num(r.get("ms_per_step"))) for r in doc.get("top_kernels") or []
            if isinstance(r, dict) and r.get("kind", "kernel") == "kernel"]


def _weights(doc: dict, compiled: bool) -> tuple[dict, str]:
    """Time per step by normalized kernel name; for a side without kernels, its ops' self CPU time by name.
    `compiled` (a side runs a compiler's Triton kernels): those, and the eager elementwise kernels they replace,
    are left out on both sides, as their names cannot be matched (fusion_elementwise: 0% in common)."""
    out: dict[str, float] = {}
    kernels = _kernels(doc)
    for name, ms in kernels:
        if compiled and (TRITON_KERNEL.search(name) or re.search(ELEMENTWISE, name)):
            continue
        k = normalize_kernel(name, "kernel")
        out[k] = out.get(k, 0.0) + ms
    if out or kernels:
        return out, "kernels"
    for r in (doc.get("cpu_time") or {}).get("top_ops") or []:
        if isinstance(r, dict):
            out[str(r.get("op"))] = out.get(str(r.get("op")), 0.0) + _num(r.get("self_ms_per_step"))
    return out, "CPU ops"


def overlap(tb: dict, ta: dict) -> float | None:
    """max(time-weighted overlap, share of names in common) of two {name: ms} tables; None if one is empty."""
    sb, sa = sum(tb.values()), sum(ta.values())
    if not tb or not ta or sb <= 0 or sa <= 0:
        return None
    weighted = sum(min(tb.get(k, 0.0) / sb, ta.get(k, 0.0) / sa) for k in set(tb) | set(ta))
    return max(weighted, len(set(tb) & set(ta)) / len(set(tb) | set(ta)))


def comparability(db: dict, da: dict) -> dict:
    """Reasons the two sides may not be like for like, and what could be checked: {"warnings", "checked",
    "kernel_overlap"}. Nothing checked about the program itself -> like for like is unknown, not yes."""
    out, checked = [], []
    tb, ta = db.get("trace") or {}, da.get("trace") or {}
    for key, what in (("gpu", "GPUs"), ("torch_version", "torch versions"),
                      ("cuda_runtime_version", "CUDA runtime versions"), ("world_size", "world sizes"),
                      ("step_source", "step definitions")):
        vb, va = tb.get(key), ta.get(key)
        if vb not in (None, "", "unknown GPU") and va not in (None, "", "unknown GPU") and vb != va:
            out.append(f"different {what}: {vb} before, {va} after")
    mm, n_ops = _shape_check(db, da)
    if mm:
        out.append(f"input shapes of the top ops differ (different batch size or model?): {mm['op']} ran on "
                   f"{mm['before']} before and on {mm['after']} after")
    graphed = max(_no_op_share(db), _no_op_share(da)) > NO_OP_SHARE
    if n_ops >= OPS_TO_VOUCH and not graphed:
        checked.append(f"input shapes of {n_ops} shared ops")
    ov = None
    if not mm and not checked:
        # The ops cannot vouch (a graph replay launches its kernels under no op; no shapes recorded): the
        # kernels (or a CPU-only run's ops) can.
        compiled = any(TRITON_KERNEL.search(n) for d in (db, da) for n, _ in _kernels(d))
        (wb, what), (wa, _) = _weights(db, compiled), _weights(da, compiled)
        ov = overlap(wb, wa)
        if ov is not None:
            checked.append(f"{what} in common ({100 * ov:.0f}%)")
            if ov < KERNEL_OVERLAP_MIN:
                out.append(f"the two run different {what}: {100 * ov:.0f}% in common (by time or by name, the "
                           f"larger), where the same program's fixes keep {100 * KERNEL_OVERLAP_MIN:.0f}% or more")
    return {"warnings": out, "checked": checked, "kernel_overlap": None if ov is None else round(ov, 3)}
