"""The fix plan: the ranked fixes in the order to apply them, each replayed on top of the ones before,
with the step time after each. Fixes aimed at the same idle time are never summed: the second one in
the plan saves only what the first left. A kind's prerequisites (KindSpec.prerequisites: syncs break a
CUDA-graph capture) go before it, whatever their own saving.
"""
from __future__ import annotations

from ..analyses import spec
from ..analyses.base import Finding
from ..analyses.fixes import combine
from . import replay


def plan_order(findings: list[Finding]) -> list[Finding]:
    """Replayable fixes in rank order, each preceded by the prerequisites that are present."""
    todo = [f for f in findings if f.fixes and spec(f.kind).estimate != "measured" and not spec(f.kind).note]
    out: list[Finding] = []

    def place(f: Finding, seen: tuple = ()) -> None:
        if f in out or f.kind in seen:
            return
        for pre in spec(f.kind).prerequisites:
            for g in todo:
                if g.kind == pre:
                    place(g, seen + (f.kind,))
        out.append(f)

    for f in todo:
        place(f)
    return out


def fix_plan(compiled: replay.Compiled, base: replay.Replay, findings: list[Finding], bw: float,
             cuts=None) -> list[dict]:
    rows: list[dict] = []
    applied: tuple = ()
    prev = base.median_us
    for f in plan_order(findings):
        applied = combine([applied, f.fixes])
        t = replay.simulate(replay.apply(compiled, applied, bw, cuts)).median_us
        rows.append({"kind": f.kind, "estimated_step_ms": round(t / 1000, 3),
                     "saves_ms": round(max(0.0, prev - t) / 1000, 3),
                     "cumulative_saves_ms": round(max(0.0, base.median_us - t) / 1000, 3),
                     "prerequisite_for": [g.kind for g in findings if f.kind in spec(g.kind).prerequisites]})
        prev = min(prev, t)
    return rows
