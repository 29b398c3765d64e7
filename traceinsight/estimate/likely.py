"""likely: where a fix's saving will likely land, from how far our own estimates of that kind of fix were
from the speed-ups measured when the fix was made.

The replay's range (Finding.savings_bound_us) spans what the fix's unknowns in the trace allow; it held the
measured speed-up on about half of the validation matrix's rows, because the larger errors are elsewhere:
the un-profiled step the estimate starts from, hosts that differ, workers slower than the loop they
replace. So every estimate of a kind we validated also gets the band that held 8 in 10 of our measured
fixes of programs it was not fitted on: predicted / measured speed-up between the 7th and 93rd percentile,
fitted by sample_traces/fit_likely.py on all the matrix's clean runs (NVIDIA H100 and H200 hosts, torch
2.11, default options and with_stack + record_shapes pooled). A 1.1x estimate and a 10x one do not miss
alike, so the rows are grouped by the predicted speed-up (BUCKETS): the kind's own band where it has 20
rows of 3 programs in the group, else the group's band over all validated kinds.
HELD_OUT says how it held on a program left out of the fit (the 10th-90th percentile, fitted on the sets
before the thirteenth until 2026-11-27, held 8 in 10 of the rows it was fitted on, 72% of a new program's).
The replay's range alone held 397 of the 702 clean rows that have one (57%).
A kind measured on fewer than 3 programs (dependency_wait: 1) or not at all (collective_wait, exposed
communication) gets no band, nor does one whose own measured fixes land in the band it would get far less
often than 8 in 10 (SPREAD; layout_permute was, 23 of 34, until its estimate counted batch norm on
2026-11-29): the report says it is not validated, and why.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

BUCKETS = (1.15, 1.35, 1.8, 3.0)        # predicted speed-up groups: < 1.15, 1.15-1.35, ..., >= 3
# The fitted tables (fit_likely.py --write, 2026-11-27): "validated" kind: [pair rows, programs]; "spread" kind:
# [rows inside its band, rows] (not validated); "pooled" group: [low, high percentile ("quantiles") of predicted
# / measured speed-up, rows, programs] over all validated kinds; "own" "kind/group": the same for a kind with
# enough rows of its own in the group.
TABLE = Path(__file__).with_name("likely.json")
_T = json.loads(TABLE.read_text())
VALIDATED = {k: tuple(v) for k, v in _T["validated"].items()}
SPREAD = {k: tuple(v) for k, v in _T.get("spread", {}).items()}     # kind: (rows inside its band, rows)
POOLED = {int(g): tuple(v) for g, v in _T["pooled"].items()}
OWN = {(k.split("/")[0], int(k.split("/")[1])): tuple(v) for k, v in _T["own"].items()}
SHARE = "about 8 in 10"
# fit_likely.py: each program's rows scored against the tables fitted without it ("held_out": [inside, rows],
# written with the tables so the reports never quote a stale figure). In the reports (the band joined with the
# replay's range, within the physical cap; validate_matrix.py) the measured speed-up is inside it more often, on
# rows all of which it was fitted on (the README has both).
_IN, _OF = _T["held_out"]
HELD_OUT = f"on programs left out of its fit in turn, it held {_IN:,} of {_OF:,} rows ({_IN / _OF:.0%})"


def likely_range_us(kind: str, saving_us: float, step_us: float, cap_us: float,
                    model_range: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The saving's likely range (us): the step after the fix, step_us - saving_us, scaled by the band of
    predicted / measured speed-up (a measured speed-up at ratio r leaves a step r times the predicted
    one), joined with the replay's own range, never above cap_us (no saving past what the step can give);
    None for a kind without a band, or without a step to scale."""
    if kind not in VALIDATED or step_us <= 0 or saving_us != saving_us or saving_us >= step_us:   # (NaN)
        return None
    after = step_us - saving_us
    g = _group(step_us / after)
    lo_r, hi_r = OWN.get((kind, g), POOLED[g])[:2]
    lo, hi = step_us - hi_r * after, step_us - lo_r * after
    if model_range:
        lo, hi = min(lo, model_range[0]), max(hi, model_range[1])
    # (The low end may be below nothing: a fix can cost time, as removing syncs alone did on some of ours.)
    return min(lo, saving_us), min(max(cap_us, saving_us), max(hi, saving_us))


def likely(kind: str, saving_us: float, step_us: float, caps: tuple[float, float],
           model_range: tuple[float, float] | None, step_top_us: float | None = None,
           cap_why: str = "") -> tuple[tuple[float, float] | None, str]:
    """(the likely range, what it rests on in words). caps: what the fix can give by physics at the step the range
    stops at (caps[0]; with step_top_us, the un-profiled step at the top of its band) and at the estimate; rank
    gives both at the estimate's step (bounds.recoverable_us), so that no end promises more than the fix can
    recover there. cap_why: why caps[0] is the most, said where it cuts the band's top."""
    rng = likely_range_us(kind, saving_us, step_us, caps[0], model_range)
    if rng is None:
        if kind in SPREAD:
            inside, n = SPREAD[kind]
            return None, (f"not validated: of our {n} measured {kind} fixes, only {inside} landed inside the band "
                          "an estimate of their size would get (a band must hold about 8 in 10): they spread too "
                          "far to give one")
        return None, (f"not validated: we have too few measured {kind} fixes to say how far such estimates land"
                      if kind not in VALIDATED else "")
    g = _group(step_us / (step_us - saving_us))
    lo_x, hi_x = ([1.0] + list(BUCKETS))[g], (list(BUCKETS) + [None])[g]
    size = f"{lo_x:g}x to {hi_x:g}x" if hi_x else f"{lo_x:g}x and more"
    if (kind, g) in OWN:
        n, w = OWN[(kind, g)][2:]
        whose = f"{n} {kind} before/after pairs of {w} programs"
    else:
        n, w = POOLED[g][2:]
        whose = (f"{n} before/after pairs of {w} programs, every validated kind's estimates of this size pooled, "
                 f"as {kind} has too few of its own at this size")
    text = (f"where {SHARE} of our measured fixes landed around estimates of this size ({size} predicted speed-up; "
            f"{whose}, on H100 and H200 hosts; {HELD_OUT})")
    if model_range:
        text += ", joined with the replay's own range"
    if rng[0] < 0:
        text += "; below zero: the fix may cost time, as some of ours did"
    if cap_why and likely_range_us(kind, saving_us, step_us, float("inf"), model_range)[1] > rng[1] + 1.0:
        text += f"; its top cut to {rng[1] / 1000:.3f} ms, {cap_why}"
    if step_top_us and rng[1] > caps[1] + 1.0:
        text += (f"; its top allows the un-profiled step to be as long as the top of its band "
                 f"({step_top_us / 1000:.3f} ms), where the estimated step would leave less to save")
    return rng, text


def _group(predicted_speedup: float) -> int:
    return int(np.searchsorted(BUCKETS, predicted_speedup, side="right"))
