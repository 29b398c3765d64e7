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
Ops are matched by (op name, input shapes) exactly; by name alone where one side recorded no shapes.
"""
from __future__ import annotations

from pathlib import Path

from .diff_inputs import Side, comparability, load_side, options_words, profiler_options
from ..trace.kernel_names import normalize_kernel
from .diff_regression import NOISE_FLOOR_MS, NOISE_K, RUN_TO_RUN_REL, WELL_K, step_change, step_stats
from .diff_tables import (CAUSE_MIN_MS, CAUSE_REL, CAUSES_NOTE, KERNEL_MIN_MS, KERNEL_REL, NOT_AFTER, NOT_BEFORE,
                          _f, _fmt_ms, _r, compare_causes, compare_cpu_ops, compare_kernels, compare_ops)

DIFF_SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- the diff

def _side_summary(s: Side, st: dict) -> dict:
    d = s.doc
    t = d.get("trace") or {}
    summ = d.get("summary") or {}
    opts = profiler_options(d)
    return {
        "file": s.path,
        "source": s.source,
        "trace_file": t.get("file"),
        "gpu": t.get("gpu"),
        "torch_version": t.get("torch_version"),
        "cuda_runtime_version": t.get("cuda_runtime_version"),
        "step_source": t.get("step_source"),
        "profiler_options": None if opts is None else options_words(opts),
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


# A profiled figure whose un-profiled share (its fix's estimated saving) is below this part of it is mostly the
# profiler's own cost.
MOSTLY_PROFILER = 0.5


def _after_cost(c: dict) -> str:
    """'launch_overhead (1.137 ms/step)', with the un-profiled share where the analysis estimated one."""
    est, ms = c.get("estimated_savings_ms_after"), c["after_ms_per_step"]
    if est is not None and ms and est < MOSTLY_PROFILER * ms:
        return (f"{c['kind']} ({ms:.3f} ms/step profiled, mostly the profiler's own cost: fixing it is estimated "
                f"to save {est:.3f} ms of the un-profiled step)")
    return f"{c['kind']} ({ms:.3f} ms/step)"


def _headline(change: dict, causes: list[dict], kernels: dict, like: list[str],
              unprofiled: tuple | None = None) -> tuple[str, list[str]]:
    """The one-line answer, and the notes that keep it honest. `unprofiled`: both sides' un-profiled steps
    (ms) and how each was had, where both reports give one."""
    notes = []
    estimated = change.get("basis") == "unprofiled_estimate"
    head = (f"Median step, un-profiled (estimated, as {change['basis_why']}): " if estimated
            else "Median step, profiled: ") + f"{change['sentence']}."
    # Went down: reduced, or a ranked finding the after analysis no longer reports (resolved).
    resolved = [c for c in causes if c["reported_before"] == "finding" and c["status"] in ("resolved", "shrunk")]
    new = [c for c in causes if c["status"] in ("new", "grown", NOT_BEFORE) and c["reported_after"] == "finding"]
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
                         + f"; the {'un-profiled (estimated)' if estimated else 'profiled'} median step changed "
                         f"by {change['delta_ms']:+.3f} ms"
                         + (f" ({change['delta_pct']:+.0f}%)" if change.get("delta_pct") is not None else "")
                         + (_unprofiled_change(unprofiled) if unprofiled and not estimated else "") + ".")
    if change["significance"] == "within_noise" and resolved:
        notes.append(f"{', '.join(c['kind'] for c in resolved)} went down, but the step time did not change "
                     "beyond noise: that cause was not on the critical path, or something else filled the time.")
    # A GPU-side finding the before trace did not report is most often gated there (they rank only where the GPU
    # is the bottleneck), not new: a review read fusion_candidates "new" after an optimizer fix.
    gated = [c for c in new if not c["is_idle_cause"] and c["reported_before"] is None]
    for cs, what in (([c for c in new if c not in gated], "New or larger after the change: "),
                     (gated, "Ranked after the change, not before: ")):
        if cs:
            notes.append(what + ", ".join(_after_cost(c) for c in cs) + (
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


def _estimate(db: dict, da: dict, ob: list[str], oa: list[str]) -> dict:
    """Both sides' un-profiled steps (ms, likely range) for step_change, where the profiler options differ."""
    def one(d):
        s = d.get("summary") or {}
        u, rng = _unprofiled(d), s.get("unprofiled_step_range_ms")
        ok = isinstance(rng, (list, tuple)) and len(rng) == 2 and all(_f(x) is not None for x in rng)
        return (u[0] if u else None, tuple(float(x) for x in rng) if ok and u and u[1] == "estimated" else None)
    return {"before": one(db), "after": one(da),
            "why": f"the profiler options differ: {options_words(ob)} before, {options_words(oa)} after"}


def compare(before: Side, after: Side) -> dict:
    """The whole diff as plain data (JSON-able). See the module docstring."""
    db, da = before.doc, after.doc
    stb, sta = step_stats(db, _prewindow(db)), step_stats(da, _prewindow(da))
    ob, oa = profiler_options(db), profiler_options(da)
    options_differ = ob is not None and oa is not None and set(ob) != set(oa)
    change = step_change(stb, sta, _estimate(db, da, ob, oa) if options_differ else None)
    causes = compare_causes(db, da)
    kernels = compare_kernels(before, after)
    ops = compare_ops(before, after)
    comp = comparability(db, da)
    like = comp["warnings"]
    ub, ua = _unprofiled(db), _unprofiled(da)
    head, notes = _headline(change, causes, kernels, like, (ub, ua) if ub and ua else None)
    if options_differ:
        pd_ms, pd_pct = change["profiled_delta_ms"], change["profiled_delta_pct"]
        notes.insert(1 if like else 0, (
            f"The profiler options differ ({options_words(ob)} before, {options_words(oa)} after): the profiled "
            "steps carry different profiler costs"
            + (f" (the profiled median changed by {pd_ms:+.3f} ms, {pd_pct:+.1f}%)" if pd_ms is not None and
               pd_pct is not None else "")
            + (", so the change is judged on the un-profiled steps the analysis estimated." if change["delta_ms"]
               is not None else ", and a side has no un-profiled estimate: the step times are not comparable.")))
    for label, st in (("before", stb), ("after", sta)):
        for s in st["left_out"]:
            notes.append(f"The {label} trace's step {s['step']} ({s['duration_ms']:.3f} ms) {s['why']}: left out "
                         "of its step distribution (median, min, max, noise).")
    sb, sa = db.get("summary") or {}, da.get("summary") or {}
    gpu = {}
    for k in ("median_gpu_busy_ms", "median_gpu_idle_ms"):
        vb, va = _f(sb.get(k)), _f(sa.get(k))
        gpu[k] = {"before": _r(vb), "after": _r(va),
                  "delta": _r(va - vb) if vb is not None and va is not None else None}
    findings = {st: [c["kind"] for c in causes if c["status"] == st and
                     (c["reported_before"] or c["reported_after"])]
                for st in ("resolved", "new", "grown", "shrunk", "unchanged", NOT_BEFORE, NOT_AFTER)}
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
        # true / false / null: null where nothing about the two programs could be compared
        "like_for_like": False if like else (True if comp["checked"] else None),
        "comparability_warnings": like,
        "comparability_checked": comp["checked"],
        "kernel_overlap": comp["kernel_overlap"],
        "profiler_options_differ": options_differ,
        "before": _side_summary(before, stb),
        "after": _side_summary(after, sta),
        "step_time": {"before": stb, "after": sta, **change},
        "gpu": gpu,
        # Neither side recorded GPU activity: the GPU figures are null and the renderers leave them out.
        "cpu_only": all(v["before"] is None and v["after"] is None for v in gpu.values()),
        "causes": causes,
        "causes_note": CAUSES_NOTE,
        "findings": findings,
        "kernels": kernels,
        "ops": ops,
        # The ops by self CPU time (what a CPU-only run's renderers show in place of the GPU tables).
        "cpu_ops": compare_cpu_ops(before, after),
        "timeline_note": timeline_note,
        "method": {
            "noise": f"noise = 1.4826 x MAD of full-step durations (robust std), the larger of the two; the band is "
                     f"{NOISE_K:g} x noise, or the floor where that is wider ({100 * RUN_TO_RUN_REL:g}% of the step: "
                     f"one program's run-to-run variation; at least {NOISE_FLOOR_MS} ms); a change is within noise "
                     f"inside the band, well beyond it above the band and {WELL_K:g} x noise with non-overlapping "
                     "quartile ranges; steps holding GPU work queued before the profiling window are left out; where "
                     "the profiler options differ, the un-profiled steps the analysis estimated are compared",
            "causes": f"cost per step = the finding's cost (median per full step; measured, or derived from a "
                      f"measurement where the report says so) or the idle time "
                      f"attributed to the cause; grown/shrunk when the change is >= {100 * CAUSE_REL:g}% and "
                      f">= {CAUSE_MIN_MS} ms; resolved = reported before, gone or below the report threshold "
                      f"after; not reported = that side's analysis did not report the kind at all. {CAUSES_NOTE}",
            "kernels": f"GPU ms per full step by normalized kernel name; faster/slower when the change is >= "
                       f"{100 * KERNEL_REL:g}% and >= {KERNEL_MIN_MS} ms",
            "ops": f"GPU ms per full step by {ops['matched_by']}; count = op calls per step",
        },
    }


def diff_files(before: str | Path, after: str | Path) -> tuple[dict, Side, Side]:
    sb = load_side(before)
    sa = load_side(after)
    return compare(sb, sa), sb, sa


__all__ = ["Side", "load_side", "compare", "diff_files", "normalize_kernel", "step_stats", "step_change", "_fmt_ms"]


def _prewindow(doc: dict) -> list[int]:
    """The steps its analysis marked as holding GPU work queued before the profiling window (report/facts)."""
    return [r["step"] for r in doc.get("steps") or () if isinstance(r, dict) and r.get("holds_prewindow_work")]
