"""load -> model -> graph -> analyses -> what-if -> rank: a trace file in, an Analysis out.

Renderers (render/) only read an Analysis; nothing here prints or writes except write_outputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from .analyses import ANALYZERS, Context, Finding
from .analyses.attribution import CAUSES, attribute_gaps, per_step_causes
from .errors import TraceError
from .graph import build_graph, step_window
from .host import HostActivity
from .load import find_trace_files, load_trace
from .model import TraceModel, build_model, full_step_mask
from .rank import estimate

SCHEMA_VERSION = 1
HEALTHY_MAX_IDLE = 0.25

VERDICT_LABEL = {
    "launch_overhead": "launch-bound",
    "sync_stall": "sync-bound",
    "host_bound": "host-bound",
    "pageable_memcpy": "copy-bound",
    "layout_permute": "slowed by layout conversions",
    "fp32_matmul": "slowed by FP32 matmuls",
    "unfused_optimizer": "optimizer-bound",
    "fusion_candidates": "slowed by unfused elementwise kernels",
    "collective_wait": "communication-bound",
    "profiler_overhead": "inflated by the profiler",
}


@dataclass
class Analysis:
    model: TraceModel
    findings: list[Finding]
    per_step: pd.DataFrame          # per step: dur, GPU busy, idle by cause (us)
    gaps: pd.DataFrame              # attributed idle gaps
    whatif: dict
    verdict: str
    facts: dict = field(default_factory=dict)
    graph_stats: dict = field(default_factory=dict)
    # Causes seen in the trace that cost less than rank.MIN_SHARE of a step: shown, not ranked.
    minor_findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """GPU mostly busy and nothing worth a ticket: no finding, idle under HEALTHY_MAX_IDLE."""
        if not self.model.has_gpu or [f for f in self.findings if f.kind != "profiler_overhead"]:
            return False
        b = breakdown(self)
        return b["step"] > 0 and b["gpu_idle"] / b["step"] <= HEALTHY_MAX_IDLE

    @property
    def full_steps(self) -> pd.DataFrame:
        return self.per_step[full_step_mask(self.per_step["partial"])]

    @property
    def median_step_us(self) -> float:
        return float(self.full_steps["dur"].median())


def expand_paths(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(find_trace_files(p))
        else:
            out.append(p)
    return out


def analyze_paths(paths: list[Path]) -> list[Analysis]:
    """One Analysis per trace file (a directory of per-rank traces gives one per rank)."""
    return [analyze_file(p) for p in expand_paths(paths)]


def analyze_file(path: Path) -> Analysis:
    return analyze_model(build_model(load_trace(path)))


def analyze_model(model: TraceModel) -> Analysis:
    host = HostActivity(model)
    gaps = attribute_gaps(model, host)
    causes = per_step_causes(model, gaps)
    steps = model.steps.set_index("step")
    per_step = steps.join(causes)
    full = per_step.index.to_numpy()[full_step_mask(per_step["partial"])]
    ctx = Context(model=model, host=host, gaps=gaps, per_step=causes, full_steps=full)
    findings: list[Finding] = []
    if model.has_gpu:
        for analyze in ANALYZERS.values():
            findings.extend(analyze(ctx))
    G = None
    graph_stats: dict = {}
    if model.has_gpu:
        G = build_graph(model, host, step_window(model))
        kinds: dict[str, int] = {}
        for _, _, k in G.edges(data="kind"):
            kinds[k] = kinds.get(k, 0) + 1
        graph_stats = {"nodes": G.number_of_nodes(), "edges": kinds, "steps": G.graph["steps"]}
    ranked = estimate(ctx, G, findings)
    findings = ranked["findings"]
    analysis = Analysis(model=model, findings=findings, per_step=per_step.reset_index(), gaps=gaps,
                        whatif=ranked["whatif"], verdict="", graph_stats=graph_stats,
                        minor_findings=ranked["minor"])
    analysis.facts = trace_facts(model)
    analysis.verdict = verdict(analysis)
    return analysis


def trace_facts(model: TraceModel) -> dict:
    meta = model.meta
    rec = meta.get("traceinsight_record") or {}
    return {
        "file": model.path,
        "rank": model.rank,
        "world_size": (meta.get("distributed") or {}).get("world_size"),
        "gpu": model.device_name(),
        "compute_capability": next((f"{d.compute_capability[0]}.{d.compute_capability[1]}"
                                    for d in model.devices.values() if d.compute_capability), None),
        "torch_version": rec.get("torch_version"),
        "cuda_runtime_version": meta.get("cuda_runtime_version"),
        "cuda_driver_version": meta.get("cuda_driver_version"),
        "cupti_version": meta.get("cupti_version"),
        "events": model.n_events,
        "steps": int(len(model.steps)),
        "step_source": model.step_source,
        "partial_steps": int(model.steps["partial"].sum()),
        "gpu_activities": int(len(model.gpu)),
        "devices_with_activity": sorted(int(d) for d in model.gpu["device"].unique()) if model.has_gpu else [],
        "streams": int(model.gpu.groupby(["device", "stream"]).ngroups) if model.has_gpu else 0,
        "profiler": {k: meta.get(k) for k in ("with_stack", "profile_memory", "record_shapes")
                     if meta.get(k) is not None} | ({"record": rec} if rec else {}),
        "warnings": list(model.warnings),
        "recording": _recording_note(rec),
        "profiler_note": profiler_note(model),
    }


def _recording_note(rec: dict) -> str | None:
    if not rec:
        return None
    where = "CPU and CUDA" if rec.get("cuda") else "CPU only (no GPU was available)"
    detail = rec.get("window_detail") or rec.get("window")
    return (f"traceinsight record of {rec.get('script')}: {rec.get('steps_recorded')} step(s) recorded, "
            f"{where}; window: {detail}")


def profiler_note(model: TraceModel) -> str:
    """What the profiler's own options did to this trace's CPU times, in one sentence."""
    n = max(1, len(model.steps))
    py = int((model.cpu["kind"] == "python").sum())
    mem = int(model.meta.get("n_memory_events", 0))
    on = []
    if py:
        on.append(f"with_stack ({py / n:.0f} Python frames recorded per step)")
    if mem:
        on.append(f"profile_memory ({mem / n:.0f} allocation events per step)")
    if not on:
        return ("No Python stacks or memory events were recorded, so CPU times are close to an "
                "unprofiled run (the profiler still adds about a microsecond per op).")
    return ("Profiled with " + " and ".join(on) + ": CPU-side times in this trace are inflated, so "
            "launch_overhead and host_bound estimates are upper bounds.")


def representative_step(a: Analysis) -> int | None:
    """The full step whose duration is closest to the median: the one to draw."""
    fs = a.full_steps
    if fs.empty:
        return None
    return int(fs.iloc[(fs["dur"] - fs["dur"].median()).abs().argmin()]["step"])


def _in_full_steps(a: Analysis, g: pd.DataFrame) -> pd.DataFrame:
    """The GPU activities that start inside a full step's window."""
    steps = a.full_steps
    ts = g["ts"].to_numpy()
    starts, ends = steps["start"].to_numpy(), steps["end"].to_numpy()
    k = np.searchsorted(starts, ts, side="right") - 1
    return g[(k >= 0) & (ts < ends[np.maximum(k, 0)])]


def kernel_table(a: Analysis, limit: int = 50) -> list[dict]:
    """GPU activities by name over full steps: count, total and per-step time (ms), share of GPU time."""
    g = a.model.gpu
    if g.empty:
        return []
    g = _in_full_steps(a, g)
    n = max(1, len(a.full_steps))
    agg = g.groupby(["name", "kind"]).agg(count=("dur", "size"), total=("dur", "sum"), mean=("dur", "mean"))
    total = float(g["dur"].sum()) or 1.0
    agg = agg.sort_values("total", ascending=False).head(limit)
    return [{"name": name[:400], "kind": kind, "count_per_step": round(r["count"] / n, 2),
             "ms_per_step": round(r["total"] / n / 1000, 4), "mean_us": round(r["mean"], 2),
             "pct_gpu_time": round(100 * r["total"] / total, 2)} for (name, kind), r in agg.iterrows()]


def op_table(a: Analysis, limit: int = 50) -> list[dict]:
    """GPU time by the op (outermost aten op, with its input shapes) that launched it, over full steps."""
    g = a.model.gpu
    cpu = a.model.cpu
    g = g[g["launcher"] >= 0]
    if g.empty:
        return []
    g = _in_full_steps(a, g)
    parent = cpu["parent"].to_numpy()[g["launcher"].to_numpy()]
    top = np.where(parent >= 0, cpu["top_op"].to_numpy()[np.maximum(parent, 0)], -1)
    names = np.where(top >= 0, cpu["name"].to_numpy()[np.maximum(top, 0)], "(no op)")
    from .model import dims_text
    uniq, inv = np.unique(top, return_inverse=True)
    col = cpu["input_dims"].to_numpy()
    dims = np.array([dims_text(col[t]) if t >= 0 else "" for t in uniq], dtype=object)[inv]
    df = pd.DataFrame({"op": names, "input_dims": dims, "dur": g["dur"].to_numpy()})
    n = max(1, len(a.full_steps))
    agg = df.groupby(["op", "input_dims"]).agg(kernels=("dur", "size"), total=("dur", "sum"))
    agg = agg.sort_values("total", ascending=False).head(limit)
    return [{"op": op[:300], "input_dims": d[:200], "kernels_per_step": round(r["kernels"] / n, 2),
             "gpu_ms_per_step": round(r["total"] / n / 1000, 4)} for (op, d), r in agg.iterrows()]


def gap_table(a: Analysis, limit: int = 100) -> list[dict]:
    """The longest GPU idle gaps: when, how long, on which stream work resumed, why, and what the
    launching thread was doing (the outermost ops it was in, or the call that blocked it)."""
    gaps = a.gaps
    if gaps.empty:
        return []
    from .analyses.attribution import CAUSES
    from .analyses.base import top_op
    cpu, gpu = a.model.cpu, a.model.gpu
    top = gaps.nlargest(limit, "dur")
    ops = cpu[cpu["kind"].isin(("op", "annotation")).to_numpy() & ~cpu["is_step"].to_numpy()]
    by_thread = {th: g.sort_values("ts") for th, g in ops.groupby("thread")} if len(top) else {}
    out = []
    for r in top.itertuples():
        causes = {c: getattr(r, c) for c in CAUSES if getattr(r, c) > 0}
        stream = int(gpu.at[r.next_gpu, "stream"]) if r.next_gpu >= 0 else None
        doing: list[str] = []
        if r.blocker >= 0:
            doing = [f"blocked in {cpu.at[r.blocker, 'name']} ({top_op(cpu, int(r.blocker))})"]
        elif r.thread in by_thread:
            t = by_thread[r.thread]
            b = min(r.end, r.launch_ts) if r.launch_ts == r.launch_ts else r.end
            cand = t.iloc[:np.searchsorted(t["ts"].to_numpy(), b, side="left")]
            cand = cand[cand["end"].to_numpy() > r.start]
            if len(cand):
                cand = cand[cand["depth"] == cand["depth"].min()]
                doing = list(dict.fromkeys(cand["name"].tolist()))[:3]
        out.append({"step": int(r.step), "device": int(r.device), "start_ms": _num(r.start / 1000),
                    "duration_ms": _num(r.dur / 1000), "resumed_on_stream": stream,
                    "cause": max(causes, key=causes.get) if causes else None,
                    "by_cause_ms": {c: _num(v / 1000) for c, v in causes.items()},
                    "launching_thread": r.thread or None, "cpu_was_in": doing})
    return out


def breakdown(a: Analysis) -> dict:
    """Median per full step (us): GPU busy, and idle by cause. Medians do not add up exactly."""
    fs = a.full_steps
    out = {"step": float(fs["dur"].median()), "gpu_busy": float(fs["gpu_busy"].median()),
           "gpu_idle": float(fs["gpu_idle"].median())}
    for c in CAUSES:
        out[c] = float(fs[c].median()) if c in fs else 0.0
    return out


def verdict(a: Analysis) -> str:
    m = a.model
    if not m.has_gpu:
        return ("CPU-only trace: no GPU activity was recorded, so there is no GPU idle time to explain "
                f"({len(m.steps)} step(s), median {a.median_step_us / 1000:.2f} ms).")
    b = breakdown(a)
    idle_pct = 100 * b["gpu_idle"] / b["step"] if b["step"] else 0.0
    real = [f for f in a.findings if f.kind != "profiler_overhead"]
    if a.healthy:
        return (f"Healthy: the GPU is busy {100 - idle_pct:.0f}% of each step (median "
                f"{b['step'] / 1000:.2f} ms) and no fix we can see would save more than 3% of it.")
    if not real:
        causes = sorted(((b[c], c) for c in CAUSES if b[c] > 0), reverse=True)[:3]
        said = ", ".join(f"{c} {v / 1000:.2f} ms" for v, c in causes)
        return (f"The GPU is idle {idle_pct:.0f}% of each step (median {b['step'] / 1000:.2f} ms), but no "
                f"fix we can model would save more than 3% of a step; idle by cause: {said or 'none'}.")
    top = real[0]
    pct = 100 * top.estimated_savings_us / a.median_step_us if a.median_step_us else 0.0
    return (f"{VERDICT_LABEL.get(top.kind, top.kind).capitalize()}: the GPU is idle {idle_pct:.0f}% of "
            f"each step (median step {b['step'] / 1000:.2f} ms); the top fix ({top.kind}) would save "
            f"about {top.estimated_savings_us / 1000:.2f} ms per step ({pct:.0f}%).")


def _num(x, nd=3):
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return None
    return round(float(x), nd)


def finding_dict(f: Finding, median_step_us: float) -> dict:
    return {
        "kind": f.kind,
        "title": f.title,
        "estimated_savings_ms": _num(f.estimated_savings_us / 1000),
        "estimated_savings_pct": _num(100 * f.estimated_savings_us / median_step_us if median_step_us else 0, 1),
        "savings_range_ms": [_num(f.savings_bound_us[0] / 1000), _num(f.savings_bound_us[1] / 1000)]
        if f.savings_bound_us else None,
        "estimate_method": f.estimate_note,
        "measured_cost_ms_per_step": _num(f.lost_per_step_us / 1000),
        "measured_cost_ms_total": _num(f.lost_total_us / 1000),
        "confidence": f.confidence,
        "fix": f.fix,
        "evidence": f.evidence,
    }


def to_dict(a: Analysis) -> dict:
    """The JSON output: stable field names; times in ms; per-step values are medians over full steps.

    Computed once per Analysis (every output reads it); treat the result as read-only.
    """
    cached = a.__dict__.get("_doc")
    if cached is None:
        cached = a.__dict__["_doc"] = _to_dict(a)
    return cached


def _to_dict(a: Analysis) -> dict:
    b = breakdown(a)
    fs = a.per_step
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "traceinsight", "version": __version__},
        "trace": a.facts,
        "verdict": a.verdict,
        "healthy": a.healthy,
        "summary": {
            "steps": int(len(fs)),
            "full_steps": int((~fs["partial"]).sum()),
            "median_step_ms": _num(a.median_step_us / 1000),
            "mean_step_ms": _num(a.full_steps["dur"].mean() / 1000),
            "min_step_ms": _num(a.full_steps["dur"].min() / 1000),
            "max_step_ms": _num(a.full_steps["dur"].max() / 1000),
            "median_gpu_busy_ms": _num(b["gpu_busy"] / 1000),
            "median_gpu_idle_ms": _num(b["gpu_idle"] / 1000),
            "gpu_idle_pct": _num(100 * b["gpu_idle"] / b["step"], 1) if b["step"] else None,
            "idle_by_cause_ms_median_per_step": {c: _num(b[c] / 1000) for c in CAUSES},
            "gpu_idle_total_ms": _num(float(a.gaps["dur"].sum()) / 1000) if len(a.gaps) else 0.0,
        },
        "findings": [finding_dict(f, a.median_step_us) for f in a.findings],
        "minor_findings": [finding_dict(f, a.median_step_us) for f in a.minor_findings],
        "whatif": a.whatif,
        "steps": [
            {"step": int(r.step), "start_ms": _num(r.start / 1000), "duration_ms": _num(r.dur / 1000),
             "partial": bool(r.partial), "gpu_busy_ms": _num(r.gpu_busy / 1000),
             "gpu_idle_ms": _num(r.gpu_idle / 1000),
             "idle_by_cause_ms": {c: _num(getattr(r, c) / 1000) for c in CAUSES}}
            for r in fs.itertuples()
        ],
        "graph": a.graph_stats,
        "representative_step": representative_step(a),
        "top_kernels": kernel_table(a),
        "top_ops": op_table(a),
        "longest_gaps": gap_table(a),
    }


def gpu_idle_over_span(model: TraceModel) -> dict:
    """GPU idle inside [first GPU start, last GPU end] per device: what HTA calls idle time."""
    from .model import merged_intervals
    out = {}
    for dev, g in model.gpu.groupby("device"):
        s, e = merged_intervals(g["ts"].to_numpy(), g["end"].to_numpy())
        span = float(e.max() - s.min())
        out[int(dev)] = {"span_us": span, "busy_us": float((e - s).sum()),
                         "idle_us": span - float((e - s).sum())}
    return out


def write_outputs(analyses: list[Analysis], html: Path | None = None, json: Path | None = None,
                  markdown: Path | None = None) -> None:
    from .render import html as html_r
    from .render import json_out, markdown as md_r
    if json is not None:
        json_out.write(analyses, Path(json))
    if markdown is not None:
        md_r.write(analyses, Path(markdown))
    if html is not None:
        html_r.write(analyses, Path(html))


def analyze_to_files(trace_path: Path, html: Path | None = None, json: Path | None = None,
                     markdown: Path | None = None) -> list[Analysis]:
    """Analyze one trace file and write the requested outputs. Raises TraceError on bad input."""
    analyses = analyze_paths([Path(trace_path)])
    write_outputs(analyses, html=html, json=json, markdown=markdown)
    return analyses


__all__ = ["Analysis", "analyze_paths", "analyze_file", "analyze_model", "to_dict", "write_outputs",
           "analyze_to_files", "TraceError"]
