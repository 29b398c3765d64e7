"""likely: where a fix's saving will likely land, from how far our own estimates of that kind of fix were
from the speed-ups measured when the fix was made.

The replay's range (Finding.savings_bound_us) spans what the fix's unknowns in the trace allow; it held the
measured speed-up on about half of the validation matrix's rows, because the larger errors are elsewhere:
the un-profiled step the estimate starts from, hosts that differ, workers slower than the loop they
replace. So every estimate of a kind we validated also gets the band that held 8 in 10 of our measured
fixes: predicted / measured speed-up between the 10th and 90th percentile, fitted by
sample_traces/fit_likely.py on the matrix's clean runs (NVIDIA H100 and H200 hosts, torch 2.11, default
options and with_stack + record_shapes pooled) before its thirteenth set. A 1.1x estimate and a 10x one do
not miss alike, so the rows are grouped by the predicted speed-up (BUCKETS): the kind's own band where it
has 20 rows of 3 programs in the group, else the group's band over all validated kinds.
HELD_OUT says how it held on the sets recorded after the fit. The replay's range alone held 387 of the 692
clean rows that have one (56%).
A kind measured on fewer than 3 programs (fp32_matmul, layout_permute, dependency_wait: 2, 2 and 1) or
not at all (collective_wait, exposed communication) gets no band: the report says it is not validated.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

BUCKETS = (1.15, 1.35, 1.8, 3.0)        # predicted speed-up groups: < 1.15, 1.15-1.35, ..., >= 3
# The fitted tables (fit_likely.py --write, 2026-11-27): "validated" kind: [pair rows, programs]; "pooled"
# group: [10th, 90th percentile of predicted / measured speed-up, rows, programs] over all validated kinds;
# "own" "kind/group": the same for a kind with enough rows of its own in the group.
TABLE = Path(__file__).with_name("likely.json")
_T = json.loads(TABLE.read_text())
VALIDATED = {k: tuple(v) for k, v in _T["validated"].items()}
POOLED = {int(g): tuple(v) for g, v in _T["pooled"].items()}
OWN = {(k.split("/")[0], int(k.split("/")[1])): tuple(v) for k, v in _T["own"].items()}
SHARE = "about 8 in 10"
# In the reports (the band joined with the replay's range, within the physical cap; validate_matrix.py):
# the measured speed-up inside it on 839 of the fitted sets' 1,077 rows (78%), 98 of the later sets' 124.
HELD_OUT = ("on the sets recorded after the fit, new workloads on other hosts, it held 98 of 124 rows, 79%")


def likely_range_us(kind: str, saving_us: float, step_us: float, cap_us: float,
                    model_range: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The saving's likely range (us): the step after the fix, step_us - saving_us, scaled by the band of
    predicted / measured speed-up (a measured speed-up at ratio r leaves a step r times the predicted
    one), joined with the replay's own range, never above cap_us (no saving past what the step can give);
    None for a kind without a band, or without a step to scale."""
    if kind not in VALIDATED or step_us <= 0 or saving_us != saving_us or saving_us >= step_us:   # (NaN)
        return None
    after = step_us - saving_us
    g = int(np.searchsorted(BUCKETS, step_us / after, side="right"))
    lo_r, hi_r = OWN.get((kind, g), POOLED[g])[:2]
    lo, hi = step_us - hi_r * after, step_us - lo_r * after
    if model_range:
        lo, hi = min(lo, model_range[0]), max(hi, model_range[1])
    # (The low end may be below nothing: a fix can cost time, as removing syncs alone did on some of ours.)
    return min(lo, saving_us), min(max(cap_us, saving_us), max(hi, saving_us))


def basis(kind: str) -> str:
    """What the band rests on, in words (or why there is none)."""
    if kind not in VALIDATED:
        return f"not validated: we have too few measured {kind} fixes to say how far such estimates land"
    rows, programs = VALIDATED[kind]
    return (f"where {SHARE} of our measured fixes landed around estimates of this size ({rows} {kind} "
            f"before/after pairs of {programs} programs on H100 and H200 hosts, with other kinds' where this "
            f"kind's are too few; {HELD_OUT}), joined with the replay's own range")
