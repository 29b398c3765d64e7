"""--markdown: a short summary to paste into a ticket."""
from __future__ import annotations

from pathlib import Path

from ..report.document import Report


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _ms(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def render(reports: list[Report]) -> str:
    out = []
    for r in reports:
        d = r.doc
        s, t = d["summary"], d["trace"]
        out.append(f"### traceinsight: `{_cell(Path(t['file']).name)}` (rank {t['rank']})\n")
        out.append(f"**{_cell(d['verdict'])}**\n")
        out.append(f"- GPU: {_cell(t['gpu'])}; {s['steps']} steps ({t['step_source']}), median step "
                   f"{s['median_step_ms']} ms (min {s['min_step_ms']}, max {s['max_step_ms']}); GPU idle "
                   f"{s['gpu_idle_pct']}% of the median step\n")
        if d["findings"]:
            out.append("| # | finding | est. saving per step (median) | fix |")
            out.append("|---|---|---|---|")
            for i, f in enumerate(d["findings"], 1):
                rng = f" (range {f['savings_range_ms'][0]}-{f['savings_range_ms'][1]} ms)" if f["savings_range_ms"] else ""
                out.append(f"| {i} | `{f['kind']}`: {_cell(f['title'])} | {f['estimated_savings_ms']} ms "
                           f"({f['estimated_savings_pct']}%){rng} | {_cell(f['fix'])} |")
            comb = d["whatif"].get("combined")
            if comb:
                out.append(f"\nAll fixes together (replayed, not summed): about {comb['estimated_savings_ms']} ms "
                           f"per step saved.")
        out.append(f"\nMedian step {_ms(s['median_step_ms'])} ms: GPU busy {_ms(s['median_gpu_busy_ms'])} ms, idle "
                   f"{_ms(s['median_gpu_idle_ms'])} ms. Estimates come from replaying the trace's timeline "
                   f"with each fix applied (replay error on the unchanged trace: "
                   f"{d['whatif'].get('replay_error_pct')}%).\n")
    return "\n".join(out)


def write(reports: list[Report], path: Path) -> None:
    path.write_text(render(reports), encoding="utf-8")
