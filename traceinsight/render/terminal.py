"""The terminal summary: verdict, what the trace cannot show, trace facts, ranked fixes, notes about the
measurement; for a CPU-only run the CPU time breakdown instead of GPU idle. `brief=True` (record): the
verdict and the top fixes only."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report.document import Report
from . import sections as S
from .format import terminal_safe

TONE = {"healthy": "bold green", "neutral": "bold", "alarm": "bold red"}


def _header(console: Console, d) -> None:
    t = d["trace"]
    # The whole file name, wrapped if need be: never cut.
    console.print(Text(f"traceinsight: {t['file']}{S.rank_label(t)}", style="bold", overflow="fold"))
    console.print(Text(d["verdict"], style=TONE[S.verdict_tone(d)]))
    for lim in S.limits(d):
        console.print(Text(f"Limits of this trace: {lim}", style="cyan"))
    cut = S.interrupted(d)
    if cut:
        console.print(Text(cut, style="yellow"))


def _facts(console: Console, d) -> None:
    s, t = d["summary"], d["trace"]
    steps, step = S.step_counts(d), S.step_line(d)
    per = S.per_step(d)
    stepped = not S.one_window(d)      # (medians over steps; one window has none)
    if S.cpu_only(d):
        console.print(Text(f"{S.no_gpu_label(d)} | {steps} | {step}"))
    else:
        console.print(Text(f"GPU {S.gpu_label(t)} | {steps} | {step} | GPU busy {s['median_gpu_busy_ms']} ms, "
                           f"idle {s['median_gpu_idle_ms']} ms {per}" + (" (medians)" if stepped else "")))
    if t.get("program_note"):
        console.print(Text(t["program_note"]))
    if t.get("recording"):
        console.print(Text(t["recording"]))
    console.print(Text(t["profiler_note"], style="dim"))
    idle = {k: v for k, v in s["idle_by_cause_ms_median_per_step"].items() if v and v > 0.0005}
    if idle and not S.cpu_only(d):
        console.print(Text(f"GPU idle by cause (ms, {'median ' + per if stepped else per}): " +
                           ", ".join(f"{k} {v}" for k, v in sorted(idle.items(), key=lambda kv: -kv[1]))))


def _cpu_time(console: Console, d, rows: int = 8) -> None:
    c = d.get("cpu_time")
    if not c:
        return
    console.print(Text(
        f"CPU time per step (median, thread {c['thread']}): in torch ops ({S.in_ops_what(d)}) "
        f"{c['in_ops_ms']} ms ({c['in_ops_pct']}%), outside ops ({S.outside_ops(c)}) "
        f"{c['outside_ops_ms']} ms ({c['outside_ops_pct']}%)"))
    for line in (S.loading_line(c), S.collectives_line(c)):
        if line:
            console.print(Text(line))
    if not c["top_ops"]:
        return
    tab = Table(title="Top ops by self CPU time (ms per step, mean; % of the step's CPU range)")
    for col in ("op", "calls", "self", "total", "self %"):
        tab.add_column(col, justify="left" if col == "op" else "right", overflow="fold" if col == "op" else None)
    for o in c["top_ops"][:rows]:
        tab.add_row(Text(o["op"]), str(o["calls_per_step"]), str(o["self_ms_per_step"]),
                    str(o["total_ms_per_step"]), str(o["self_pct"]))
    console.print(tab)


def _fixes(console: Console, d, limit: int | None = None) -> None:
    fx = S.fixes(d)[:limit] if limit else S.fixes(d)
    if not fx:
        return
    # (an unreliable replay's estimates fall back to the measured costs: not "replayed")
    how = " (replayed)" if (d.get("whatif") or {}).get("replay_reliable", True) else ""
    tab = Table(title=f"Fixes, ranked by estimated saving {S.per_step(d)} x confidence{how}", show_lines=False)
    tab.add_column("#", justify="right")
    tab.add_column("kind")
    tab.add_column("saving/step", justify="right")
    tab.add_column("confidence")
    tab.add_column("what we saw", overflow="fold")   # (a source path is not cut short)
    for i, f in enumerate(fx, 1):
        tab.add_row(str(i), f["kind"], S.saving(f, "\n"), f.get("confidence") or "", Text(f["title"]))
    if any(f.get("likely_savings_range_ms") for f in fx):
        tab.caption = S.LIKELY_CAPTION
    console.print(tab)
    for i, f in enumerate(fx, 1):
        console.print(Text(f"{i}. {f['kind']}: ", style="bold") + Text(f["fix"]))
        if S.alternatives(f):
            console.print(Text("   " + S.alternatives(f), style="dim"))


def _notes(console: Console, d) -> None:
    ns = S.notes(d)
    if ns:
        console.print(Text("Notes about the measurement (not fixes):", style="bold"))
        for n in ns:
            # (A title is not a sentence: the fix after it starts a new one.)
            sep = " " if n["title"].rstrip().endswith((".", ":", "!", "?")) else ". "
            console.print(Text(f"- {n['title']}" + (f"{sep}{n['fix']}" if n.get("fix") else ""), style="dim"))


def _plan(console: Console, d) -> None:
    rows = S.plan_rows(d)
    if not S.plan_shown(d) or not S.fixes(d):
        return
    tab = Table(title="Fix plan: in this order, each replayed on top of the ones before (estimates, per un-profiled step)")
    for c, j in (("#", "right"), ("fix", "left"), ("saves ms", "right"), ("un-profiled step after, ms", "right"), ("note", "left")):
        tab.add_column(c, justify=j)
    for i, r in enumerate(rows, 1):
        tab.add_row(str(i), r["kind"], str(r["saves_ms"]), str(r["estimated_step_ms"]), S.plan_note(r))
    console.print(tab)
    for kind, how, fix in S.prerequisite_fixes(d):
        console.print(Text(f"{kind}, {how}: {fix}"))


def show(reports: list[Report], console: Console | None = None, brief: bool = False) -> None:
    console = console or Console()
    for r in reports:
        d = terminal_safe(r.doc)
        _header(console, d)
        if brief:
            if S.cpu_only(d):
                _cpu_time(console, d, rows=5)
            _fixes(console, d, limit=3)
            continue
        _facts(console, d)
        for line in (S.unprofiled(d), S.window(d)):
            if line:
                console.print(Text(line, style="dim"))
        if S.cpu_only(d):
            _cpu_time(console, d)
        _fixes(console, d)
        _plan(console, d)
        if S.minor_line(d):
            console.print(Text(S.minor_line(d), style="dim"))
        _notes(console, d)
        for w in d["trace"]["warnings"]:
            console.print(Text(f"warning: {w}", style="yellow"))
