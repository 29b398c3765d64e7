"""rank: estimate each finding's savings by replaying the graph with its fix, then sort.

The estimate is replayed-baseline minus replayed-with-fix (median step), so the replay's own
error on the unchanged trace cancels out; that error is reported beside the estimates.
Fixes are also replayed all together: savings of different fixes overlap and do not add up.
"""
from __future__ import annotations

import math

import numpy as np

from ..analyses import spec
from ..analyses.base import Context, Finding
from ..analyses.fixes import ScaleKernels, combine
from . import replay

# A finding must cost at least this share of the median step to be reported: below it, a fix is
# not worth a ticket, and a healthy trace must come out healthy.
MIN_SHARE = 0.03
MIN_US = 5.0


def pinned_bandwidth_gbps(ctx: Context) -> float:
    g = ctx.model.gpu
    pinned = g[(g["kind"] == "memcpy") & (g["copy_dir"] == "HtoD") & ~g["pageable"] & (g["bytes"] >= 1e6)]
    if len(pinned) and pinned["dur"].sum() > 0:
        return float(pinned["bytes"].sum() / (pinned["dur"].sum() * 1e-6) / 1e9)
    return replay.PINNED_GBPS_DEFAULT


def estimate(ctx: Context, G, findings: list[Finding]) -> dict:
    median_step = ctx.median_step_us
    compiled = replay.Compiled(G) if G is not None else None
    base = replay.simulate(replay.apply(compiled, {})) if compiled is not None else None
    bw = pinned_bandwidth_gbps(ctx)
    actual = ctx.model.steps.set_index("step")["dur"]
    info = {"baseline_replay_ms": None, "replay_error_pct": None, "combined": None,
            "replayed_steps": [], "pinned_gbps": round(bw, 1)}
    if base is not None and base.step_us:
        act = float(np.median([actual[s] for s in base.step_us]))
        info["baseline_replay_ms"] = round(base.median_us / 1000, 3)
        info["measured_ms_same_steps"] = round(act / 1000, 3)
        info["replay_error_pct"] = round(100 * (base.median_us - act) / act, 1) if act else None
        info["replayed_steps"] = sorted(base.step_us)
    for f in findings:
        how = spec(f.kind).estimate
        if base is None or not base.step_us or how == "measured" or not f.fixes:
            f.estimated_savings_us = f.lost_per_step_us
            f.estimate_note = ("measured cost in the trace; the fix's effect cannot be replayed, "
                               "so this is an upper bound")
            f.savings_bound_us = (0.0, f.lost_per_step_us)
            continue
        saved = _saving(compiled, base, f.fixes, bw)
        f.estimated_savings_us = saved
        f.estimate_note = "replay of the timeline with the fix applied"
        scaled = [fx for fx in f.fixes if isinstance(fx, ScaleKernels) and fx.bounds]
        if scaled:
            vals = []
            for k in (1, 0):
                plan = tuple(fx.with_factor(fx.bounds[k]) if fx in scaled else fx for fx in f.fixes)
                vals.append(_saving(compiled, base, plan, bw))
            f.savings_bound_us = (min(vals), max(vals))
            f.estimate_note += "; the new kernels' speed is not in the trace, hence the range"
        elif how == "idle_floor" and saved > f.lost_per_step_us:
            # Removing host work also lets later launches go out sooner, but the replay removes all
            # of it, data loading or not: the idle it caused is the estimate, the replay the ceiling.
            f.savings_bound_us = (f.lost_per_step_us, saved)
            f.estimated_savings_us = f.lost_per_step_us
            f.estimate_note = ("measured idle during host work; replaying with all host work removed "
                               "gives the upper end of the range")
        elif how == "upper_bound":
            f.savings_bound_us = (0.0, saved)
            f.estimate_note += "; " + (spec(f.kind).caveat or "what replaces the removed work is not in "
                                                              "the trace: treat as an upper bound")
    # Notes are about the measurement, not the program: they go after every real fix.
    findings.sort(key=lambda f: (spec(f.kind).note, -f.estimated_savings_us))
    minor = [f for f in findings if not _significant(f, median_step) and f.lost_per_step_us > 0]
    findings = [f for f in findings if _significant(f, median_step)]
    replayable = [f for f in findings if spec(f.kind).estimate != "measured" and f.fixes]
    if base is not None and base.step_us and len(replayable) > 1:
        fixed = replay.simulate(replay.apply(compiled, combine([f.fixes for f in replayable]), bw))
        info["combined"] = {"kinds": [f.kind for f in replayable],
                            "estimated_step_ms": round(fixed.median_us / 1000, 3),
                            "estimated_savings_ms": round(max(0.0, base.median_us - fixed.median_us) / 1000, 3)}
    return {"findings": findings, "minor": minor, "whatif": info}


def _saving(compiled, base, plan, bw) -> float:
    """Replayed baseline minus replayed plan, median step (us), never below 0."""
    return max(0.0, base.median_us - replay.simulate(replay.apply(compiled, plan, bw)).median_us)


def _significant(f: Finding, median_step: float) -> bool:
    """Worth a ticket: the estimate clears the bar, and for idle causes so does the measured idle."""
    sp = spec(f.kind)
    bar = max(MIN_US, (MIN_SHARE if sp.min_share is None else sp.min_share) * median_step)
    if sp.note:
        return f.lost_per_step_us >= sp.note_share * median_step
    if sp.idle_cause and f.lost_per_step_us < bar:
        return False
    v = f.estimated_savings_us if not math.isnan(f.estimated_savings_us) else f.lost_per_step_us
    return v >= bar
