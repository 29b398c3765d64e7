"""The committed matrix runs as tests read them: a trace's path, its report (analyzed once per session), the measured
un-profiled step of a variant (its run's manifest), the kinds a report ranks, and a fix's speed-up as predicted and as
measured."""
from __future__ import annotations

import json
from pathlib import Path

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

ROOT = Path(__file__).resolve().parents[1] / "sample_traces" / "matrix"
_DOCS: dict = {}


def trace_path(run: str, wl: str, var: str, setting: str = "default") -> Path:
    return ROOT / run / f"{wl}__{var}__{setting}.json.gz"


def doc(run: str, wl: str, var: str, setting: str = "default") -> dict:
    key = (run, wl, var, setting)
    if key not in _DOCS:
        _DOCS[key] = document(analyze_file(trace_path(*key)))
    return _DOCS[key]


def measured(run: str, wl: str, var: str) -> float:
    """The variant's un-profiled step, median (ms)."""
    man = json.loads((ROOT / run / "manifest.json").read_text())
    return next(e for e in man["entries"] if e["workload"] == wl and e["variant"] == var)["step_ms"]["median"]


def kinds(d: dict) -> list[str]:
    return [f["kind"] for f in d["findings"]]


def predicted_speedup(d: dict, finding: dict) -> float:
    """The report's un-profiled step over that step less the finding's estimated saving."""
    step = d["whatif"]["unprofiled_step_ms"]
    return step / (step - finding["estimated_savings_ms"])


def measured_speedup(run: str, wl: str, after: str = "after") -> float:
    """The measured fix: the before variant's un-profiled median over the fixed variant's (`after`, or another
    fixed variant such as `after_compile`)."""
    return measured(run, wl, "before") / measured(run, wl, after)


def context_of(path: Path):
    """The analyses' context of one trace, as analyze_model builds it."""
    from traceinsight.analyses.attribution import attribute_gaps, per_step_causes
    from traceinsight.analyses.base import Context
    from traceinsight.trace.host import HostActivity
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    from traceinsight.trace.steps import full_step_mask
    model = build_model(load_trace(path))
    host = HostActivity(model)
    gaps = attribute_gaps(model, host)
    causes = per_step_causes(model, gaps)
    per_step = model.steps.set_index("step").join(causes)
    full = per_step.index.to_numpy()[full_step_mask(per_step["partial"])]
    return Context(model=model, host=host, gaps=gaps, per_step=causes, full_steps=full)
