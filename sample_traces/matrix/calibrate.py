#!/usr/bin/env python3
"""Calibrate a per-event model of the PyTorch profiler's CPU-time inflation (issue #12).

    python sample_traces/matrix/calibrate.py [--out sample_traces/matrix/calibration.json] [--quiet]

Reads the raw Kineto JSON of every trace under h100*/ and h200*/ (all recording runs; gzip + json, not traceinsight) and the
un-profiled step times in each folder's manifest.json, and fits

    profiled_step - unprofiled_step  ~=  a*n_cpu_op + b*n_python_function + c*n_runtime + d*n_user_annotation

(µs per event, coefficients >= 0) over the CPU-bound traces, per profiler setting (default / stack) and
per GPU, and pooled over both GPUs per setting.

Per trace:
  * steps: the ProfilerStep#N spans (cat user_annotation) on the "loop thread" (the thread carrying
    them). Leading steps are dropped while a step is > FIRST_OUTLIER x the median of the steps after it
    (cold traces: cudnn autotune / CUDA-graph capture), keeping at least MIN_STEPS; the last step is
    dropped if it is < LAST_CUT x the median of the others (cut short).
  * counts per kept step, by the event's start time inside [step start, step end), on three thread
    groups: "loop" (the ProfilerStep thread), "autograd" (threads named pt_autograd_*: the backward
    engine; loss.backward() blocks the loop thread while they run) and "other" (everything else on
    the CPU side, e.g. the DataLoader pin-memory thread). Kinds: cpu_op, python_function,
    runtime (cuda_runtime + cuda_driver), user_annotation (the ProfilerStep#N span itself excluded).
    Stored as the mean over kept steps.
  * profiled_cpu_step_ms = median ProfilerStep duration over kept steps;
    gpu_busy_ms = median over kept steps of the union of kernel/gpu_memcpy/gpu_memset intervals of the
    GPU work *launched* in the step (matched to its runtime call by correlation id);
    gpu_span_ms = median over kept steps of first start .. last end of that work;
    profiled_step_ms = max(profiled_cpu_step_ms, gpu_span_ms) (as summarize.py);
    bound = "cpu" if gpu_busy_ms < CPU_BOUND_FRAC * profiled_step_ms else "gpu".
  * inflation_ms = sum(coef_us * counts) / 1000, counts summed over the variant's thread groups;
    predicted_unprofiled_ms = max(gpu_busy_ms, profiled_cpu_step_ms - inflation_ms).

Fit set: CPU-bound traces with an un-profiled timing, not cold (schedule wait=0) and not flagged in
EXCLUDE (cold_first_step/stack: profiled at another input size than its un-profiled timing). Target y = profiled_cpu_step_ms - unprofiled median (µs). Non-negative least
squares solved exactly by enumerating the active sets (<= 4 features, no scipy needed). Rows are
weighted by 1/unprofiled (relative least squares) because the acceptance criterion is relative
(within 15% of the un-profiled step) and step times span 0.04..45 ms; the unweighted fit is stored
too ("unweighted_coef_us"). Features that are zero on every fit row (python_function under `default`) get 0.

Statistics per model: R^2 of the inflation fit (weighted and unweighted), median / max abs relative
error of the predicted un-profiled step over the fit rows, leave-one-workload-out (LOWO: all variants
and, for the pooled model, both GPUs of that workload held out) errors, and within-15% counts over
all comparable traces of that setting/GPU (CPU- and GPU-bound), in-sample and LOWO, next to the
uncorrected baseline (profiled_step_ms vs un-profiled).
Two variants are fitted (VARIANTS): "loop" (the brief's: loop-thread counts, four free coefficients) and
"loop+autograd" (recommended: loop + pt_autograd thread counts, since loss.backward() blocks the loop
thread while the backward engine runs; a user annotation is charged like a cpu_op, d = a).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
GPUS = ("h100", "h200")
# The clean recording runs, by GPU: the whole matrix with CUPTI torn down after each profiler session
# (TEARDOWN_CUPTI=1). The runs before them (h100, h100_graph, h100_graph2, ...) timed every variant after
# the process's first profiled one with CUPTI still attached: their un-profiled steps read slow where
# launch-bound, and a fit to them charged the profiler too little (record_matrix.py says more).
RUNS = [(g, g + suffix) for g in GPUS for suffix in ("_cleanA", "_cleanB")]
SETTINGS = ("default", "stack")
FEATURES = ("cpu_op", "python_function", "runtime", "user_annotation")
CPU_BOUND_FRAC = 0.60
FIRST_OUTLIER = 1.5
LAST_CUT = 0.5
MIN_STEPS = 3
WITHIN = 0.15
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# traces with an un-profiled time that is not comparable to the profiled one
EXCLUDE = {
    ("cold_first_step", "cold", "stack"): "stack trace recorded at 80x80 input, un-profiled step_ms at 72x72",
}


# --------------------------------------------------------------------------- parsing
def _union(iv):
    tot, end = 0.0, -math.inf
    for s, e in sorted(iv):
        if e <= end:
            continue
        tot += e - max(s, end)
        end = e
    return tot


def _kind(cat):
    if cat == "cpu_op":
        return "cpu_op"
    if cat == "python_function":
        return "python_function"
    if cat in ("cuda_runtime", "cuda_driver"):
        return "runtime"
    if cat == "user_annotation":
        return "user_annotation"
    return None


def parse_trace(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        tr = json.load(f)
    evs = tr.get("traceEvents", [])
    tnames = {}
    for e in evs:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
            tnames.setdefault((e.get("pid"), e.get("tid")), []).append((e.get("args") or {}).get("name", ""))
    steps, gpu, launch_ts, cpu_evs = [], [], {}, []
    worker_fed = False
    for e in evs:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), e.get("name", "")
        worker_fed = worker_fed or "_MultiProcessingDataLoaderIter" in name
        ts, dur = float(e.get("ts", 0) or 0), float(e.get("dur", 0) or 0)
        if cat in GPU_CATS:
            gpu.append((ts, ts + dur, (e.get("args") or {}).get("correlation")))
            continue
        k = _kind(cat)
        if k is None:
            continue
        th = (e.get("pid"), e.get("tid"))
        if k == "runtime":
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launch_ts[c] = ts
        if k == "user_annotation" and name.startswith("ProfilerStep#"):
            steps.append((ts, ts + dur, name, th))
            continue
        cpu_evs.append((ts, k, th))
    steps.sort()
    out = {"n_profiler_steps": len(steps), "worker_fed": worker_fed}
    if not steps:
        return out
    loop = statistics.mode([s[3] for s in steps])
    autograd = {th for th, names in tnames.items() if any("pt_autograd" in n for n in names)}
    out["loop_thread"] = {"pid": loop[0], "tid": loop[1]}
    out["autograd_threads"] = sorted(str(t[1]) for t in autograd)
    durs = [(e - s) / 1e3 for s, e, _, _ in steps]
    keep = list(range(len(steps)))
    dropped = {}
    while len(keep) > MIN_STEPS and durs[keep[0]] > FIRST_OUTLIER * statistics.median(durs[i] for i in keep[1:]):
        dropped[steps[keep[0]][2]] = f"leading outlier ({durs[keep[0]]:.3f} ms)"
        keep.pop(0)
    if len(keep) > MIN_STEPS and durs[keep[-1]] < LAST_CUT * statistics.median(durs[i] for i in keep[:-1]):
        dropped[steps[keep[-1]][2]] = f"last step cut short ({durs[keep[-1]]:.3f} ms)"
        keep.pop()
    cpu_evs.sort()
    ts_arr = np.array([c[0] for c in cpu_evs])
    groups = ("loop", "autograd", "other")
    per_step = {g: {k: [] for k in FEATURES} for g in groups}
    busy, span = [], []
    # gpu work by launch time
    g_launch = sorted((launch_ts[c], s, e) for s, e, c in gpu if c in launch_ts)
    gl_ts = np.array([x[0] for x in g_launch])
    for i in keep:
        s0, s1, _, _ = steps[i]
        lo, hi = np.searchsorted(ts_arr, s0, "left"), np.searchsorted(ts_arr, s1, "left")
        cnt = {g: dict.fromkeys(FEATURES, 0) for g in groups}
        for ts, k, th in cpu_evs[lo:hi]:
            g = "loop" if th == loop else ("autograd" if th in autograd else "other")
            cnt[g][k] += 1
        for g in groups:
            for k in FEATURES:
                per_step[g][k].append(cnt[g][k])
        a, b = np.searchsorted(gl_ts, s0, "left"), np.searchsorted(gl_ts, s1, "left")
        w = [(s, e) for _, s, e in g_launch[a:b]]
        busy.append(_union(w) / 1e3 if w else 0.0)
        span.append((max(e for _, e in w) - min(s for s, _ in w)) / 1e3 if w else 0.0)
    out["steps_used"] = [steps[i][2] for i in keep]
    out["steps_dropped"] = dropped
    out["step_cpu_ms_all"] = [round(d, 4) for d in durs]
    out["counts_per_step"] = {g: {k: round(float(np.mean(per_step[g][k])), 2) for k in FEATURES} for g in groups}
    out["profiled_cpu_step_ms"] = round(statistics.median(durs[i] for i in keep), 4)
    out["gpu_busy_ms"] = round(statistics.median(busy), 4)
    out["gpu_span_ms"] = round(statistics.median(span), 4)
    out["profiled_step_ms"] = round(max(out["profiled_cpu_step_ms"], out["gpu_span_ms"]), 4)
    out["gpu_busy_frac"] = round(out["gpu_busy_ms"] / out["profiled_step_ms"], 4) if out["profiled_step_ms"] else None
    out["bound"] = "cpu" if out["gpu_busy_ms"] < CPU_BOUND_FRAC * out["profiled_step_ms"] else "gpu"
    return out


def load_records() -> list[dict]:
    recs = []
    for g, run in RUNS:
        d = os.path.join(HERE, run)
        if not os.path.exists(os.path.join(d, "manifest.json")):
            continue
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        entries = {(e["workload"], e["variant"]): e for e in man["entries"]}
        for t in man["traces"]:
            p = os.path.join(d, t["file"])
            if not os.path.exists(p):
                continue
            e = entries.get((t["workload"], t["variant"]), {})
            m = e.get("step_ms") or {}
            r = {"id": f"{run}/{t['file']}", "gpu": g, "file": t["file"], "workload": t["workload"],
                 "variant": t["variant"], "profile": t["profile"], "role": e.get("role"),
                 "cold": t["schedule"]["wait"] == 0,
                 "unprofiled_step_ms": m.get("median"), "unprofiled_p10_ms": m.get("p10"),
                 "unprofiled_p90_ms": m.get("p90")}
            r.update(parse_trace(p))
            reason = None
            if r["unprofiled_step_ms"] is None:
                reason = "no un-profiled timing"
            elif (t["workload"], t["variant"], t["profile"]) in EXCLUDE:
                reason = EXCLUDE[(t["workload"], t["variant"], t["profile"])]
            r["comparable"] = reason is None
            r["excluded_reason"] = reason
            if reason is None and r["cold"]:
                reason = "cold trace (wait=0): kept for evaluation, not fitted"
            elif reason is None and r.get("bound") != "cpu":
                reason = "GPU-bound"
            elif reason is None and r.get("worker_fed"):
                # The loop waits for DataLoader worker processes: its step is their pace, not its events'.
                reason = "fed by DataLoader workers"
            r["in_fit_set"] = reason is None
            r["not_fitted_because"] = reason
            recs.append(r)
    return recs


# --------------------------------------------------------------------------- fitting
def nnls_exact(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact NNLS for a handful of columns: least squares on every subset of columns, best feasible one."""
    n = X.shape[1]
    best, best_rss = np.zeros(n), float(y @ y)
    for r in range(1, n + 1):
        for cols in itertools.combinations(range(n), r):
            sub = X[:, cols]
            if np.linalg.matrix_rank(sub) < r:
                continue
            c, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if np.any(c < 0):
                continue
            full = np.zeros(n)
            full[list(cols)] = c
            rss = float(np.sum((y - X @ full) ** 2))
            if rss < best_rss - 1e-12:
                best, best_rss = full, rss
    return best


VARIANTS = {
    # the brief's model: loop-thread counts, four free coefficients
    "loop": {"scope": ("loop",), "tie": {}},
    # recommended: the loop thread plus the autograd engine threads (loss.backward() blocks the loop
    # thread while they run, so their profiler cost is on the step's critical path); a user annotation
    # (record_function range) is charged like a cpu_op (same RecordFunction path), i.e. d = a
    "loop+autograd": {"scope": ("loop", "autograd"), "tie": {"user_annotation": "cpu_op"}},
}
RECOMMENDED = "loop+autograd"


def counts_vec(r, variant):
    """Counts per step summed over the variant's thread scope, one entry per FEATURES."""
    c = r["counts_per_step"]
    return np.array([sum(c[g][k] for g in VARIANTS[variant]["scope"]) for k in FEATURES], float)


def _design(r, variant):
    """Columns of the fit: tied features are folded into their target column."""
    v = counts_vec(r, variant)
    tie = VARIANTS[variant]["tie"]
    free = [k for k in FEATURES if k not in tie]
    col = {k: v[FEATURES.index(k)] for k in free}
    for k, tgt in tie.items():
        col[tgt] += v[FEATURES.index(k)]
    return np.array([col[k] for k in free]), free


def _expand(coef_free, variant):
    tie = VARIANTS[variant]["tie"]
    free = [k for k in FEATURES if k not in tie]
    d = dict(zip(free, coef_free))
    for k, tgt in tie.items():
        d[k] = d[tgt]
    return np.array([d[k] for k in FEATURES])


def inflation_ms(coef_us: np.ndarray, r, variant) -> float:
    return float(coef_us @ counts_vec(r, variant)) / 1e3


def predict(coef_us, r, variant) -> float:
    return max(r["gpu_busy_ms"], r["profiled_cpu_step_ms"] - inflation_ms(coef_us, r, variant))


def _xyw(rows, variant, weighted):
    X = np.array([_design(r, variant)[0] for r in rows])
    y = np.array([(r["profiled_cpu_step_ms"] - r["unprofiled_step_ms"]) * 1e3 for r in rows])
    w = np.array([1.0 / r["unprofiled_step_ms"] for r in rows]) if weighted else np.ones(len(rows))
    return X, y, w


def fit(rows, variant, weighted=True) -> np.ndarray:
    """Full coefficient vector over FEATURES (µs/event)."""
    nfree = len(FEATURES) - len(VARIANTS[variant]["tie"])
    if not rows:
        return _expand(np.zeros(nfree), variant)
    X, y, w = _xyw(rows, variant, weighted)
    used = np.any(X != 0, axis=0)
    coef = np.zeros(nfree)
    coef[used] = nnls_exact(X[:, used] * w[:, None], y * w)
    return _expand(coef, variant)


def r2(coef, rows, variant, weighted):
    X = np.array([counts_vec(r, variant) for r in rows])
    _, y, w = _xyw(rows, variant, weighted)
    res = (y - X @ coef) * w
    yw = y * w
    ss = float(np.sum((yw - yw.mean()) ** 2))
    return 1 - float(res @ res) / ss if ss > 0 else None


def rel_err(pred, r):
    return (pred - r["unprofiled_step_ms"]) / r["unprofiled_step_ms"]


def _rnd(x, n=4):
    return None if x is None else round(float(x), n)


def _stats(errs):
    a = [abs(e) for e in errs]
    return (_rnd(statistics.median(a)), _rnd(max(a))) if a else (None, None)


def build_model(recs, setting, gpu, variant):
    """gpu in GPUS or 'both'. Returns (model dict, coef vector, {trace id: LOWO prediction})."""
    pool = [r for r in recs if r["profile"] == setting and (gpu == "both" or r["gpu"] == gpu)]
    fit_rows = [r for r in pool if r["in_fit_set"]]
    coef = fit(fit_rows, variant, True)
    coef_uw = fit(fit_rows, variant, False)
    errs = [rel_err(predict(coef, r, variant), r) for r in fit_rows]
    lowo_pred, lowo_coefs = {}, []
    for wl in sorted({r["workload"] for r in pool}):
        c = fit([r for r in fit_rows if r["workload"] != wl], variant, True)
        lowo_coefs.append(c)
        for r in pool:
            if r["workload"] == wl:
                lowo_pred[r["id"]] = predict(c, r, variant)
    lowo_errs = [rel_err(lowo_pred[r["id"]], r) for r in fit_rows]
    comp = [r for r in pool if r["comparable"]]

    def within(rows, fn):
        return {"n": len(rows), "within": sum(1 for r in rows if abs(rel_err(fn(r), r)) <= WITHIN),
                "floored_at_gpu_busy": sum(1 for r in rows if fn(r) <= r["gpu_busy_ms"])}

    def within_split(fn):
        return {"all": within(comp, fn),
                "cpu_bound": within([r for r in comp if r["bound"] == "cpu"], fn),
                "gpu_bound": within([r for r in comp if r["bound"] == "gpu"], fn)}

    med, mx = _stats(errs)
    lmed, lmx = _stats(lowo_errs)
    cmed, cmx = _stats([rel_err(predict(coef, r, variant), r) for r in comp])
    model = {
        "setting": setting, "gpu": gpu, "variant": variant,
        "coef_us": {k: _rnd(v) for k, v in zip(FEATURES, coef)},
        "unweighted_coef_us": {k: _rnd(v) for k, v in zip(FEATURES, coef_uw)},
        "lowo_coef_range_us": {k: [_rnd(min(c[i] for c in lowo_coefs)), _rnd(max(c[i] for c in lowo_coefs))]
                               for i, k in enumerate(FEATURES)},
        "n_fit": len(fit_rows),
        "fit_traces": [r["id"] for r in fit_rows],
        "r2_weighted": _rnd(r2(coef, fit_rows, variant, True)),
        "r2_unweighted": _rnd(r2(coef, fit_rows, variant, False)),
        "median_abs_rel_err": med, "max_abs_rel_err": mx,
        "lowo_median_abs_rel_err": lmed, "lowo_max_abs_rel_err": lmx,
        "all_comparable_median_abs_rel_err": cmed, "all_comparable_max_abs_rel_err": cmx,
        "within_15pct": within_split(lambda r: predict(coef, r, variant)),
        "within_15pct_lowo": within_split(lambda r: lowo_pred[r["id"]]),
        "within_15pct_uncorrected": within_split(lambda r: r["profiled_step_ms"]),
    }
    return model, coef, lowo_pred


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "calibration.json"))
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    recs = load_records()
    models = {}
    preds = {r["id"]: {} for r in recs}
    for v in VARIANTS:
        models[v] = {}
        for s in SETTINGS:
            models[v][s] = {}
            for g in GPUS + ("both",):
                m, coef, lowo = build_model(recs, s, g, v)
                models[v][s][g] = m
                key = "own_gpu" if g != "both" else "both_gpus"
                for r in recs:
                    if r["profile"] != s or (g != "both" and r["gpu"] != g):
                        continue
                    infl = inflation_ms(coef, r, v)
                    p, lp = predict(coef, r, v), lowo.get(r["id"])
                    preds[r["id"]].setdefault(v, {})[key] = {
                        "inflation_ms": _rnd(infl),
                        "predicted_unprofiled_ms": _rnd(p),
                        "floored_at_gpu_busy": bool(r["gpu_busy_ms"] >= r["profiled_cpu_step_ms"] - infl),
                        "rel_err": _rnd(rel_err(p, r)) if r["comparable"] else None,
                        "lowo_predicted_unprofiled_ms": _rnd(lp),
                        "lowo_rel_err": _rnd(rel_err(lp, r)) if r["comparable"] else None,
                    }
    traces = []
    for r in recs:
        t = {k: r.get(k) for k in (
            "id", "gpu", "file", "workload", "variant", "profile", "role", "cold", "n_profiler_steps", "loop_thread",
            "autograd_threads", "steps_used", "steps_dropped", "step_cpu_ms_all", "counts_per_step",
            "profiled_cpu_step_ms", "gpu_span_ms", "gpu_busy_ms", "profiled_step_ms", "gpu_busy_frac", "bound",
            "unprofiled_step_ms", "unprofiled_p10_ms", "unprofiled_p90_ms", "comparable", "excluded_reason",
            "in_fit_set", "not_fitted_because")}
        t["uncorrected_rel_err"] = _rnd(rel_err(r["profiled_step_ms"], r)) if r["comparable"] else None
        t["predictions"] = preds[r["id"]]
        traces.append(t)
    out = {
        "schema_version": 1,
        "generated_by": "sample_traces/matrix/calibrate.py",
        "units": {"coef_us": "microseconds of profiled CPU time per event",
                  "*_ms": "milliseconds per step", "rel_err": "(predicted - measured) / measured"},
        "features": list(FEATURES),
        "feature_definition": {
            "cpu_op": "events with cat == 'cpu_op'",
            "python_function": "events with cat == 'python_function' (with_stack only)",
            "runtime": "events with cat in ('cuda_runtime', 'cuda_driver')",
            "user_annotation": "events with cat == 'user_annotation', the ProfilerStep#N span itself excluded",
        },
        "thread_groups": {
            "loop": "the thread carrying the ProfilerStep#N annotations",
            "autograd": "threads whose thread_name metadata contains 'pt_autograd' (backward engine)",
            "other": "every other CPU thread (e.g. DataLoader pin-memory thread)",
        },
        "counting": "events whose start lies inside a kept ProfilerStep#N span, per thread group; mean over kept steps",
        "step_selection": f"drop leading steps while > {FIRST_OUTLIER}x the median of the later ones (keep >= "
                          f"{MIN_STEPS}); drop the last step if < {LAST_CUT}x the median of the others",
        "cpu_bound_rule": f"gpu_busy_ms < {CPU_BOUND_FRAC} * profiled_step_ms; profiled_step_ms = "
                          "max(median ProfilerStep duration, median span of the GPU work launched in the step); "
                          "gpu_busy_ms = median per-step union of kernel/gpu_memcpy/gpu_memset intervals launched in the step",
        "formula": "counts[k] = sum over the variant's scope of counts_per_step[group][k]; inflation_ms = "
                   "sum_k coef_us[k] * counts[k] / 1000; predicted_unprofiled_ms = "
                   "max(gpu_busy_ms, profiled_cpu_step_ms - inflation_ms)",
        "fit": "non-negative least squares (exact active-set enumeration), rows weighted by 1/unprofiled_step_ms, "
               "target profiled_cpu_step_ms - unprofiled_step_ms, no intercept, over CPU-bound, non-cold traces "
               "with a comparable un-profiled timing; features absent from every fit row get 0",
        "lowo": "leave-one-workload-out: every variant of the workload (and, for gpu 'both', both GPUs) held out",
        "within_threshold": WITHIN,
        "variants": {v: {"scope": list(d["scope"]), "tie": d["tie"]} for v, d in VARIANTS.items()},
        "recommended_variant": RECOMMENDED,
        "recommended_note": "use models[recommended_variant][setting][gpu] where the trace's host matches a "
                            "calibrated one, else models[...][setting]['both']; setting = 'stack' when the trace "
                            "has with_stack or record_shapes, else 'default'",
        "models": models,
        "traces": traces,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    if not args.quiet:
        report(out)


def _w(d):
    return "|".join(f"{d[k]['within']}/{d[k]['n']}" for k in ("all", "cpu_bound", "gpu_bound"))


def report(out):
    print("coefficients: µs per event (weighted NNLS). within-15% shown as all|cpu-bound|gpu-bound")
    print(f"{'variant':14} {'setting':8} {'gpu':5} {'n':>3} " + " ".join(f"{k[:8]:>8}" for k in FEATURES)
          + "   R2w   R2u  medAE  maxAE lowoMed lowoMax  within15(in-sample)  within15(LOWO)  uncorrected")
    for v, block in out["models"].items():
        for s in SETTINGS:
            for g in GPUS + ("both",):
                m = block[s][g]
                print(f"{v:14} {s:8} {g:5} {m['n_fit']:>3} " + " ".join(f"{m['coef_us'][k]:8.2f}" for k in FEATURES)
                      + f"  {m['r2_weighted']:.2f}  {m['r2_unweighted']:.2f}  {m['median_abs_rel_err']:.3f}  "
                      f"{m['max_abs_rel_err']:.3f}  {m['lowo_median_abs_rel_err']:.3f}  {m['lowo_max_abs_rel_err']:.3f}"
                      f"   {_w(m['within_15pct']):18}  {_w(m['within_15pct_lowo']):14}  {_w(m['within_15pct_uncorrected'])}")
    v = out["recommended_variant"]
    print(f"\nper trace ({v}, own-GPU model): bound, fit?, counts loop+autograd (op/py/rt/ann), cpu step, busy, "
          "unprofiled, predicted, err, LOWO err")
    for t in out["traces"]:
        p = t["predictions"][v]["own_gpu"]
        c = {k: t["counts_per_step"]["loop"][k] + t["counts_per_step"]["autograd"][k] for k in FEATURES}
        nan = float("nan")
        print(f"{t['id']:58} {t['bound']} {'F' if t['in_fit_set'] else ' '} {c['cpu_op']:6.0f} {c['python_function']:6.0f} "
              f"{c['runtime']:5.0f} {c['user_annotation']:3.0f} {t['profiled_cpu_step_ms']:8.3f} {t['gpu_busy_ms']:7.3f} "
              f"{t['unprofiled_step_ms'] or nan:8.3f} {p['predicted_unprofiled_ms']:8.3f} "
              f"{p['rel_err'] if p['rel_err'] is not None else nan:+.3f} "
              f"{p['lowo_rel_err'] if p['lowo_rel_err'] is not None else nan:+.3f}")


if __name__ == "__main__":
    sys.exit(main())
