"""GPU work queued before the profiling window that runs into the window's first step (warm-up steps still
draining): which steps hold it (the document's steps[].holds_prewindow_work, which diff leaves out of its step
distribution) and what the limits say about it, medians with and without that step computed, not assumed."""
from __future__ import annotations

import numpy as np

from ..trace.facts import launched_before_window
from ..trace.model import TraceModel
from ..trace.steps import full_step_mask, step_at
from .breakdown import idle_share

PRELAUNCHED_MIN_SHARE = 0.1   # of the median step: GPU work from before the window worth saying
# Leaving the step out moves the median step by less than this share of it, and the GPU's idle share of a step
# by less than this many of its points: it "does not move the medians".
MEDIANS_HOLD = 0.03


def prewindow_steps(model: TraceModel, full_steps) -> list[int]:
    """The full steps that GPU work queued before the profiling window lengthens (a first step of 91 ms beside 30 ms
    ones): marked steps[].holds_prewindow_work, diff leaves them out of the step distribution."""
    return sorted(_prewindow_held(model, full_steps, float(full_steps["dur"].median())))


def _prewindow_held(model: TraceModel, steps, median_us: float) -> dict[int, tuple[int, float]]:
    """The note's and the flag's one rule: per step, the GPU activities launched before the window that start in it
    and their busy time (us), where at least PRELAUNCHED_MIN_SHARE of the median full step (none before a step)."""
    pre = launched_before_window(model)
    if not pre.any() or steps.empty:
        return {}
    step = step_at(steps, model.gpu["ts"].to_numpy()[pre])
    dur = model.gpu["dur"].to_numpy()[pre]
    held = {int(s): (int((step == s).sum()), float(dur[step == s].sum())) for s in np.unique(step[step >= 0])}
    return {s: v for s, v in held.items() if v[1] >= PRELAUNCHED_MIN_SHARE * median_us}


def launched_before(model: TraceModel, full: int) -> str | None:
    """GPU work with no launch call in the trace that runs in the first step: launched before the profiling window
    (warm-up steps still draining), it lengthens that step (a partial first step too, where the trace has one)."""
    st = model.steps
    held = _prewindow_held(model, st, float(st.loc[full_step_mask(st["partial"]), "dur"].median())) if len(st) else {}
    if not held:
        return None
    (s, (n, busy)), = held.items()      # (only the first step can hold it: launched_before_window)
    return (f"{n} GPU activities ({busy / 1000:.1f} ms) have no launch call in the trace: launched before "
            f"the profiling window (warm-up steps still draining), they run into step {s}, whose "
            f"{float(st.loc[st['step'] == s, 'dur'].iloc[0]) / 1000:.1f} ms include them"
            + (_medians_without(st, s) if full >= 3 else "."))


def _medians_without(st, s: int) -> str:
    """Whether leaving step `s` out moves the medians (the median step, the GPU's idle share of a step): said as
    measured (a review found "one step does not move the medians" beside a ResNet-50 whose median step was that
    step, 52.2 ms, and 49.0 ms without it)."""
    full = st[full_step_mask(st["partial"])]
    rest = full[full["step"] != s]
    if len(rest) == len(full):      # (a partial step: the medians leave it out)
        return "; the medians leave that partial step out."
    m0, m1 = float(full["dur"].median()), float(rest["dur"].median())
    i0, i1 = idle_share(full), idle_share(rest)
    if abs(m1 - m0) < MEDIANS_HOLD * m0 and abs(i1 - i0) < MEDIANS_HOLD:
        return "; one step does not move the medians."
    return (f"; the medians here include that step: without it the median step is {m1 / 1000:.1f} ms, not "
            f"{m0 / 1000:.1f} ms, and the GPU idle {i1:.0%} of each step, not {i0:.0%}.")

