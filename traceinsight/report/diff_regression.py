"""diff's step times: each side's step distribution, the change of the median step against one noise band,
and the CI gate (--fail-on-regression) on that change, as the diff JSON's `step_time` and `regression` blocks."""
from __future__ import annotations

import math

from .diff_tables import _f, _fmt_ms, _r

# A step-time change is "within noise" inside the band: NOISE_K x the larger of the two traces' step-to-step
# noise (1.4826 x MAD of full-step durations, a robust standard deviation), or the floor where that is wider.
# It is "well beyond" when it is also above WELL_K x that noise and the middle halves (quartiles) of the two
# step-time samples do not overlap.
NOISE_K = 2.0
WELL_K = 5.0
# Step times in the JSON are rounded to 1 us.
NOISE_FLOOR_MS = 0.001
# The run-to-run floor: the same program's step varies more between runs (another host, clocks, allocator
# state) than between the 5 steps of one trace, so a bare --fail-on-regression had failed CI on +0.7% between
# two runs of healthy_convnet. Measured on the committed matrix (sample_traces/matrix/*/manifest.json): each
# run's un-profiled median step against the median of the same workload and variant on the same GPU model
# over all runs deviates by 4.1% (the median over 2,900 medians of 469 groups; 4.9% as the median of the
# groups' own medians). Profiled medians of one workload and setting vary more between runs (validation.json:
# median 10.6%, partly the profiler's host cost), so this is a floor, not a bound: a --fail-on-regression PCT
# adds a threshold on top. tests/test_review_diff_pass.py recomputes the figure from the manifests.
RUN_TO_RUN_REL = 0.05
RUN_TO_RUN_WORDS = (f"{100 * RUN_TO_RUN_REL:g}% of the step, as one program's step varies between runs (measured "
                    "over 2,900 recorded runs)")
PREWINDOW_WHY = "holds GPU work launched before the profiling window"

BEYOND = ("beyond_noise", "well_beyond_noise")


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def step_stats(doc: dict, leave_out=()) -> dict:
    """Median, spread and noise of the full steps' durations (ms), from the document's steps. `leave_out`: step
    numbers that hold GPU work queued before the profiling window (the single-trace analysis says so of the first
    step): left out of the distribution where at least 2 steps remain."""
    steps = [s for s in doc.get("steps") or [] if isinstance(s, dict) and _f(s.get("duration_ms")) is not None]
    full = [s for s in steps if not s.get("partial")] or steps
    kept = [s for s in full if s.get("step") not in set(leave_out)]
    left = [s for s in full if s not in kept] if len(kept) >= 2 else []
    durs = [float(s["duration_ms"]) for s in (kept if left else full)]
    summ = doc.get("summary") or {}
    if not durs:   # an old or hand-made JSON without steps: the summary's numbers only
        med = _f(summ.get("median_step_ms"))
        return {"n": int(summ.get("full_steps") or 0), "median_ms": _r(med), "min_ms": _r(summ.get("min_step_ms")),
                "max_ms": _r(summ.get("max_step_ms")), "mad_ms": None, "q1_ms": None, "q3_ms": None,
                "iqr_ms": None, "noise_ms": None, "durations_ms": [], "left_out": []}
    med = _median(durs)
    mad = _median([abs(d - med) for d in durs])
    return {
        "n": len(durs),
        "median_ms": _r(med),
        "min_ms": _r(min(durs)),
        "max_ms": _r(max(durs)),
        "mad_ms": _r(mad),
        "q1_ms": _r(_quantile(durs, 0.25)),
        "q3_ms": _r(_quantile(durs, 0.75)),
        "iqr_ms": _r(_quantile(durs, 0.75) - _quantile(durs, 0.25)),
        # Robust standard deviation: 1.4826 x MAD (equals the std for normal noise).
        "noise_ms": _r(1.4826 * mad) if len(durs) >= 2 else None,
        "durations_ms": [_r(d) for d in durs],
        "left_out": [{"step": s.get("step"), "duration_ms": _r(s["duration_ms"]), "why": PREWINDOW_WHY}
                     for s in left],
    }


def _band_words(band: float, noise: float, floor: float, step_ms: float) -> str:
    """The band as the headline, the table and the gate name it, with what set it."""
    if floor >= NOISE_K * noise:
        what = RUN_TO_RUN_WORDS if RUN_TO_RUN_REL * step_ms >= NOISE_FLOOR_MS else "the step times' 1 us rounding"
        return (f"±{_fmt_ms(floor)}, the noise floor: {what}; {NOISE_K:g} x the step-to-step noise would be "
                f"±{_fmt_ms(NOISE_K * noise)}")
    return f"±{_fmt_ms(band)}: {NOISE_K:g} x the step-to-step noise of ±{_fmt_ms(noise)}"


def _apart(lo_hi_b, lo_hi_a) -> bool:
    return lo_hi_a[1] < lo_hi_b[0] or lo_hi_a[0] > lo_hi_b[1]


def step_change(b: dict, a: dict, estimate: dict | None = None) -> dict:
    """The headline: median step before vs after, and whether the change beats the noise band. `estimate`
    ({"before": (ms, range or None), "after": ..., "why": words}) where the profiled steps are not comparable
    (different profiler options): the change is then judged on the un-profiled steps the analysis estimated,
    and called beyond the band only where the estimates' likely ranges are apart too."""
    basis = "profiled" if estimate is None else "unprofiled_estimate"
    mb, ma = _f(b["median_ms"]), _f(a["median_ms"])
    profiled = {"profiled_delta_ms": _r(ma - mb) if mb is not None and ma is not None else None,
                "profiled_delta_pct": _r(100 * (ma - mb) / mb, 2) if mb and ma is not None else None}
    if estimate is not None:
        mb, ma = _f(estimate["before"][0]), _f(estimate["after"][0])
    base = {"basis": basis, "basis_why": estimate["why"] if estimate else None, **profiled}
    if mb is None or ma is None:
        why = ("the profiled steps are not comparable and a side has no un-profiled estimate" if estimate
               else "step times are missing on one side")
        return {**base, "delta_ms": None, "delta_pct": None, "direction": "unknown", "significance": "unknown",
                "noise_ms": None, "noise_floor_ms": None, "noise_band": None, "noise_used_ms": None,
                "sentence": f"{why}: cannot compare"}
    delta = ma - mb
    pct = 100 * delta / mb if mb else None
    noises = [n for n in (_f(b["noise_ms"]), _f(a["noise_ms"])) if n is not None]
    floor = max(NOISE_FLOOR_MS, RUN_TO_RUN_REL * max(mb, ma))
    noise = max(noises) if noises else None
    direction = "faster" if delta < 0 else ("slower" if delta > 0 else "same")
    pct_s = f" ({abs(pct):.0f}%)" if pct is not None and abs(pct) >= 1 else \
        (f" ({abs(pct):.1f}%)" if pct is not None else "")
    band_ms = band = None
    if len(noises) < 2 or min(b["n"], a["n"]) < 2:
        significance = "unknown"
        tail = ("noise unknown: a side has fewer than 2 full steps, so a change cannot be told from "
                "step-to-step noise")
        if abs(delta) <= NOISE_FLOOR_MS:
            direction = "same"
    else:
        band_ms = max(NOISE_K * noise, floor)
        band = _band_words(band_ms, noise, floor, max(mb, ma))
        # Apart: the middle halves (quartiles) do not overlap, so one odd step does not count; for estimates,
        # their likely ranges.
        rb, ra = (estimate["before"][1], estimate["after"][1]) if estimate else (None, None)
        if estimate is None:
            apart = _apart((_f(b["q1_ms"]), _f(b["q3_ms"])), (_f(a["q1_ms"]), _f(a["q3_ms"])))
        else:
            apart = rb is None or ra is None or _apart(rb, ra)
        if abs(delta) <= band_ms or (estimate is not None and not apart):
            significance = "within_noise"
            tail = f"within the noise ({band})" + (
                "; the estimates' likely ranges overlap" if abs(delta) > band_ms else "")
        elif abs(delta) > WELL_K * noise and apart:
            significance = "well_beyond_noise"
            tail = f"well beyond the noise ({band})"
        else:
            significance = "beyond_noise"
            tail = (f"beyond the noise ({band})"
                    + (", though the middle halves of the before and after step times overlap" if not apart
                       else ""))
    if direction == "same":
        sentence = f"no change in the median step ({_fmt_ms(mb)} -> {_fmt_ms(ma)}), {tail}"
    else:
        sentence = f"{direction} by {_fmt_ms(delta)}{pct_s}, {tail}"
    return {**base, "delta_ms": _r(delta), "delta_pct": _r(pct, 2), "direction": direction,
            # (the noise of one side alone is no noise of the comparison: null where it is unknown)
            "significance": significance, "noise_ms": None if band_ms is None else _r(noise),
            "noise_floor_ms": _r(floor),
            "noise_band": band, "noise_used_ms": _r(band_ms), "sentence": sentence}


def regression(step_time: dict, threshold_pct: float | None = None) -> dict:
    """CI gate: is the after trace slower than the before trace beyond the noise band (and, when asked, by
    more than a given percentage)? `step_time` is the diff's step_time block (step_change plus both sides'
    stats). threshold_pct: None when the gate was not asked for (the block still says what it would answer).
    noise_ms is the band the decision used (null where the noise is unknown)."""
    delta, pct = step_time.get("delta_ms"), step_time.get("delta_pct")
    sig, direction = step_time.get("significance"), step_time.get("direction")
    need = float(threshold_pct or 0.0)
    noise = step_time.get("noise_used_ms") if sig != "unknown" else None
    band = step_time.get("noise_band") or (f"±{noise} ms" if noise is not None else "unknown")
    estimated = step_time.get("basis") == "unprofiled_estimate"
    what = "the un-profiled step (estimated, as the profiler options differ) is " if estimated else ""
    out = {"checked": threshold_pct is not None, "threshold_pct": need, "regressed": False,
           "delta_ms": delta, "delta_pct": pct, "significance": sig, "noise_ms": noise,
           "basis": step_time.get("basis", "profiled")}
    if delta is None:
        out["reason"] = (f"{step_time.get('sentence') or 'step times are missing on one side: cannot tell'}; "
                         "not called a regression")
        return out
    slower = direction == "slower" and delta > 0
    # (no percentage where the before step is 0 ms: any slowdown is past every threshold)
    over = (pct > need) if pct is not None else delta > 0
    pct_s = f"{pct:+.1f}%" if pct is not None else "n/a"
    if not slower:
        out["reason"] = (f"not slower: the {'un-profiled (estimated) ' if estimated else ''}median step changed "
                         f"by {delta:+.3f} ms ({pct_s})")
    elif sig == "unknown":
        # Without noise (fewer than 2 full steps a side) only an explicit percentage can fail the gate.
        out["regressed"] = need > 0 and over
        out["reason"] = (f"{what}slower by {delta:.3f} ms ({pct_s}); the noise is unknown (a side has fewer than 2 "
                         "full steps)" + (f", and the change is {'above' if over else 'within'} the "
                                          f"{need:g}% threshold" if need > 0 else ", so it is not called a regression"))
    elif sig not in BEYOND and noise is not None and abs(delta) > noise:
        # (judged on estimates whose likely ranges overlap: a review read "+79.9%, within the noise (±1.45 ms)")
        out["reason"] = (f"{what}slower by {delta:.3f} ms ({pct_s}), more than the noise ({band}) but inside the "
                         "estimates' uncertainty: their likely ranges overlap, so it is not called a regression; "
                         "record both with the same profiler options to judge it")
    elif sig not in BEYOND:
        out["reason"] = f"{what}slower by {delta:.3f} ms ({pct_s}), within the noise ({band})"
    elif not over:
        out["reason"] = (f"{what}slower by {delta:.3f} ms ({pct_s}), beyond the noise ({band}) but not by more "
                         f"than the {need:g}% threshold")
    else:
        out["regressed"] = True
        out["reason"] = (f"{what}slower by {delta:.3f} ms ({pct_s}), beyond the noise ({band})"
                         + (f" and above the {need:g}% threshold" if need > 0 else ""))
    return out
