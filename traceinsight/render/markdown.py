"""--markdown: a short summary to paste into a ticket."""
from __future__ import annotations

from pathlib import Path

from ..pipeline import breakdown, to_dict


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(analyses) -> str:
    out = []
    for a in analyses:
        d = to_dict(a)
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
        b = breakdown(a)
        out.append(f"\nMedian step {b['step'] / 1000:.3f} ms: GPU busy {b['gpu_busy'] / 1000:.3f} ms, idle "
                   f"{b['gpu_idle'] / 1000:.3f} ms. Estimates come from replaying the trace's timeline "
                   f"with each fix applied (replay error on the unchanged trace: "
                   f"{d['whatif'].get('replay_error_pct')}%).\n")
    return "\n".join(out)


def write(analyses, path: Path) -> None:
    path.write_text(render(analyses), encoding="utf-8")
