"""--markdown: a summary to paste into a ticket, with the representative step's timeline as a PNG beside
it (ticket.md -> ticket.png; more traces: ticket-2.png, ...). The verdict, what the trace cannot show
and the ranked fixes come first; evidence, notes about the measurement and tables sit in <details>
blocks, so the ticket stays short until someone opens them."""
from __future__ import annotations

from pathlib import Path

from ..report.document import Report
from . import sections as S
from .format import md_code, md_text
from .png import picture_file


_cell = md_text


def _stop(s: str) -> str:
    """A title as a sentence: it ends with a full stop."""
    return s if s.rstrip().endswith((".", "!", "?", ")")) else s.rstrip() + "."


def _ms(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def picture_paths(markdown: Path, n: int) -> list[Path]:
    """Where the PNGs of n traces go, beside the Markdown file."""
    markdown = Path(markdown)
    stem = markdown.with_suffix("")
    return [Path(f"{stem}.png") if i == 0 else Path(f"{stem}-{i + 1}.png") for i in range(n)]


def _picture(d, png: str, meta: dict) -> list[str]:
    step = f"step {meta['step']}" if meta["step"] is not None else "the trace"
    what = "CPU ranges" if S.cpu_only(d) else "GPU busy and idle gaps coloured by cause"
    out = [f"![Timeline of {step}: {what}]({png})", "",
           f"*Timeline of {step} ({meta['duration_ms']:.3f} ms, "
           f"{'the full step closest to the median' if meta['step'] is not None else 'the whole window'}), left to "
           f"right; a tick every {meta['tick_ms']:g} ms. Rows, top to bottom: {', '.join(meta['lanes'])}.*", ""]
    legend = " · ".join(f"`{col}` {name}" for name, col in meta["legend"].items())
    if legend:
        out.append(f"Colours: {legend}.")
    if meta["marked"]:
        out.append(f"Black marks above a GPU row: the idle gaps of the top fix, `{meta['top']}` "
                   f"({meta['marked']} in this step).")
    elif meta["top"]:
        out.append(f"The top fix, `{meta['top']}`, is not an idle gap of its own: see its evidence below.")
    return out + [""]


def _details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _fix_details(fx, per: str = "per step") -> list[str]:
    body = []
    for i, f in enumerate(fx, 1):
        body += [f"**{i}. `{f['kind']}`: {_cell(f['title'])}**", "",
                 f"- Estimated saving {per}: {S.saving(f, '; ')}; "
                 + (f"cost {f['measured_cost_ms_per_step']} ms {per}, derived ({_cell(f['cost_basis'])})"
                    if f.get("cost_basis") else f"measured cost {f['measured_cost_ms_per_step']} ms {per}, profiled")
                 + (f" ({f['evidence']['measured_cost_is']})" if f["evidence"].get("measured_cost_is") else "")
                 + f"; confidence {f['confidence']}.",
                 f"- How it was estimated: {_cell(f.get('estimate_method') or 'n/a')}"
                 + (f"; likely range: {_cell(f['likely_basis'])}" if f.get("likely_basis") else ""),
                 f"- Fix: {_cell(f['fix'])}"]
        if S.alternatives(f):
            body.append(f"- {_cell(S.alternatives(f))}")
        body.append("")
    return body


def _cpu_table(d) -> list[str]:
    c = d["cpu_time"]
    out = [f"On the step's thread, per step (median): {c['in_ops_ms']} ms ({c['in_ops_pct']}%) inside torch ops "
           f"({S.in_ops_what(d)}), {c['outside_ops_ms']} ms "
           f"({c['outside_ops_pct']}%) outside any op ({S.outside_ops(c)})."
           + "".join(f" {_cell(line)}" for line in (S.loading_line(c), S.collectives_line(c)) if line), "",
           "| op | calls per step (mean) | self ms per step (mean) | total ms per step (mean) "
           "| self % of the step's CPU range |",
           "|---|---|---|---|---|"]
    if not c["top_ops"]:
        return out[:1]
    for o in c["top_ops"]:
        out.append(f"| {md_code(o['op'])} | {o['calls_per_step']} | {o['self_ms_per_step']} | "
                   f"{o['total_ms_per_step']} | {o['self_pct']} |")
    return out


def render_one(r: Report, png: str | None = None, meta: dict | None = None) -> str:
    d = r.doc
    s, t = d["summary"], d["trace"]
    fx = S.fixes(d)
    out = [f"### traceinsight: {md_code(Path(t['file']).name)}{_cell(S.rank_label(t))}\n",
           f"**{_cell(d['verdict'])}**\n"]
    for lim in S.limits(d):
        out.append(f"> **Limits of this trace:** {_cell(lim)}\n")
    cut = S.interrupted(d)
    if cut:
        out.append(f"> **Interrupted recording:** {_cell(cut)}\n")
    steps, step = S.step_counts(d), S.step_line(d)
    if S.cpu_only(d):
        out.append(f"- {S.no_gpu_label(d)}; {steps}, {step}\n")
    else:
        out.append(f"- GPU: {_cell(S.gpu_label(t))}; {steps}, {step}; GPU idle {s['gpu_idle_pct']}% of "
                   + ("the window\n" if S.one_window(d) else "each step (median of the steps' shares)\n"))
    if t.get("program_note"):
        out.append(f"- {_cell(t['program_note'])}\n")
    if t.get("recording"):     # (what a step is, when `record` chose the window: the HTML and terminal say it too)
        out.append(f"- {_cell(t['recording'])}\n")
    if png and meta:
        out += _picture(d, png, meta)
    if S.unprofiled(d):     # (also without fixes: a healthy step, a CPU-only run that record timed)
        out.append(f"{_cell(S.unprofiled(d))}\n")
    if fx:
        out.append("| # | fix | est. saving " + (S.per_step(d) if S.one_window(d) else "per step (median)")
                   + " | confidence |")
        out.append("|---|---|---|---|")
        for i, f in enumerate(fx, 1):
            out.append(f"| {i} | `{f['kind']}`: {_cell(f['title'])} | {S.saving(f, '; ')} | {f['confidence']} |")
        if S.window(d):
            out.append(f"\n{_cell(S.window(d))}")
        plan = S.plan_rows(d)
        if S.plan_shown(d):
            out.append("\n**Fix plan** (in this order, each replayed on top of the ones before; estimates per un-profiled step):\n")
            out.append("| # | fix | saves | un-profiled step after |")
            out.append("|---|---|---|---|")
            for i, p in enumerate(plan, 1):
                note = S.plan_note(p)
                first = f" ({note})" if note else ""
                out.append(f"| {i} | `{p['kind']}`{first} | {p['saves_ms']} ms | {p['estimated_step_ms']} ms |")
            for kind, how, fix in S.prerequisite_fixes(d):
                out.append(f"\n`{kind}`, {how}: {_cell(fix)}")
        out.append("")
        out += _details("Fixes: evidence, estimate and code change", _fix_details(fx, S.per_step(d)))
    if S.minor_line(d):
        out.append(f"{_cell(S.minor_line(d))}\n")
    ns = S.notes(d)
    if ns:
        out += _details(f"Notes about the measurement ({len(ns)})",
                        [f"- **{_cell(_stop(n['title']))}** {_cell(n.get('fix') or '')}" for n in ns])
    if d.get("cpu_time") and (S.cpu_only(d) or not fx):
        out += _details("CPU time by op", _cpu_table(d))
    if not S.cpu_only(d):
        idle = {k: v for k, v in s["idle_by_cause_ms_median_per_step"].items() if v}
        # (Each figure its own median over the steps, not the median step's: busy, idle and the causes add up to the
        # step only when every step is alike.)
        one = S.one_window(d)    # (no medians)
        body = [(f"Window {_ms(s['median_step_ms'])} ms; GPU busy {_ms(s['median_gpu_busy_ms'])} ms, idle "
                 f"{_ms(s['median_gpu_idle_ms'])} ms" if one else
                 f"Median step {_ms(s['median_step_ms'])} ms; GPU busy {_ms(s['median_gpu_busy_ms'])} ms, idle "
                 f"{_ms(s['median_gpu_idle_ms'])} ms, each its own median per step") + ("; by cause: " + ", ".join(
                    f"{k} {v} ms" for k, v in idle.items()) if idle else "") + "."]
        err = d["whatif"].get("replay_error_pct")
        body.append("" if err is None else
                    f"\nEstimates replay the trace's timeline with each fix applied; replaying the unchanged trace "
                    f"is off by {err}%. " + S.replay_trust(d))
        if err is None:
            body.append("\nThe timeline could not be replayed for this trace: estimates are measured costs.")
        out += _details("GPU time and how the estimates were made", body)
    return "\n".join(out)


def render(reports: list[Report], pictures: list[tuple[str, dict] | None] | None = None) -> str:
    pictures = pictures or [None] * len(reports)
    return "\n".join(render_one(r, *(p or (None, None))) for r, p in zip(reports, pictures))


def files(reports: list[Report], path: Path, preface: str = "") -> dict[Path, str | bytes]:
    """The Markdown file with each report's picture beside it; `preface` (a job's summary) goes first."""
    out: dict[Path, str | bytes] = {}
    pics = []
    for r, png in zip(reports, picture_paths(path, len(reports))):
        pic = picture_file(r)
        if pic is not None:
            out[png] = pic[0]
        pics.append((png.name, pic[1]) if pic else None)
    out[Path(path)] = (preface + "\n\n" if preface else "") + render(reports, pics)
    return out
