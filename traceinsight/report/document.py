"""The report: the document every output is rendered from, built once per analysed trace.

A Report is immutable: its `doc` is the JSON document (frozen mappings and tuples, so no renderer
can change what another one reads) and its `timeline` the representative step's timeline data.
diff works on its own copy (`thaw`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import __version__
from ..analyses import CAUSES, Finding, spec
from .analyze import Analysis, representative_step
from .breakdown import breakdown
from .cpu_time import cpu_time
from .prewindow import prewindow_steps
from .numbers import num
from .tables import TABLE_ROWS, gap_table, kernel_table, op_table
from .timeline import MAX_ITEMS, timeline_data

SCHEMA_VERSION = 1


class FrozenDict(dict):
    """A dict that refuses changes (json.dumps and jinja read it as a dict)."""

    def _refuse(self, *_a, **_k):
        raise TypeError("the report document is read-only; thaw() a copy to change it")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore
    __ior__ = _refuse  # type: ignore


def freeze(x):
    if isinstance(x, dict):
        return FrozenDict((k, freeze(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return tuple(freeze(v) for v in x)
    return x


def thaw(x):
    """A plain, mutable deep copy of a (frozen) document."""
    if isinstance(x, dict):
        return {k: thaw(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [thaw(v) for v in x]
    return x


@dataclass(frozen=True)
class Report:
    doc: FrozenDict
    timeline: FrozenDict | None    # the representative step on one time axis (report/timeline.py)
    warnings: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return str(self.doc["trace"]["file"])


def build_report(a: Analysis, timeline_items: int = MAX_ITEMS, full_tables: bool = False) -> Report:
    tl = timeline_data(a, max_items=timeline_items) if len(a.model.steps) else None
    return Report(doc=freeze(document(a, full_tables)), timeline=freeze(tl) if tl is not None else None,
                  warnings=tuple(a.model.warnings))


def finding_dict(f: Finding, median_step_us: float) -> dict:
    return {
        "kind": f.kind,
        "title": f.title,
        "estimated_savings_ms": num(f.estimated_savings_us / 1000),
        "estimated_savings_pct": num(100 * f.estimated_savings_us / median_step_us if median_step_us else 0, 1),
        "savings_range_ms": _ms_pair(f.savings_bound_us),
        # The GPU work per step the fix takes away in its replay: by this much the saving may pass the step's idle.
        "gpu_work_removed_ms": num(f.gpu_removed_us / 1000),
        # Where the saving will likely land: the range widened to where our measured fixes of this kind
        # landed (likely_basis says on what; null for a kind we have not validated).
        "likely_savings_range_ms": _ms_pair(f.likely_range_us),
        "likely_basis": f.likely_basis or None,
        "estimate_method": f.estimate_note,
        # Where the fix needs other ranked fixes first: which, and what it adds after them (it is ranked by
        # that; estimated_savings_ms is what it would save alone).
        "needs_first": list(f.after_prerequisites[0]) if f.after_prerequisites else [],
        "saves_after_needs_first_ms": num(f.after_prerequisites[1] / 1000) if f.after_prerequisites else None,
        # A fix that can be applied alone but saves nothing until the fixes before it shorten the GPU's work
        # (a loader beside longer GPU work: Finding.hidden); otherwise needs_first cannot be applied alone.
        "hidden": bool(f.hidden),
        # The plan's row it was read from comes after all of these (those it needs among them).
        "saves_after_plan_fixes": list(f.after_prerequisites[2]) if f.after_prerequisites else [],
        # Other ways to apply the fix that users take, each estimated by the same replay.
        "alternatives": [{"option": k, "what": w, "estimated_savings_ms": num(us / 1000),
                          "savings_range_ms": _ms_pair(rng), "likely_savings_range_ms": _ms_pair(likely)}
                         for k, w, us, rng, likely in f.alternative_savings_us],
        # A measurement from the trace, or a model's figure derived from one (cost_basis says how).
        "measured_cost_ms_per_step": num(f.lost_per_step_us / 1000),
        "cost_is": "derived" if spec(f.kind).cost_basis else "measurement",
        "cost_basis": spec(f.kind).cost_basis or None,
        "measured_cost_ms_total": num(f.lost_total_us / 1000),
        "confidence": f.confidence,
        "fix": f.fix,
        "evidence": f.evidence,
    }


# Without step markers the whole trace is one window: a figure "per step" is the window's, which may hold one-time
# work (a review read HTA's AlexNet start-up, its weights copied to the GPU once, as "244.4 MB per step").
PER_STEP = re.compile(r"\b(?:per step|a step(?! of| or)|of each step|Each step)\b")


def _in_window(text):
    """A report sentence with its per-step wording said of the one window."""
    if not isinstance(text, str):
        return text
    said = {"of each step": "of the window", "Each step": "The window"}
    # (one window has no median of steps: "busy 100% of the window (median of the steps' shares; median step ...")
    text = text.replace("(median of the steps' shares; median step ", "(a window of ").replace("(median step ",
                                                                                          "(a window of ")
    text = text.replace("of the un-profiled step", "of the un-profiled window")
    return PER_STEP.sub(lambda m: said.get(m.group(0), "in the window"), text)


def _window_words(d: dict) -> dict:
    """A finding's words (title, fix) said of the one window (the numbers and field names stay)."""
    return {**d, "title": _in_window(d["title"]), "fix": _in_window(d["fix"])}


def _ms_pair(us: tuple[float, float] | None) -> list | None:
    return [num(us[0] / 1000), num(us[1] / 1000)] if us else None


def document(a: Analysis, full_tables: bool = False) -> dict:
    """The JSON output: stable field names; times in ms; per-step values are medians over full steps.
    `full_tables`: every kernel and op, not the top 50 (diff matches them all)."""
    b = breakdown(a)
    fs = a.per_step
    pre = set(prewindow_steps(a.model, a.full_steps))   # (steps[].holds_prewindow_work)
    window = a.model.step_source == "whole trace"
    words = _window_words if window else (lambda d: d)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "traceinsight", "version": __version__},
        "trace": a.facts,
        "verdict": _in_window(a.verdict) if window else a.verdict,
        "healthy": a.healthy,
        "summary": {
            "steps": int(len(fs)),
            "full_steps": int((~fs["partial"]).sum()),
            "median_step_ms": num(a.median_step_us / 1000),
            # The same step without the profiler: measured by `record`, else the cost model's estimate.
            # Savings (estimated_savings_pct) are shares of it.
            "unprofiled_step_ms": a.whatif.get("unprofiled_step_ms"),
            "unprofiled_step_method": a.whatif.get("unprofiled_step_method"),
            # An estimate's 80% band from our own validation (None when `record` measured the step).
            "unprofiled_step_range_ms": a.whatif.get("unprofiled_step_range_ms"),
            # "validation" (that band), or "window": widened to the window's own spread of steps (compiling ones)
            "unprofiled_step_range_basis": a.whatif.get("unprofiled_step_range_basis"),
            "mean_step_ms": num(a.full_steps["dur"].mean() / 1000),
            "min_step_ms": num(a.full_steps["dur"].min() / 1000),
            "max_step_ms": num(a.full_steps["dur"].max() / 1000),
            # (null without GPU activity: no GPU to be busy or idle, not one idle the whole step)
            "median_gpu_busy_ms": num(b["gpu_busy"] / 1000) if a.model.has_gpu else None,
            "median_gpu_idle_ms": num(b["gpu_idle"] / 1000) if a.model.has_gpu else None,
            # (the median of the steps' own idle shares, not median idle over median step: breakdown)
            "gpu_idle_pct": num(100 * b["idle_share"], 1) if b["step"] and a.model.has_gpu else None,
            "idle_by_cause_ms_median_per_step": {c: num(b[c] / 1000) for c in CAUSES},
            "gpu_idle_total_ms": num(float(a.gaps["dur"].sum()) / 1000) if len(a.gaps) else 0.0,
        },
        "findings": [words(finding_dict(f, a.reference_step_us)) for f in a.fixes],
        "notes": [words(finding_dict(f, a.reference_step_us)) for f in a.notes],
        "minor_findings": [words(finding_dict(f, a.reference_step_us)) for f in a.minor_findings],
        "whatif": a.whatif,
        "steps": [
            {"step": int(r.step), "start_ms": num(r.start / 1000), "duration_ms": num(r.dur / 1000),
             "partial": bool(r.partial), "gpu_busy_ms": num(r.gpu_busy / 1000),
             # (no GPU activity recorded: no idle to count; a GPU job's unrecorded GPU had shown its whole step)
             "gpu_idle_ms": num(r.gpu_idle / 1000) if a.model.has_gpu else None,
             "idle_by_cause_ms": {c: num(getattr(r, c) / 1000) for c in CAUSES},
             "holds_prewindow_work": int(r.step) in pre}
            for r in fs.itertuples()
        ],
        "graph": a.graph_stats,
        "representative_step": representative_step(a),
        "top_kernels": kernel_table(a, limit=10**9 if full_tables else TABLE_ROWS),
        "top_ops": op_table(a, limit=10**9 if full_tables else TABLE_ROWS),
        "longest_gaps": gap_table(a),
        "cpu_time": cpu_time(a),
    }
