"""diff: did the fix work? Compare a trace (or an analyze --json output) before and after a change.

`compare(before, after) -> dict` is the whole comparison as plain JSON-able data; the renderers in
render/diff_view.py only format it. The headline is the *measured* median step time change and how it
compares with each trace's step-to-step noise; findings come second, because a fix can remove its
finding and still make the step slower (a new memory layout can pick a slower kernel).

Each side is a Kineto trace (.json / .json.gz, analyzed with report.analyze.analyze_file) or an earlier `traceinsight
analyze --json` output of ONE trace (its "schema_version", "summary" and "findings" keys): no timeline, top 50 rows.

Kernel matching (normalize_kernel): kernels with the same *normalized* name are one row. The rule:
  * memcpy / memset activities keep their exact name ("Memcpy HtoD (Pageable -> Device)" must not match
    the pinned copy);
  * "(anonymous namespace)::" and a leading return type ("void ") are dropped;
  * the argument list "(...)" after the kernel's name is dropped;
  * template arguments "<...>" are dropped, but the distinctive identifiers inside them are kept, in
    order, at most 3, with namespaces, numbers, plain/vector C++ types (float, float2, int, bool, half,
    c10::Half ...), lambdas "{lambda(...)#N}", nested argument lists and generic helpers (Array,
    OffsetCalculator, ...) removed. So
      void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
           at::detail::Array<char*, 3> >(int, ...)
    becomes `at::native::vectorized_elementwise_kernel<CUDAFunctor_add>` whatever its vector width or
    lambda numbering, while an add and a ReLU kernel stay apart, and
    `cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(...Params)` keeps its gemm name;
  * digits inside a kernel's own name are kept: `ampere_sgemm_32x32_sliced1x4_tn` and
    `ampere_sgemm_64x64_tn` are different kernel choices (tile sizes), and a fix that changes the
    choice should show as one removed and one added kernel.
Ops are matched by (op name, input shapes) exactly.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..analyses import CAUSES
from .diff_inputs import Side, load_side
from ..trace.kernel_names import normalize_kernel
from .diff_tables import KERNEL_MIN_MS, KERNEL_REL, _f, _fmt_ms, _r, _status, compare_cpu_ops, compare_kernels, compare_ops

DIFF_SCHEMA_VERSION = 1

# A step-time change is "within noise" below NOISE_K x the larger of the two traces' step-to-step
# noise (1.4826 x MAD of full-step durations, a robust standard deviation), and "well beyond" it above
# WELL_K x the noise when the middle halves of the two step-time samples (quartiles) do not overlap either.
NOISE_K = 2.0
WELL_K = 5.0
# Noise floor: step times in the JSON are rounded to 1 us, and a 0.2% change is not worth a claim.
NOISE_FLOOR_MS = 0.001
NOISE_FLOOR_REL = 0.002

# Per cause: a change counts (grown / shrunk) when it is at least this share of the larger side and
# at least CAUSE_MIN_MS.
CAUSE_REL = 0.10
CAUSE_MIN_MS = 0.005


# --------------------------------------------------------------------------- statistics

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


def step_stats(doc: dict) -> dict:
    """Median, spread and noise of the full steps' durations (ms), from the document's steps."""
    steps = [s for s in doc.get("steps") or [] if isinstance(s, dict) and _f(s.get("duration_ms")) is not None]
    full = [s for s in steps if not s.get("partial")] or steps
    durs = [float(s["duration_ms"]) for s in full]
    summ = doc.get("summary") or {}
    if not durs:   # an old or hand-made JSON without steps: the summary's numbers only
        med = _f(summ.get("median_step_ms"))
        return {"n": int(summ.get("full_steps") or 0), "median_ms": _r(med), "min_ms": _r(summ.get("min_step_ms")),
                "max_ms": _r(summ.get("max_step_ms")), "mad_ms": None, "q1_ms": None, "q3_ms": None,
                "iqr_ms": None, "noise_ms": None,
                "durations_ms": []}
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
    }


def step_change(b: dict, a: dict) -> dict:
    """The headline: median step before vs after, and whether the change beats the noise."""
    mb, ma = _f(b["median_ms"]), _f(a["median_ms"])
    if mb is None or ma is None:
        return {"delta_ms": None, "delta_pct": None, "direction": "unknown", "significance": "unknown",
                "noise_ms": None, "sentence": "step times are missing on one side: cannot compare"}
    delta = ma - mb
    pct = 100 * delta / mb if mb else None
    noises = [n for n in (_f(b["noise_ms"]), _f(a["noise_ms"])) if n is not None]
    floor = max(NOISE_FLOOR_MS, NOISE_FLOOR_REL * max(mb, ma))
    noise = max(noises) if noises else None
    direction = "faster" if delta < 0 else ("slower" if delta > 0 else "same")
    pct_s = f" ({abs(pct):.0f}%)" if pct is not None and abs(pct) >= 1 else \
        (f" ({abs(pct):.1f}%)" if pct is not None else "")
    if len(noises) < 2 or min(b["n"], a["n"]) < 2:
        significance = "unknown"
        tail = ("noise unknown: a side has fewer than 2 full steps, so a change cannot be told from "
                "step-to-step noise")
        if abs(delta) <= floor:
            direction = "same"
    else:
        limit = max(NOISE_K * noise, floor)
        # The band the headline, the gate's reason and the JSON all name: the floor where it is wider than
        # the noise (a review saw ±0.011 ms in the headline beside ±0.0015 ms in the reason).
        band = (f"±{_fmt_ms(floor)}, the noise floor; the noise itself ±{_fmt_ms(noise)}" if floor > noise
                else f"±{_fmt_ms(noise)}")
        # Overlap of the middle halves (quartiles): one odd step (the first one often is) does not count.
        overlap = not (_f(a["q3_ms"]) < _f(b["q1_ms"]) or _f(a["q1_ms"]) > _f(b["q3_ms"]))
        if abs(delta) <= limit:
            significance = "within_noise"
            tail = f"within the step-to-step noise ({band})"
        elif abs(delta) > WELL_K * max(noise, floor) and not overlap:
            significance = "well_beyond_noise"
            tail = f"well beyond the step-to-step noise ({band})"
        else:
            significance = "beyond_noise"
            tail = (f"beyond the step-to-step noise ({band})"
                    + (", though the middle halves of the before and after step times overlap" if overlap
                       else ""))
    if direction == "same" or (significance == "within_noise" and abs(delta) <= floor):
        sentence = f"no change in the median step ({_fmt_ms(mb)} -> {_fmt_ms(ma)}), {tail}"
    else:
        sentence = f"{direction} by {_fmt_ms(delta)}{pct_s}, {tail}"
    return {"delta_ms": _r(delta), "delta_pct": _r(pct, 2), "direction": direction,
            "significance": significance, "noise_ms": _r(noise), "noise_floor_ms": _r(floor),
            "noise_band": None if significance == "unknown" else band,
            "noise_used_ms": None if significance == "unknown" else _r(max(noise, floor)), "sentence": sentence}


# --------------------------------------------------------------------------- causes and findings

def _cause_names() -> tuple[str, ...]:
    return tuple(CAUSES)


def compare_causes(db: dict, da: dict) -> list[dict]:
    """Per finding kind / idle cause: cost per step before and after, and what happened to it."""
    causes = _cause_names()
    rows = []

    def index(doc):
        major = {f["kind"]: f for f in doc.get("findings") or [] if isinstance(f, dict) and "kind" in f}
        minor = {f["kind"]: f for f in doc.get("minor_findings") or [] if isinstance(f, dict) and "kind" in f}
        idle = (doc.get("summary") or {}).get("idle_by_cause_ms_median_per_step") or {}
        return major, minor, idle

    mb, nb, ib = index(db)
    ma, na, ia = index(da)
    kinds = list(dict.fromkeys([*mb, *ma, *nb, *na, *causes, *ib, *ia]))

    def cost(kind, major, minor, idle) -> float:
        f = major.get(kind) or minor.get(kind)
        if f is not None and _f(f.get("measured_cost_ms_per_step")) is not None:
            return float(f["measured_cost_ms_per_step"])
        v = _f(idle.get(kind))
        return v if v is not None else 0.0

    for k in kinds:
        cb = cost(k, mb, nb, ib)
        ca = cost(k, ma, na, ia)
        rep_b = "finding" if k in mb else ("minor" if k in nb else None)
        rep_a = "finding" if k in ma else ("minor" if k in na else None)
        trend = _status(cb, ca, CAUSE_REL, CAUSE_MIN_MS)
        how = None
        if rep_b == "finding" and rep_a != "finding" and (trend == "shrunk" or ca <= 0):
            # Resolved only when its cost went down: a cause that grew is "grown" even when it
            # dropped out of the ranked findings (a longer step can push it under the bar).
            status = "resolved"
            how = "gone" if rep_a is None else "below the report threshold"
        elif rep_a == "finding" and rep_b != "finding" and (trend == "grown" or cb <= 0):
            status = "new"
        else:
            status = trend
            if status == "unchanged" and cb == 0 and ca == 0:
                status = "absent"
        if status == "absent":
            continue
        fb, fa = mb.get(k) or nb.get(k), ma.get(k) or na.get(k)
        rows.append({
            "kind": k,
            "status": status,
            "resolved_how": how,
            "before_ms_per_step": _r(cb),
            "after_ms_per_step": _r(ca),
            "delta_ms_per_step": _r(ca - cb),
            "reported_before": rep_b,
            "reported_after": rep_a,
            "is_idle_cause": k in causes,
            "estimated_savings_ms_before": _r((mb.get(k) or {}).get("estimated_savings_ms")),
            "estimated_savings_pct_before": (mb.get(k) or {}).get("estimated_savings_pct"),
            "likely_savings_range_ms_before": (mb.get(k) or {}).get("likely_savings_range_ms"),
            "rank_before": (list(mb).index(k) + 1) if k in mb else None,
            "title_before": (fb or {}).get("title"),
            "title_after": (fa or {}).get("title"),
            "fix": (fb or fa or {}).get("fix"),
        })
    order = {"new": 0, "grown": 1, "resolved": 2, "shrunk": 3, "unchanged": 4}
    rows.sort(key=lambda r: (order.get(r["status"], 9),
                             -max(r["before_ms_per_step"] or 0, r["after_ms_per_step"] or 0)))
    return rows


# --------------------------------------------------------------------------- like for like

TOP_OPS_FOR_SHAPES = 5


def _shape_mismatch(db: dict, da: dict) -> dict | None:
    """The first of the before trace's top ops (by GPU time, or a CPU-only run's by self time; with recorded
    shapes) that the after trace runs only with other input shapes: a sign of a different batch size or model."""
    def by_op(doc):
        rows, ms = (doc.get("top_ops"), "gpu_ms_per_step") if doc.get("top_ops") else (
            (doc.get("cpu_time") or {}).get("top_ops"), "self_ms_per_step")
        out: dict[str, list[tuple[str, float]]] = {}
        for r in rows or []:
            if isinstance(r, dict) and r.get("input_dims") and r.get("op") != "(no op)":
                out.setdefault(r["op"], []).append((str(r["input_dims"]), _f(r.get(ms)) or 0.0))
        return out
    ob, oa = by_op(db), by_op(da)
    ranked = sorted(ob, key=lambda op: -max(ms for _, ms in ob[op]))
    checked = 0
    for op in ranked:
        if op not in oa:
            continue
        checked += 1
        shapes_b = {d for d, _ in ob[op]}
        shapes_a = {d for d, _ in oa[op]}
        if not shapes_b & shapes_a:
            top_b = max(ob[op], key=lambda x: x[1])[0]
            top_a = max(oa[op], key=lambda x: x[1])[0]
            return {"op": op, "before": top_b, "after": top_a}
        if checked >= TOP_OPS_FOR_SHAPES:
            break
    return None


def comparability(db: dict, da: dict) -> list[str]:
    """Reasons the two traces may not be like for like (empty when none is seen)."""
    out = []
    tb, ta = db.get("trace") or {}, da.get("trace") or {}
    for key, what in (("gpu", "GPUs"), ("torch_version", "torch versions"),
                      ("cuda_runtime_version", "CUDA runtime versions"), ("world_size", "world sizes"),
                      ("step_source", "step definitions")):
        vb, va = tb.get(key), ta.get(key)
        if vb not in (None, "", "unknown GPU") and va not in (None, "", "unknown GPU") and vb != va:
            out.append(f"different {what}: {vb} before, {va} after")
    mm = _shape_mismatch(db, da)
    if mm:
        out.append(f"input shapes of the top ops differ (different batch size or model?): {mm['op']} ran on "
                   f"{mm['before']} before and on {mm['after']} after")
    return out


# --------------------------------------------------------------------------- the diff

def _side_summary(s: Side, st: dict) -> dict:
    d = s.doc
    t = d.get("trace") or {}
    summ = d.get("summary") or {}
    return {
        "file": s.path,
        "source": s.source,
        "trace_file": t.get("file"),
        "gpu": t.get("gpu"),
        "torch_version": t.get("torch_version"),
        "cuda_runtime_version": t.get("cuda_runtime_version"),
        "step_source": t.get("step_source"),
        "steps": summ.get("steps"),
        "full_steps": summ.get("full_steps"),
        "verdict": d.get("verdict"),
        "healthy": d.get("healthy"),
        "step_time": st,
        "median_gpu_busy_ms": _r(summ.get("median_gpu_busy_ms")),
        "median_gpu_idle_ms": _r(summ.get("median_gpu_idle_ms")),
        "gpu_idle_pct": _r(summ.get("gpu_idle_pct"), 1),
        "findings": [f.get("kind") for f in d.get("findings") or [] if isinstance(f, dict)],
        "representative_step": d.get("representative_step"),
        "warnings": list(s.warnings) + list(t.get("warnings") or [] if s.source == "json" else []),
    }


def _headline(change: dict, causes: list[dict], kernels: dict, like: list[str],
              unprofiled: tuple | None = None) -> tuple[str, list[str]]:
    """The one-line answer, and the notes that keep it honest. `unprofiled`: both sides' un-profiled steps
    (ms) and how each was had, where both reports give one."""
    notes = []
    head = f"Median step, profiled: {change['sentence']}."
    resolved = [c for c in causes if c["status"] in ("resolved", "shrunk") and c["reported_before"] == "finding"]
    new = [c for c in causes if c["status"] in ("new", "grown") and c["reported_after"] == "finding"]
    if change["direction"] == "slower" and change["significance"] in ("beyond_noise", "well_beyond_noise") \
            and resolved:
        slower = [r for r in kernels["rows"] if r["status"] in ("slower", "added")
                  and (r["delta_ms_per_step"] or 0) > 0][:3]
        what = "; ".join(f"{r['label'][:80]} +{r['delta_ms_per_step']:.3f} ms" for r in slower)
        notes.append(f"The step got slower even though {', '.join(c['kind'] for c in resolved)} "
                     f"{'was' if len(resolved) == 1 else 'were'} reduced: the change cost more elsewhere"
                     + (f" (GPU time that grew: {what})" if what else "") + ".")
    if resolved and change["delta_ms"] is not None:
        # The before trace's top-ranked finding that went down: its estimate vs what was measured.
        c = min(resolved, key=lambda c: c.get("rank_before") or 99)
        est = c.get("estimated_savings_ms_before")
        if est:
            likely = c.get("likely_savings_range_ms_before")
            # The estimate is a share of the before trace's un-profiled step, the change one of its profiled
            # median: compared as shares, not as ms (1.594 ms of a 1.78 ms un-profiled step is the 2.4 ms a
            # 2.6 ms profiled step lost, not a miss).
            pct = c.get("estimated_savings_pct_before")
            which = "un-profiled" if unprofiled else "median"
            notes.append(f"{c['kind']} ({c['resolved_how'] or c['status']}) was estimated to save "
                         f"{est:.3f} ms per step" + (f" (likely {likely[0]:.3f} to {likely[1]:.3f})" if likely else "")
                         + (f", {pct:.0f}% of the before trace's {which} step" if pct is not None else "")
                         + f"; the profiled median step changed by {change['delta_ms']:+.3f} ms"
                         + (f" ({change['delta_pct']:+.0f}%)" if change.get("delta_pct") is not None else "")
                         + (_unprofiled_change(unprofiled) if unprofiled else "") + ".")
    if change["significance"] == "within_noise" and resolved:
        notes.append(f"{', '.join(c['kind'] for c in resolved)} went down, but the step time did not change "
                     "beyond noise: that cause was not on the critical path, or something else filled the time.")
    # A GPU-side finding the before trace did not report is most often gated there (they rank only where the GPU
    # is the bottleneck), not new: a review read fusion_candidates "new" after an optimizer fix.
    gated = [c for c in new if not c["is_idle_cause"] and c["reported_before"] is None]
    for cs, what in (([c for c in new if c not in gated], "New or larger after the change: "),
                     (gated, "Ranked after the change, not before: ")):
        if cs:
            notes.append(what + ", ".join(f"{c['kind']} ({c['after_ms_per_step']:.3f} ms/step)" for c in cs) + (
                "." if cs is not gated else ". Findings about the GPU's own work rank only where the GPU is the "
                "bottleneck, so this work may have run before too, hidden behind idle time the change removed "
                "(the kernel table says whether it is new)."))
    if like:
        notes.insert(0, "The comparison may not be like for like: " + "; ".join(like) + ".")
    return head, notes


def _unprofiled_change(u: tuple) -> str:
    """'; un-profiled 1.780 -> 0.190 ms (-89%; both estimated)'."""
    (b, hb), (a, ha) = u
    how = f"both {hb}" if hb == ha else f"{hb} before, {ha} after"
    return f"; un-profiled {b:.3f} -> {a:.3f} ms ({100 * (a - b) / b:+.0f}%; {how})"


def _unprofiled(d: dict) -> tuple[float, str] | None:
    s = d.get("summary") or {}
    u = _f(s.get("unprofiled_step_ms"))
    if u is None or u <= 0:
        return None
    return u, "measured" if str(s.get("unprofiled_step_method") or "").startswith("measured") else "estimated"


def compare(before: Side, after: Side) -> dict:
    """The whole diff as plain data (JSON-able). See the module docstring."""
    db, da = before.doc, after.doc
    stb, sta = step_stats(db), step_stats(da)
    change = step_change(stb, sta)
    causes = compare_causes(db, da)
    kernels = compare_kernels(before, after)
    ops = compare_ops(before, after)
    like = comparability(db, da)
    ub, ua = _unprofiled(db), _unprofiled(da)
    head, notes = _headline(change, causes, kernels, like, (ub, ua) if ub and ua else None)
    sb, sa = db.get("summary") or {}, da.get("summary") or {}
    gpu = {}
    for k in ("median_gpu_busy_ms", "median_gpu_idle_ms"):
        vb, va = _f(sb.get(k)), _f(sa.get(k))
        gpu[k] = {"before": _r(vb), "after": _r(va),
                  "delta": _r(va - vb) if vb is not None and va is not None else None}
    findings = {st: [c["kind"] for c in causes if c["status"] == st and
                     (c["reported_before"] or c["reported_after"])]
                for st in ("resolved", "new", "grown", "shrunk", "unchanged")}
    timeline_note = None
    if before.source == "json" or after.source == "json":
        both = before.source == "json" and after.source == "json"
        which = "before and after sides: they are analyze --json outputs" if both else \
            f"{'before' if before.source == 'json' else 'after'} side: it is an analyze --json output"
        timeline_note = (f"No timeline for the {which}, which {'hold' if both else 'holds'} no events; give "
                         f"the trace file{'s' if both else ''} to see {'them' if both else 'it'}.")
    for label, doc in (("before", db), ("after", da)):
        total = sum(_f(r.get("gpu_ms_per_step")) or 0.0 for r in doc.get("top_ops") or [] if isinstance(r, dict))
        no_op = sum(_f(r.get("gpu_ms_per_step")) or 0.0 for r in doc.get("top_ops") or []
                    if isinstance(r, dict) and r.get("op") == "(no op)")
        if total > 0 and no_op > 0.5 * total:
            notes.append(f"In the {label} trace most GPU time ({100 * no_op / total:.0f}%) has no op that launched it "
                         "(a CUDA graph replay, or work from another process): compare the kernels, not the ops.")
    if not all(kernels["complete"].values()) or not all(ops["complete"].values()):
        notes.append("A side is an analyze --json output: its kernel and op tables hold only the top 50, so a "
                     "kernel missing there may still run, below the listed times.")
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "kind": "traceinsight.diff",
        "headline": head,
        "notes": notes,
        "like_for_like": not like,
        "comparability_warnings": like,
        "before": _side_summary(before, stb),
        "after": _side_summary(after, sta),
        "step_time": {"before": stb, "after": sta, **change},
        "gpu": gpu,
        # Neither side recorded GPU activity: the GPU figures are null and the renderers leave them out.
        "cpu_only": all(v["before"] is None and v["after"] is None for v in gpu.values()),
        "causes": causes,
        "findings": findings,
        "kernels": kernels,
        "ops": ops,
        # The ops by self CPU time (what a CPU-only run's renderers show in place of the GPU tables).
        "cpu_ops": compare_cpu_ops(before, after),
        "timeline_note": timeline_note,
        "method": {
            "noise": f"noise = 1.4826 x MAD of full-step durations (robust std), the larger of the two; a change "
                     f"is within noise below {NOISE_K:g} x noise (floor {NOISE_FLOOR_MS} ms or "
                     f"{100 * NOISE_FLOOR_REL:g}% of the step), well beyond it above {WELL_K:g} x noise with "
                     "non-overlapping quartile ranges",
            "causes": f"cost per step = the finding's cost (median per full step; measured, or derived from a "
                      f"measurement where the report says so) or the idle time "
                      f"attributed to the cause; grown/shrunk when the change is >= {100 * CAUSE_REL:g}% and "
                      f">= {CAUSE_MIN_MS} ms; resolved = reported before, gone or below the report threshold "
                      "after",
            "kernels": f"GPU ms per full step by normalized kernel name; faster/slower when the change is >= "
                       f"{100 * KERNEL_REL:g}% and >= {KERNEL_MIN_MS} ms",
        },
    }


def diff_files(before: str | Path, after: str | Path) -> tuple[dict, Side, Side]:
    sb = load_side(before)
    sa = load_side(after)
    return compare(sb, sa), sb, sa


__all__ = ["Side", "load_side", "compare", "diff_files", "normalize_kernel", "step_stats", "step_change"]
