"""CI gate for diff: is the after trace slower than the before trace, beyond its step-to-step noise
(and, when asked, by more than a given percentage)? The answer and its reason, as the diff JSON's
`regression` block."""
from __future__ import annotations

BEYOND = ("beyond_noise", "well_beyond_noise")


def regression(step_time: dict, threshold_pct: float | None = None) -> dict:
    """`step_time` is the diff's step_time block (report.diff.step_change plus both sides' stats).
    threshold_pct: None when the gate was not asked for (the block still says what it would answer)."""
    delta, pct = step_time.get("delta_ms"), step_time.get("delta_pct")
    sig, direction = step_time.get("significance"), step_time.get("direction")
    need = float(threshold_pct or 0.0)
    noise = step_time.get("noise_ms")
    # The band the headline names (the noise, or its floor where that is wider).
    band = step_time.get("noise_band") or f"±{noise} ms"
    out = {"checked": threshold_pct is not None, "threshold_pct": need, "regressed": False,
           "delta_ms": delta, "delta_pct": pct, "significance": sig, "noise_ms": noise}
    if delta is None:
        out["reason"] = "step times are missing on one side: cannot tell"
        return out
    slower = direction == "slower" and delta > 0
    # (no percentage where the before step is 0 ms: any slowdown is past every threshold)
    over = (pct > need) if pct is not None else delta > 0
    pct_s = f"{pct:+.1f}%" if pct is not None else "n/a"
    if not slower:
        out["reason"] = f"not slower: the median step changed by {delta:+.3f} ms ({pct_s})"
    elif sig == "unknown":
        # Without noise (fewer than 2 full steps a side) only an explicit percentage can fail the gate.
        out["regressed"] = need > 0 and over
        out["reason"] = (f"slower by {delta:.3f} ms ({pct_s}); the noise is unknown (a side has fewer than 2 "
                         "full steps)" + (f", and the change is {'above' if over else 'within'} the "
                                          f"{need:g}% threshold" if need > 0 else ", so it is not called a regression"))
    elif sig not in BEYOND:
        out["reason"] = f"slower by {delta:.3f} ms ({pct_s}), within the step-to-step noise ({band})"
    elif not over:
        out["reason"] = (f"slower by {delta:.3f} ms ({pct_s}), beyond the noise ({band}) but not by more "
                         f"than the {need:g}% threshold")
    else:
        out["regressed"] = True
        out["reason"] = (f"slower by {delta:.3f} ms ({pct_s}), beyond the step-to-step noise ({band})"
                         + (f" and above the {need:g}% threshold" if need > 0 else ""))
    return out
