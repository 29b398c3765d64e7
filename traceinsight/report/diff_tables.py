"""diff's tables: causes, kernels and ops matched across the two sides, with what changed, and the small
number helpers the diff document shares."""
from __future__ import annotations

import math

from ..analyses import CAUSES
from .diff_inputs import Side
from .cpu_time import TOP_OPS
from .tables import TABLE_ROWS
from ..trace.kernel_names import normalize_kernel

# Per kernel / op: at least this share of the larger side and KERNEL_MIN_MS per step.
KERNEL_REL = 0.05
KERNEL_MIN_MS = 0.001
ROW_LIMIT = 200   # rows per table kept in the diff document (sorted by |change|)


def _f(x) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


def _r(x, nd=4):
    v = _f(x)
    return None if v is None else round(v, nd)


def _fmt_ms(v: float) -> str:
    v = abs(v)
    if v >= 100:
        return f"{v:.1f} ms"
    if v >= 1:
        return f"{v:.2f} ms"
    if v >= 0.01:
        return f"{v:.3f} ms"
    return f"{v * 1000:.1f} us"


def _status(b: float, a: float, rel: float, min_ms: float) -> str:
    d = a - b
    if abs(d) >= max(rel * max(abs(a), abs(b)), min_ms):
        return "grown" if d > 0 else "shrunk"
    return "unchanged"


def _aggregate(rows: list[dict], key_fn, ms_key: str, count_key: str, label_fn) -> dict:
    out: dict = {}
    for r in rows or []:
        if not isinstance(r, dict):
            continue
        k = key_fn(r)
        e = out.setdefault(k, {"label": label_fn(r), "ms": 0.0, "count": 0.0, "names": []})
        e["ms"] += _f(r.get(ms_key)) or 0.0
        # (a count the side does not know, an analyze --json output's op calls, stays unknown)
        c = _f(r.get(count_key))
        e["count"] = None if c is None or e["count"] is None else e["count"] + c
        raw = r.get("name") or r.get("op")
        if raw is not None and raw not in e["names"] and len(e["names"]) < 5:
            e["names"].append(raw)
    return out


def _table_diff(before: dict, after: dict, complete_b: bool, complete_a: bool, floor_b: float,
                floor_a: float) -> tuple[list[dict], dict]:
    rows = []
    for key in dict.fromkeys([*before, *after]):
        b, a = before.get(key), after.get(key)
        mb = b["ms"] if b else 0.0
        ma = a["ms"] if a else 0.0
        if b and not a:
            status = "removed" if complete_a else "dropped from the top list"
        elif a and not b:
            status = "added" if complete_b else "entered the top list"
        else:
            s = _status(mb, ma, KERNEL_REL, KERNEL_MIN_MS)
            status = {"grown": "slower", "shrunk": "faster"}.get(s, "unchanged")
        e = b or a
        rows.append({
            "key": key if isinstance(key, str) else list(key),
            "label": e["label"],
            "status": status,
            "before_ms_per_step": _r(mb) if b else (None if not complete_b else 0.0),
            "after_ms_per_step": _r(ma) if a else (None if not complete_a else 0.0),
            "delta_ms_per_step": _r(ma - mb),
            "before_count_per_step": _r(b["count"], 2) if b else (None if not complete_b else 0.0),
            "after_count_per_step": _r(a["count"], 2) if a else (None if not complete_a else 0.0),
            "names_before": b["names"] if b else [],
            "names_after": a["names"] if a else [],
            # A row missing from a truncated top-50 table took at most the smallest listed time.
            "bound_note": (f"after: at most {_fmt_ms(floor_a)} (not in the top list)" if b and not a and not complete_a
                           else f"before: at most {_fmt_ms(floor_b)} (not in the top list)" if a and not b
                           and not complete_b else None),
        })
    rows.sort(key=lambda r: -abs(r["delta_ms_per_step"] or 0))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    totals = {
        "before_ms_per_step": _r(sum(e["ms"] for e in before.values())),
        "after_ms_per_step": _r(sum(e["ms"] for e in after.values())),
    }
    for st in ("added", "removed", "faster", "slower"):
        sel = [r for r in rows if r["status"] == st]
        totals[f"{st}_delta_ms_per_step"] = _r(sum(r["delta_ms_per_step"] or 0 for r in sel))
    return rows, {"counts": counts, **totals}


# analyze --json keeps the top TABLE_ROWS kernels and ops: a shorter list is whole.
JSON_TABLE_LIMIT = TABLE_ROWS


def _complete(s: Side, key: str) -> bool:
    return s.full_tables or len(s.doc.get(key) or []) < JSON_TABLE_LIMIT


def _compare_table(sb: Side, sa: Side, table: str, key, ms_key: str, count_key: str, label) -> dict:
    """Rows of one table (kernels or ops) matched by key across the sides, with what changed."""
    return _compare_rows(sb.doc.get(table), sa.doc.get(table), _complete(sb, table), _complete(sa, table),
                         key, ms_key, count_key, label)


def _compare_rows(rows_b, rows_a, cb: bool, ca: bool, key, ms_key: str, count_key: str, label) -> dict:
    tb = _aggregate(rows_b, key, ms_key, count_key, label)
    ta = _aggregate(rows_a, key, ms_key, count_key, label)
    fb = min((e["ms"] for e in tb.values()), default=0.0)
    fa = min((e["ms"] for e in ta.values()), default=0.0)
    rows, summary = _table_diff(tb, ta, cb, ca, fb, fa)
    return {"rows": rows[:ROW_LIMIT], "rows_total": len(rows), "summary": summary,
            "complete": {"before": cb, "after": ca}}


def compare_cpu_ops(sb: Side, sa: Side) -> dict:
    """The ops by self CPU time per step (the document's cpu_time table, its top TOP_OPS), matched by name:
    where a CPU-only run's time went, which the GPU tables cannot say."""
    def top(s: Side) -> list:
        return ((s.doc.get("cpu_time") or {}).get("top_ops")) or []
    name = lambda r: str(r.get("op", ""))     # noqa: E731
    return _compare_rows(top(sb), top(sa), len(top(sb)) < TOP_OPS, len(top(sa)) < TOP_OPS, name,
                         "self_ms_per_step", "calls_per_step", name)


def compare_kernels(sb: Side, sa: Side) -> dict:
    key = lambda r: normalize_kernel(r.get("name", ""), r.get("kind", "kernel"))
    out = _compare_table(sb, sa, "top_kernels", key, "ms_per_step", "count_per_step", key)
    out["normalization"] = ("memcpy/memset exact; kernels: drop return type, argument list and template "
                            "arguments, keep up to 3 distinctive identifiers from the template arguments")
    return out


def _op_label(r: dict) -> str:
    d = r.get("input_dims") or ""
    return f"{r.get('op', '')} {d}".strip()


def _has_shapes(rows) -> bool:
    return any(isinstance(r, dict) and r.get("input_dims") for r in rows or [])


def compare_ops(sb: Side, sa: Side) -> dict:
    """Ops by GPU time, matched by (name, input shapes); by name alone where only one side recorded shapes
    (record_shapes on one side: every op would otherwise read as removed and added). The count is op calls per
    step, not the GPU activities they launched: an after side that adds a memset per call has as many calls (an
    analyze --json output written before the op table held them has none: null)."""
    by_shapes = _has_shapes(sb.doc.get("top_ops")) == _has_shapes(sa.doc.get("top_ops"))

    def rows(s: Side) -> list[dict]:
        return [dict(r, calls_per_step=r.get("calls_per_step")) for r in s.doc.get("top_ops") or []
                if isinstance(r, dict)]
    if by_shapes:
        key = lambda r: (str(r.get("op", "")), str(r.get("input_dims") or ""))     # noqa: E731
        label = _op_label
    else:
        key = lambda r: (str(r.get("op", "")), "")     # noqa: E731
        label = lambda r: str(r.get("op", ""))     # noqa: E731
    out = _compare_rows(rows(sb), rows(sa), _complete(sb, "top_ops"), _complete(sa, "top_ops"), key,
                        "gpu_ms_per_step", "calls_per_step", label)
    for r in out["rows"]:
        r["op"], r["input_dims"] = r["key"]
    out["matched_by"] = ("op name and input shapes" if by_shapes else
                         "op name only: input shapes were recorded on one side only")
    out["count_is"] = "op calls per step"
    return out


# --------------------------------------------------------------------------- causes

CAUSE_REL = 0.10      # a cause's change counts (grown / shrunk) from this share of the larger side
CAUSE_MIN_MS = 0.005  # and this many ms per step
NOT_BEFORE, NOT_AFTER = "not reported before", "not reported after"
# Said wherever the causes table is: each row is its own measure, and the measures overlap.
CAUSES_NOTE = ("Each row is that cause's own measure of its cost per step, and the measures can overlap (an "
               "optimizer's CPU time lies inside the GPU idle that launch_overhead measures): the rows are not "
               "added up, and their changes need not sum to the step's change.")


def compare_causes(db: dict, da: dict) -> list[dict]:
    """Per finding kind / idle cause: cost per step before and after, and what happened to it. A kind a side's
    analysis did not report at all (neither a finding nor a minor one, and no idle time of that cause) has no
    cost there (null, "not reported"), not 0: GPU-side findings rank only where the GPU is the bottleneck."""
    rows = []

    def index(doc):
        major = {f["kind"]: f for f in doc.get("findings") or [] if isinstance(f, dict) and "kind" in f}
        minor = {f["kind"]: f for f in doc.get("minor_findings") or [] if isinstance(f, dict) and "kind" in f}
        idle = (doc.get("summary") or {}).get("idle_by_cause_ms_median_per_step")
        return major, minor, idle

    mb, nb, ib = index(db)
    ma, na, ia = index(da)
    kinds = list(dict.fromkeys([*mb, *ma, *nb, *na, *CAUSES, *(ib or {}), *(ia or {})]))

    def cost(kind, major, minor, idle) -> float | None:
        f = major.get(kind) or minor.get(kind)
        if f is not None and _f(f.get("measured_cost_ms_per_step")) is not None:
            return float(f["measured_cost_ms_per_step"])
        if isinstance(idle, dict) and (kind in idle or kind in CAUSES):
            return _f(idle.get(kind)) or 0.0
        return None

    for k in kinds:
        cb, ca = cost(k, mb, nb, ib), cost(k, ma, na, ia)
        if cb is None and ca is None:
            continue
        rep_b = "finding" if k in mb else ("minor" if k in nb else None)
        rep_a = "finding" if k in ma else ("minor" if k in na else None)
        how = None
        if cb is None:
            status = NOT_BEFORE
        elif ca is None and rep_b == "finding":
            # A ranked finding the after analysis no longer finds is resolved: its analysis ran and the evidence is
            # gone (fp32 GEMMs now TF32). Only a side that never reported the kind has no figure.
            status, how = "resolved", "gone"
        elif ca is None:
            status = NOT_AFTER
        else:
            trend = _status(cb, ca, CAUSE_REL, CAUSE_MIN_MS)
            if rep_b == "finding" and rep_a != "finding" and (trend == "shrunk" or ca <= 0):
                # Resolved only when its cost went down: a cause that grew is "grown" even when it
                # dropped out of the ranked findings (a longer step can push it under the bar).
                status = "resolved"
                how = "gone" if rep_a is None else "below the report threshold"
            elif rep_a == "finding" and rep_b != "finding" and (trend == "grown" or cb <= 0):
                status = "new"
            else:
                status = trend
                if status == "unchanged" and cb == 0 and ca == 0:
                    continue
        fb, fa = mb.get(k) or nb.get(k), ma.get(k) or na.get(k)
        rows.append({
            "kind": k,
            "status": status,
            "resolved_how": how,
            "before_ms_per_step": _r(cb),
            "after_ms_per_step": _r(ca),
            "delta_ms_per_step": _r(ca - cb) if cb is not None and ca is not None else None,
            "reported_before": rep_b,
            "reported_after": rep_a,
            "is_idle_cause": k in CAUSES,
            "estimated_savings_ms_before": _r((mb.get(k) or {}).get("estimated_savings_ms")),
            "estimated_savings_pct_before": (mb.get(k) or {}).get("estimated_savings_pct"),
            "likely_savings_range_ms_before": (mb.get(k) or {}).get("likely_savings_range_ms"),
            # (of the un-profiled step: how much of a profiled cost is the profiler's own)
            "estimated_savings_ms_after": _r((ma.get(k) or {}).get("estimated_savings_ms")),
            "rank_before": (list(mb).index(k) + 1) if k in mb else None,
            "title_before": (fb or {}).get("title"),
            "title_after": (fa or {}).get("title"),
            "fix": (fb or fa or {}).get("fix"),
        })
    order = {"new": 0, NOT_BEFORE: 1, "grown": 2, "resolved": 3, NOT_AFTER: 4, "shrunk": 5, "unchanged": 6}
    rows.sort(key=lambda r: (order.get(r["status"], 9),
                             -max(r["before_ms_per_step"] or 0, r["after_ms_per_step"] or 0)))
    return rows
