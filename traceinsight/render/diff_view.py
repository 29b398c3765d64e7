"""Render a diff (the dict from report.diff.compare): terminal, Markdown, HTML, JSON.

Nothing here computes: every number comes from the diff dict. The HTML page also draws the two
representative steps on aligned timelines (report/timeline.py + static/timeline.js) when both sides
are traces; it is self-contained (no network), strings are autoescaped by jinja2 and the timeline
JSON is embedded with `<`, `>` and `&` escaped.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from markupsafe import Markup
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .assets import dumps_for_script, safe_js, static_asset
from .format import delta as _d, env, fixed as _v, md_code, md_text, terminal_safe

STATUS_STYLE = {
    "resolved": "green", "shrunk": "green", "faster": "green", "removed": "green",
    "new": "red", "grown": "red", "slower": "red", "added": "yellow",
    "unchanged": "dim", "dropped from the top list": "dim", "entered the top list": "dim",
    "not reported before": "dim", "not reported after": "dim",
}
SIG_WORDS = {"within_noise": "within noise", "beyond_noise": "beyond noise",
             "well_beyond_noise": "well beyond noise", "unknown": "noise unknown"}



def _tables(d: dict, gpu: tuple, cpu: tuple) -> tuple:
    """The change tables to show: the GPU's kernels and ops, or for two CPU-only runs their ops' CPU time."""
    return (cpu,) if d.get("cpu_only") else gpu

def _cost(v) -> str:
    """A cause's cost per step; None: that side's analysis did not report the kind (not 0)."""
    return "not reported" if v is None else _v(v)


def like_words(d: dict) -> str | None:
    """'Like for like: unknown (...)' where nothing about the programs could be compared, else None."""
    if d.get("like_for_like") is None and not d["comparability_warnings"]:
        return ("Like for like: unknown: neither the ops' input shapes nor the kernels could be compared, so "
                "whether both sides ran the same program is not known.")
    return None


def _change_label(st: dict) -> str:
    """The step table's change row: of the profiled medians, or of the un-profiled estimates."""
    return "change" if st.get("basis", "profiled") == "profiled" else "change, un-profiled (est.)"


def _short(s: str, n: int = 90) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def changed_rows(table: dict, limit: int) -> list[dict]:
    """Rows that changed (sorted by |delta|, as in the diff), then nothing else."""
    return [r for r in table.get("rows", []) if r["status"] != "unchanged"][:limit]


# --------------------------------------------------------------------------- terminal

def show(d: dict, console: Console | None = None, kernels: int = 10, ops: int = 8) -> None:
    console = console or Console()
    d = terminal_safe(d)
    b, a = d["before"], d["after"]
    # (the file names on lines of their own: a rule cuts them to the width, and the after file had gone from a
    # piped run's 80 columns)
    console.rule(Text("traceinsight diff"))
    console.print(Text(f"before: {b['file']}\nafter:  {a['file']}"))
    if d["comparability_warnings"]:
        console.print(Text("Not like for like: " + "; ".join(d["comparability_warnings"]), style="bold yellow"))
    if like_words(d):
        console.print(Text(like_words(d), style="yellow"))
    console.print(Text(d["headline"], style="bold"))
    st = d["step_time"]
    tab = Table(title="Step time (full steps, ms, profiled)", show_lines=False)
    for col in ("", "median", "min", "max", "MAD", "IQR", "noise ±", "steps"):
        tab.add_column(col, justify="right" if col else "left")
    for label, s in (("before", st["before"]), ("after", st["after"])):
        tab.add_row(label, _v(s["median_ms"]), _v(s["min_ms"]), _v(s["max_ms"]), _v(s["mad_ms"]),
                    _v(s["iqr_ms"]), _v(s["noise_ms"]), str(s["n"]))
    tab.add_row(_change_label(st), _d(st["delta_ms"]), "", "", "", "", _v(st.get("noise_used_ms")),
                SIG_WORDS.get(st["significance"], st["significance"]))
    console.print(tab)
    g = d["gpu"]
    if not d.get("cpu_only"):
        console.print(Text(f"GPU busy per step {_v(g['median_gpu_busy_ms']['before'])} -> "
                           f"{_v(g['median_gpu_busy_ms']['after'])} ms, idle {_v(g['median_gpu_idle_ms']['before'])} -> "
                           f"{_v(g['median_gpu_idle_ms']['after'])} ms (medians, profiled)"))
    if d["causes"]:
        tab = Table(title="Causes: cost per step (ms, median, profiled)")
        for col in ("kind", "before", "after", "change", "status"):
            tab.add_column(col, justify="right" if col in ("before", "after", "change") else "left")
        for c in d["causes"]:
            status = c["status"] + (f" ({c['resolved_how']})" if c.get("resolved_how") else "")
            rep = "" if (c["reported_before"] or c["reported_after"]) else " (idle cause)"
            tab.add_row(c["kind"] + rep, _cost(c["before_ms_per_step"]), _cost(c["after_ms_per_step"]),
                        _d(c["delta_ms_per_step"]), Text(status, style=STATUS_STYLE.get(c["status"], "")))
        console.print(tab)
        console.print(Text(d["causes_note"], style="dim"))
    for title, key, limit in _tables(d, (("GPU time by kernel (ms per step), largest changes", "kernels", kernels),
                                         ("GPU time by op and input shapes (ms per step), largest changes", "ops", ops)),
                                     ("CPU time by op (self ms per step, mean), largest changes", "cpu_ops", ops)):
        rows = changed_rows(d.get(key) or {}, limit)
        if not rows:
            console.print(Text(f"{title}: no change beyond {5}% / 1 us.", style="dim"))
            continue
        tab = Table(title=title)
        for col in ("status", "name", "before", "after", "change"):
            tab.add_column(col, justify="right" if col in ("before", "after", "change") else "left",
                           overflow="fold" if col == "name" else "ellipsis")
        for r in rows:
            tab.add_row(Text(r["status"], style=STATUS_STYLE.get(r["status"], "")), Text(_short(r["label"], 100)),
                        _v(r["before_ms_per_step"]), _v(r["after_ms_per_step"]), _d(r["delta_ms_per_step"]))
        console.print(tab)
    for n in d["notes"]:
        console.print(Text("note: " + n, style="yellow"))
    gate = d.get("regression") or {}
    if gate.get("checked"):
        console.print(Text(("REGRESSION: " if gate["regressed"] else "no regression: ") + gate["reason"],
                           style="bold red" if gate["regressed"] else "green"))
    if d.get("timeline_note"):
        console.print(Text(d["timeline_note"], style="dim"))
    for label, s in (("before", b), ("after", a)):
        for w in s.get("warnings") or []:
            console.print(Text(f"warning ({label}): {w}", style="yellow"))


# --------------------------------------------------------------------------- markdown


_cell = md_text


def _short_names(before: str, after: str) -> tuple[str, str]:
    """The two files' names, with as many parent folders as tell them apart (`record` names every trace
    train.pt.trace.json.gz: a ticket's header had read "train.pt.trace.json.gz -> train.pt.trace.json.gz")."""
    pb, pa = Path(before), Path(after)
    for k in range(1, max(len(pb.parts), len(pa.parts)) + 1):
        nb, na = str(Path(*pb.parts[-k:])), str(Path(*pa.parts[-k:]))
        if nb != na:
            return nb, na
    return before, after


def render_markdown(d: dict, kernels: int = 10, ops: int = 8) -> str:
    b, a, st = d["before"], d["after"], d["step_time"]
    nb, na = _short_names(b["file"], a["file"])
    out = [f"### traceinsight diff: {md_code(nb)} -> {md_code(na)}\n"]
    if d["comparability_warnings"]:
        out.append("> **Not like for like:** " + _cell("; ".join(d["comparability_warnings"])) + "\n")
    if like_words(d):
        out.append("> " + _cell(like_words(d)) + "\n")
    out.append(f"**{_cell(d['headline'])}**\n")
    out.append("| | median ms | min | max | MAD | IQR | noise ± | full steps |")
    out.append("|---|---|---|---|---|---|---|---|")
    for label, s in (("before", st["before"]), ("after", st["after"])):
        out.append(f"| {label} | {_v(s['median_ms'])} | {_v(s['min_ms'])} | {_v(s['max_ms'])} | {_v(s['mad_ms'])} | "
                   f"{_v(s['iqr_ms'])} | {_v(s['noise_ms'])} | {s['n']} |")
    out.append(f"| {_change_label(st)} | {_d(st['delta_ms'])} | | | | | {_v(st.get('noise_used_ms'))} | "
               f"{SIG_WORDS.get(st['significance'], st['significance'])} |\n")
    if d["causes"]:
        out.append("| cause / finding | before ms/step | after ms/step | change | status |")
        out.append("|---|---|---|---|---|")
        for c in d["causes"]:
            status = c["status"] + (f" ({c['resolved_how']})" if c.get("resolved_how") else "")
            out.append(f"| {md_code(c['kind'])} | {_cost(c['before_ms_per_step'])} | {_cost(c['after_ms_per_step'])} "
                       f"| {_d(c['delta_ms_per_step'])} | {status} |")
        out.append("")
        out.append(_cell(d["causes_note"]) + "\n")
    for title, key, limit in _tables(d, (("GPU time by kernel", "kernels", kernels), ("GPU time by op", "ops", ops)),
                                     ("CPU time by op (self, mean)", "cpu_ops", ops)):
        rows = changed_rows(d.get(key) or {}, limit)
        out.append(f"**{title}** (ms per step, largest changes)" + ("" if rows else ": no change") + "\n")
        if rows:
            out.append("| status | name | before | after | change |")
            out.append("|---|---|---|---|---|")
            for r in rows:
                out.append(f"| {r['status']} | {md_code(_short(r['label'], 120))} | {_v(r['before_ms_per_step'])} | "
                           f"{_v(r['after_ms_per_step'])} | {_d(r['delta_ms_per_step'])} |")
            out.append("")
    for n in d["notes"]:
        out.append(f"- {_cell(n)}")
    gate = d.get("regression") or {}
    if gate.get("checked"):
        out.append(f"\n**{'Regression' if gate['regressed'] else 'No regression'}** "
                   f"(--fail-on-regression {gate['threshold_pct']:g}%): {_cell(gate['reason'])}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- html

def _timelines(d: dict, sides) -> dict | None:
    """Timeline data of both representative steps on one axis, or None (a side has no trace)."""
    if sides is None or any(s is None or s.report is None or s.report.timeline is None for s in sides):
        return None
    tl = [s.report.timeline for s in sides]
    span = max(float(t.get("duration_us") or 0) for t in tl) or 1.0
    # dumps_for_script escapes < > & (and U+2028/9): safe as the text of a <script> element.
    return {"before": Markup(dumps_for_script(tl[0])), "after": Markup(dumps_for_script(tl[1])),
            "meta": [{"step": t.get("step"), "duration_ms": (t.get("duration_us") or 0) / 1000,
                      "items_total": t.get("items_total"), "items_kept": t.get("items_kept")} for t in tl],
            "domain": f"0,{span:.3f}", "js": Markup(safe_js(static_asset("timeline.js")))}


def _strip_points(d: dict) -> dict:
    """Per-step durations of both sides on one 0..600 px scale, for the inline SVG dot plot."""
    st = d["step_time"]
    vals = [v for s in (st["before"], st["after"]) for v in s.get("durations_ms") or []]
    if not vals:
        return {}
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.05 or max(hi * 0.05, 1e-3)
    lo, hi = max(0.0, lo - pad), hi + pad

    def x(v):
        return round(20 + 560 * (v - lo) / (hi - lo), 1)
    out = {"lo": round(lo, 3), "hi": round(hi, 3)}
    for label in ("before", "after"):
        s = st[label]
        out[label] = {"points": [x(v) for v in s.get("durations_ms") or []],
                      "median": x(s["median_ms"]) if s.get("median_ms") is not None else None}
    return out


def render_html(d: dict, sides=None, kernels: int = 25, ops: int = 20) -> str:
    return env.get_template("diff.html.j2").render(
        d=d, timelines=_timelines(d, sides), strip=_strip_points(d), css=Markup(static_asset("report.css")),
        kernel_rows=changed_rows(d["kernels"], kernels), op_rows=changed_rows(d["ops"], ops),
        cpu_op_rows=changed_rows(d.get("cpu_ops") or {}, ops),
        sig_words=SIG_WORDS, fmt=_v, fmtd=_d, short=_short, cost=_cost, like=like_words(d),
        change_label=_change_label(d["step_time"])).lstrip()


# --------------------------------------------------------------------------- files

def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o) if math.isfinite(o) else None
    except ImportError:  # pragma: no cover
        pass
    return str(o)


def write_outputs(d: dict, sides=None, html: Path | None = None, json_path: Path | None = None,
                  markdown: Path | None = None) -> None:
    from .files import write_all
    files: dict[Path, str | bytes] = {}
    if json_path is not None:
        files[Path(json_path)] = json.dumps(d, indent=2, default=_json_default) + "\n"
    if markdown is not None:
        files[Path(markdown)] = render_markdown(d)
    if html is not None:
        files[Path(html)] = render_html(d, sides)
    write_all(files)
