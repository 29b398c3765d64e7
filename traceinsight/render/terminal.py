"""The terminal summary: verdict, trace facts, ranked fixes."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report.document import Report


def show(reports: list[Report], console: Console | None = None) -> None:
    console = console or Console()
    for r in reports:
        d = r.doc
        s, t = d["summary"], d["trace"]
        console.rule(Text(f"traceinsight: {t['file']} (rank {t['rank']})"))
        console.print(Text(d["verdict"], style="bold"))
        console.print(Text(
            f"GPU {t['gpu']} | {s['steps']} steps ({t['step_source']}"
            f"{', last one partial' if t['partial_steps'] else ''}) | median step {s['median_step_ms']} ms "
            f"(min {s['min_step_ms']}, max {s['max_step_ms']}) | GPU busy {s['median_gpu_busy_ms']} ms, "
            f"idle {s['median_gpu_idle_ms']} ms per step (medians)"))
        if t.get("recording"):
            console.print(Text(t["recording"]))
        console.print(Text(t["profiler_note"], style="dim"))
        idle = {k: v for k, v in s["idle_by_cause_ms_median_per_step"].items() if v and v > 0.0005}
        if idle:
            console.print(Text("GPU idle by cause (median ms per step): " +
                               ", ".join(f"{k} {v}" for k, v in sorted(idle.items(), key=lambda kv: -kv[1]))))
        if d["findings"]:
            tab = Table(title="Fixes, ranked by estimated saving per step (replayed)", show_lines=False)
            tab.add_column("#", justify="right")
            tab.add_column("kind")
            tab.add_column("saving/step", justify="right")
            tab.add_column("what we saw")
            for i, f in enumerate(d["findings"], 1):
                tab.add_row(str(i), f["kind"], f"{f['estimated_savings_ms']} ms ({f['estimated_savings_pct']}%)",
                            Text(f["title"]))
            console.print(tab)
            for i, f in enumerate(d["findings"], 1):
                console.print(Text(f"{i}. {f['kind']}: ", style="bold") + Text(f["fix"]))
            comb = d["whatif"].get("combined")
            if comb:
                console.print(Text(f"All fixes together (replayed): about {comb['estimated_savings_ms']} ms per "
                                   f"step, to {comb['estimated_step_ms']} ms."))
        for w in t["warnings"]:
            console.print(Text(f"warning: {w}", style="yellow"))
