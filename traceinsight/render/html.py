"""-o report.html: one self-contained page (no network), every trace string autoescaped.

The page: per trace, the verdict, the trace facts, the ranked fixes (estimate, measured cost,
confidence, evidence, code-level fix), the what-if replay check, the representative step's
timeline (report/timeline.py + static/timeline.js, canvas), a per-step breakdown chart (inline
SVG built here), and foldable tables. CSS and JS come from traceinsight/static and are inlined.

Safety: jinja2 autoescape for HTML; data for scripts goes through assets.dumps_for_script
(`<`, `>`, `&`, U+2028/2029 escaped) into <script type="application/json">; the JS only uses
textContent / canvas fillText for trace strings. Determinism: file names only, no timestamps,
so regenerating a report gives identical bytes.
"""
from __future__ import annotations

import math
from pathlib import Path

from markupsafe import Markup

from ..analyses import CAUSE_COLORS, CAUSES
from ..report.document import Report
from ..report.timeline import BUSY_COLOR
from . import sections as S
from .assets import dumps_for_script, safe_js, static_asset
from .format import cuda_version, env, fmt as _fmt, label as _label, terminal_safe
# Long traces: the chart averages consecutive steps beyond this many bars; the table shows the first rows.
MAX_BARS = 240
MAX_STEP_ROWS = 1000


def _scalar(v) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def evidence_blocks(ev, window: bool = False) -> list[dict]:
    """An evidence dict as blocks the template can show: facts, tables, lists, raw text. `window`: the trace is one
    window without step markers, so a key's "per step" reads "in the window" (its JSON name stays)."""
    def lab(k) -> str:
        return _label(k).replace(" per step", " in the window") if window else _label(k)
    blocks: list[dict] = []
    facts: list[tuple[str, str]] = []
    if not isinstance(ev, dict):
        return [{"type": "text", "title": "evidence", "text": str(ev)}]
    for k, v in ev.items():
        title = lab(k)
        if _scalar(v):
            facts.append((title, _fmt(v)))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            cols: list[str] = []
            for x in v:
                for c in x:
                    if c not in cols:
                        cols.append(c)
            rows = [[_cell(x.get(c)) for c in cols] for x in v]
            blocks.append({"type": "table", "title": title, "columns": [lab(c) for c in cols], "rows": rows})
        elif isinstance(v, (list, tuple)):
            if all(_scalar(x) for x in v):
                blocks.append({"type": "list", "title": title, "items": [_fmt(x) for x in v]})
            else:
                blocks.append({"type": "list", "title": title, "items": [_cell(x) for x in v]})
        elif isinstance(v, dict):
            if all(_scalar(x) for x in v.values()):
                unit = next((u for w, u in (("count", "count"), ("_ms", "ms"), ("_us", "us"), ("pct", "%"))
                             if w in str(k)), "value")
                blocks.append({"type": "table", "title": title, "columns": ["name", unit],
                               "rows": [[str(a), _fmt(b)] for a, b in v.items()]})
            elif all(isinstance(x, dict) for x in v.values()):
                cols = []
                for x in v.values():
                    for c in x:
                        if c not in cols:
                            cols.append(c)
                blocks.append({"type": "table", "title": title, "columns": ["name"] + [lab(c) for c in cols],
                               "rows": [[str(a)] + [_cell(x.get(c)) for c in cols] for a, x in v.items()]})
            else:
                blocks.append({"type": "text", "title": title, "text": _cell(v)})
        else:
            blocks.append({"type": "text", "title": title, "text": str(v)})
    if facts:
        blocks.insert(0, {"type": "facts", "title": "", "rows": facts})
    return blocks


def _cell(v) -> str:
    if _scalar(v):
        return _fmt(v)
    if isinstance(v, dict):
        return "; ".join(f"{_label(k)}: {_cell(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(x) for x in v)
    return str(v)


def breakdown_chart(d: dict, width: int = 960, height: int = 260) -> dict:
    """Stacked bars per step (GPU busy + idle by cause, ms), as coordinates for inline SVG."""
    steps = _binned_steps(d["steps"], MAX_BARS) if (d.get("trace") or {}).get("gpu_activities", 1) else []
    left, right, top, bottom = 56, 10, 10, 34
    pw, ph = width - left - right, height - top - bottom
    if not steps:
        return {"bars": [], "ticks": [], "width": width, "height": height}
    ymax = max((s["duration_ms"] or 0.0) for s in steps) or 1.0
    # A round axis maximum.
    mag = 10 ** math.floor(math.log10(ymax))
    nice = next(m * mag for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * mag >= ymax)
    n = len(steps)
    slot = pw / n
    bw = max(1.0, min(48.0, slot * 0.8))
    bars = []
    label_every = max(1, math.ceil(n / 24))
    for i, s in enumerate(steps):
        x = left + i * slot + (slot - bw) / 2
        y = top + ph
        segs = []
        what = f"steps {s['step']}-{s['last']} (mean of {s['n']})" if s.get("n", 1) > 1 else f"step {s['step']}"
        parts = [("GPU busy", s["gpu_busy_ms"] or 0.0, BUSY_COLOR)] + \
            [(c, (s["idle_by_cause_ms"] or {}).get(c) or 0.0, CAUSE_COLORS[c]) for c in CAUSES]
        for name, v, col in parts:
            if v <= 0:
                continue
            h = ph * v / nice
            y -= h
            segs.append({"x": round(x, 2), "y": round(y, 2), "w": round(bw, 2), "h": round(h, 2), "color": col,
                         "title": f"{what}: {name} {_fmt(v)} ms"})
        tip = (f"{what}{' (partial, not in medians)' if s['partial'] else ''}: "
               f"{_fmt(s['duration_ms'])} ms; GPU busy {_fmt(s['gpu_busy_ms'])} ms, idle {_fmt(s['gpu_idle_ms'])} ms")
        bars.append({"segs": segs, "partial": s["partial"], "title": tip,
                     "label": str(s["step"]) if i % label_every == 0 else "",
                     "lx": round(x + bw / 2, 2), "x": round(x, 2), "w": round(bw, 2),
                     "outline_y": round(top + ph - ph * (s["duration_ms"] or 0) / nice, 2),
                     "outline_h": round(ph * (s["duration_ms"] or 0) / nice, 2)})
    ticks = [{"y": round(top + ph - ph * f, 2), "label": _fmt(nice * f)} for f in (0, 0.25, 0.5, 0.75, 1.0)]
    return {"bars": bars, "ticks": ticks, "width": width, "height": height, "left": left, "top": top,
            "plot_w": pw, "plot_h": ph, "axis_y": top + ph, "per_bar": steps[0].get("n", 1)}


def _binned_steps(steps: list[dict], max_bars: int) -> list[dict]:
    """At most max_bars bars: consecutive steps averaged per bar when there are more steps."""
    if len(steps) <= max_bars:
        return steps
    k = math.ceil(len(steps) / max_bars)
    out = []
    for i in range(0, len(steps), k):
        grp = steps[i:i + k]
        n = len(grp)

        def mean(key, sub=None):
            vals = [(x[key] or {}).get(sub) if sub else x[key] for x in grp]
            return None if all(v is None for v in vals) else sum(v or 0.0 for v in vals) / n
        out.append({"step": grp[0]["step"], "last": grp[-1]["step"], "n": n,
                    "partial": any(x["partial"] for x in grp),
                    "duration_ms": mean("duration_ms"), "gpu_busy_ms": mean("gpu_busy_ms"),
                    "gpu_idle_ms": mean("gpu_idle_ms"),
                    "idle_by_cause_ms": {c: mean("idle_by_cause_ms", c) for c in CAUSES}})
    return out


def step_bar(d: dict) -> dict | None:
    """The representative step as one 100% bar: busy + idle by cause (these add up exactly)."""
    rep = d.get("representative_step")
    s = next((x for x in d["steps"] if x["step"] == rep), None)
    if s is None or not s["duration_ms"] or not (d.get("trace") or {}).get("gpu_activities", 1):
        return None  # a CPU-only step has no GPU busy or idle to draw
    parts = [("GPU busy", s["gpu_busy_ms"] or 0.0, BUSY_COLOR)] + \
        [(c, (s["idle_by_cause_ms"] or {}).get(c) or 0.0, CAUSE_COLORS[c]) for c in CAUSES]
    total = s["duration_ms"]
    segs, x = [], 0.0
    for name, v, col in parts:
        if v <= 0:
            continue
        w = 100 * v / total
        segs.append({"name": name, "ms": _fmt(v), "pct": _fmt(w, 1), "x": round(x, 3), "w": round(w, 3),
                     "color": col})
        x += w
    return {"step": s["step"], "ms": _fmt(total), "segs": segs}


def _trace_ctx(r: Report, i: int) -> dict:
    # Control characters from the trace (ESC sequences) show as escapes, in the page and in its data.
    d = terminal_safe(r.doc)
    t = d["trace"]
    name = Path(str(t.get("file") or "")).name or f"trace {i + 1}"
    tl = terminal_safe(r.timeline) if r.timeline is not None else None
    whole = S.one_window(d)
    return {
        "i": i,
        "d": d,
        "name": name,
        "s": d["summary"],
        "t": t,
        "findings": [dict(f, blocks=evidence_blocks(f.get("evidence") or {}, whole), alternatives_line=S.alternatives(f))
                     for f in S.fixes(d)],
        "notes": [dict(f, blocks=evidence_blocks(f.get("evidence") or {}, whole)) for f in S.notes(d)],
        "limits": S.limits(d),
        "step_counts": S.step_counts(d),
        "window": S.window(d),
        # A trace without step markers is one window: its figures are the window's, not a median step's.
        "window_only": whole,
        "per": S.per_step(d),
        "median_per": "in the window" if whole else "median per step",
        "over": "over the window" if whole else "median over full steps",
        "unit": "window" if whole else "step",
        "share_of": ("un-profiled " if d["summary"].get("unprofiled_step_ms") else "" if whole else "median ")
        + ("window" if whole else "step"),
        "plan_notes": [S.plan_note(row) for row in S.plan_rows(d)],
        "plan_shown": S.plan_shown(d),
        "unprofiled": S.unprofiled(d),
        "tone": S.verdict_tone(d),
        "cpu_only": S.cpu_only(d),
        "gpu_unrecorded": bool((d.get("trace") or {}).get("gpu_work_unrecorded")),
        "gpu_cut_off": (d.get("trace") or {}).get("gpu_events_cut_off"),
        "interrupted": S.interrupted(d),
        "gpu": S.gpu_label(t),
        "rank": S.rank_label(t),
        "cpu": d.get("cpu_time"),
        "in_ops_what": S.in_ops_what(d),
        "minor": [dict(f, blocks=evidence_blocks(f.get("evidence") or {}, whole)) for f in d["minor_findings"]],
        "minor_caption": S.minor_caption(d),
        "replay_trust": S.replay_trust(d),
        "chart": breakdown_chart(d),
        "step_rows": d["steps"][:MAX_STEP_ROWS],
        "step_bar": step_bar(d),
        "timeline_json": Markup(dumps_for_script(tl)) if tl else None,
        "timeline": tl,
        "rep_step": d["representative_step"],
        # The idle causes some step has: a column of zeros on every row (start-up on a steady trace) says nothing.
        "causes": [c for c in CAUSES if any((st.get("idle_by_cause_ms") or {}).get(c) for st in d["steps"])],
        "cuda_runtime": cuda_version(t.get("cuda_runtime_version")),
        "cuda_driver": cuda_version(t.get("cuda_driver_version")),
    }


def render(reports: list[Report], preface: str | None = None) -> str:
    """The page; `preface` is an HTML fragment (already escaped, e.g. render/job_view.html) shown first."""
    traces = [_trace_ctx(r, i) for i, r in enumerate(reports)]
    return env.get_template("report.html.j2").render(
        preface=Markup(preface) if preface else None,
        traces=traces, fmt=_fmt, label=_label, outside_ops=S.outside_ops, span=lambda f: S.span(f, _fmt),
        after_fixes=S.after_fixes, collectives_line=S.collectives_line, loading_line=S.loading_line,
        cause_colors=CAUSE_COLORS, busy_color=BUSY_COLOR,
        css=Markup(static_asset("report.css")), timeline_js=Markup(safe_js(static_asset("timeline.js"))))


def write(reports: list[Report], path: Path, preface: str | None = None) -> None:
    Path(path).write_text(render(reports, preface), encoding="utf-8")
