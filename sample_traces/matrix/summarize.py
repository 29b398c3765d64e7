#!/usr/bin/env python3
"""Summarise the matrix traces straight from the raw Chrome-trace JSON (no traceinsight).

    python sample_traces/matrix/summarize.py sample_traces/matrix/h100 sample_traces/matrix/h200 \
        [--update-manifest] [--markdown tables.md]

For every trace in <dir>/manifest.json:
  * ProfilerStep#N spans (cat user_annotation): per-step CPU duration, median;
  * GPU work (kernel / gpu_memcpy / gpu_memset) launched from inside those steps (matched to
    its runtime call by correlation id): per step, the span from the first start to the last end
    of the GPU work launched in that step; "GPU ms/step" is the median of those spans (also
    stored: the whole window / steps, and the busy % of that window);
  * "profiled step" = max(median ProfilerStep, GPU ms/step): the CPU span for host-bound
    traces, the GPU span for GPU-bound ones (the CPU runs ahead, so its spans are short);
  * cold traces (schedule wait=0, warmup=0: cold_first_step, compile_capture/capture): the first
    step is reported separately (first_step_ms) and the profiled step is the median of steps 2..5;
  * counts: kernels / step, runtime calls (launches, graph launches, syncs, waits, memcpy),
    memcpy kinds, python_function events, CUDA-graph capture markers.
Inflation = profiled step / un-profiled median step (from the same manifest).
--update-manifest stores these under each trace's "summary" in manifest.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
from collections import Counter

RUNTIME_OF_INTEREST = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                       "cudaGraphLaunch", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                       "cudaStreamWaitEvent", "cudaMemcpyAsync", "cudaMemcpy", "cudaEventQuery",
                       "cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate",
                       "cudaGraphInstantiateWithFlags", "cudaHostAlloc", "cudaMalloc", "cudaFree")


def _union(iv):
    tot, end = 0.0, -math.inf
    for s, e in sorted(iv):
        if e <= end:
            continue
        tot += e - max(s, end)
        end = e
    return tot


def summarize_trace(path: str, cold: bool = False) -> dict:
    with gzip.open(path, "rt") as f:
        tr = json.load(f)
    evs = [e for e in tr.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    steps, gpu, launch_ts = [], [], {}
    runtime, memcpy, cats = Counter(), Counter(), Counter()
    markers = Counter()
    for e in evs:
        cat, name = e.get("cat", ""), e.get("name", "")
        cats[cat] += 1
        ts, dur = float(e.get("ts", 0) or 0), float(e.get("dur", 0) or 0)
        if cat == "user_annotation" and name.startswith("ProfilerStep#"):
            steps.append((ts, ts + dur, name))
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu.append((ts, ts + dur, (e.get("args") or {}).get("correlation")))
            if cat != "kernel":
                memcpy[name] += 1
        elif cat in ("cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launch_ts[c] = ts
            runtime[name] += 1
        if "CUDAGraphNode.record" in name or "cudagraphify" in name:
            markers[name] += 1
    steps.sort()
    n = len(steps)
    out = {"bytes": os.path.getsize(path), "events": len(evs), "profiler_steps": n,
           "python_function_events": cats.get("python_function", 0)}
    if not n:
        return out
    durs = [(e - s) / 1e3 for s, e, _ in steps]
    t0, t1 = steps[0][0], max(e for _, e, _ in steps)
    mine = [(s, e) for s, e, c in gpu if c in launch_ts and t0 <= launch_ts[c] <= t1]
    kern_mine = sum(1 for s, e, c in gpu if c in launch_ts and t0 <= launch_ts[c] <= t1)
    out.update({
        "step_cpu_ms": [round(d, 4) for d in durs],
        "step_cpu_ms_median": round(statistics.median(durs), 4),
        "cpu_span_ms_per_step": round((t1 - t0) / n / 1e3, 4),
        "gpu_events_per_step": round(kern_mine / n, 1),
        "runtime_calls": {k: runtime[k] for k in RUNTIME_OF_INTEREST if runtime.get(k)},
        "memcpy_kinds": dict(memcpy),
    })
    if mine:
        g0, g1 = min(s for s, _ in mine), max(e for _, e in mine)
        out["gpu_window_ms_per_step"] = round((g1 - g0) / n / 1e3, 4)
        out["gpu_busy_pct"] = round(100 * _union(mine) / (g1 - g0), 1) if g1 > g0 else None
        spans = []
        for s0, s1, _ in steps:
            w = [(s, e) for s, e, c in gpu if c in launch_ts and s0 <= launch_ts[c] <= s1]
            spans.append((max(e for _, e in w) - min(s for s, _ in w)) / 1e3 if w else 0.0)
        out["gpu_span_ms_per_step"] = [round(x, 4) for x in spans]
        out["gpu_ms_per_step"] = round(statistics.median(spans), 4)
    prof = max(out["step_cpu_ms_median"], out.get("gpu_ms_per_step", 0.0))
    if cold and n > 1:
        out["first_step_ms"] = round(durs[0], 4)
        rest = statistics.median(durs[1:])
        out["rest_steps_cpu_ms_median"] = round(rest, 4)
        prof = max(rest, statistics.median(out.get("gpu_span_ms_per_step", [0.0, 0.0])[1:]))
    out["profiled_step_ms"] = round(prof, 4)
    if markers:
        out["graph_markers"] = dict(markers)
    return out


def load(dir_):
    with open(os.path.join(dir_, "manifest.json")) as f:
        return json.load(f)


def fmt(x, nd=3):
    return "—" if x is None else f"{x:.{nd}f}"


def table(dir_, man, summ) -> str:
    env = man.get("environment", {})
    lines = [f"### {man.get('gpu') or 'CPU'} (`{os.path.basename(os.path.normpath(dir_))}/`)", "",
             f"torch {man['torch']}, CUDA {man['cuda']}, cuDNN {man.get('cudnn')}, driver {man.get('driver')}, "
             f"{env.get('cpu_count')} vCPUs ({env.get('cpu')}), recorded {man['date_utc']}, "
             f"run took {man.get('total_wall_s')} s.", "",
             "| workload | variant | expected kind | un-profiled ms median (p10–p90) | speed-up vs before | "
             "default: ProfilerStep ms / GPU ms per step / inflation | stack: ProfilerStep ms / GPU ms per step / inflation "
             "| kB (default / stack) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e in man["entries"]:
        m = e.get("step_ms")
        um = m["median"] if m else None
        cells = []
        kb = []
        for setting in ("default", "stack"):
            s = summ.get(e["traces"].get(setting))
            if not s or "step_cpu_ms_median" not in s:
                cells.append("—")
                kb.append("—")
                continue
            infl = f"{s['profiled_step_ms'] / um:.2f}x" if um else "—"
            if "first_step_ms" in s:
                cells.append(f"first step {s['first_step_ms']:.1f}, steps 2-5 median {s['rest_steps_cpu_ms_median']:.3f} "
                             f"/ — / {infl}")
            else:
                cells.append(f"{s['step_cpu_ms_median']:.3f} / {fmt(s.get('gpu_ms_per_step'))} / {infl}")
            kb.append(f"{s['bytes'] / 1e3:.0f}")
        sp = e.get("speedup_vs_before")
        sp_s = "—" if sp is None else f"{sp:.2f}x" + (" per sample" if e.get("speedup_basis") == "per sample" else "")
        um_s = "—" if not m else f"{m['median']:.4f} ({m['p10']:.4f}–{m['p90']:.4f})"
        lines.append(f"| {e['workload']} | {e['variant']} | {e['expected_kind']} | {um_s} | {sp_s} | "
                     f"{cells[0]} | {cells[1]} | {' / '.join(kb)} |")
    for f in man.get("failures", []):
        lines.append(f"| {f['workload']} | {f['variant']} | FAILED | {f['error'].strip().splitlines()[-1][:80]} | | | | |")
    for s in man.get("skipped", []):
        lines.append(f"| {s['workload']} | {s['variant']} | SKIPPED ({s['reason']}) | | | | | |")
    return "\n".join(lines) + "\n"


def cross_table(mans) -> str:
    labels = [m.get("gpu_label", "?") for m in mans]
    keys = []
    for m in mans:
        for e in m["entries"]:
            k = (e["workload"], e["variant"])
            if k not in keys:
                keys.append(k)
    idx = [{(e["workload"], e["variant"]): e for e in m["entries"]} for m in mans]
    head = "| workload | variant | expected kind | " + " | ".join(
        f"{l} median ms | {l} speed-up" for l in labels) + " |"
    lines = [head, "|" + " --- |" * (3 + 2 * len(mans))]
    for k in keys:
        e0 = next(i[k] for i in idx if k in i)
        row = f"| {k[0]} | {k[1]} | {e0['expected_kind']} |"
        for i in idx:
            e = i.get(k)
            if not e:
                row += " not recorded | |"
                continue
            m = e.get("step_ms")
            sp = e.get("speedup_vs_before")
            row += f" {m['median']:.4f} |" if m else " — |"
            row += (f" {sp:.2f}x{' /sample' if e.get('speedup_basis') == 'per sample' else ''} |" if sp else " |")
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--update-manifest", action="store_true")
    ap.add_argument("--markdown", help="write the tables to this file")
    args = ap.parse_args(argv)
    md, mans = [], []
    for d in args.dirs:
        man = load(d)
        summ = {}
        for t in man["traces"]:
            p = os.path.join(d, t["file"])
            if os.path.exists(p):
                summ[t["file"]] = summarize_trace(p, cold=t["schedule"]["wait"] == 0)
                if args.update_manifest:
                    t["summary"] = summ[t["file"]]
        if args.update_manifest:
            by = {(e["workload"], e["variant"]): e for e in man["entries"]}
            for t in man["traces"]:
                e = by.get((t["workload"], t["variant"]))
                s = t.get("summary")
                if e and e.get("step_ms") and s and s.get("profiled_step_ms"):
                    s["inflation_vs_unprofiled"] = round(s["profiled_step_ms"] / e["step_ms"]["median"], 3)
            man["summary_method"] = ("sample_traces/matrix/summarize.py, from the raw trace JSON: profiled_step_ms = "
                                     "max(median ProfilerStep# duration, median per-step span of the GPU work launched "
                                     "in each step); cold traces (wait=0): the same over steps 2..5, first step in "
                                     "first_step_ms; "
                                     "inflation_vs_unprofiled = profiled_step_ms / un-profiled median step_ms")
            with open(os.path.join(d, "manifest.json"), "w") as f:
                json.dump(man, f, indent=1)
        md.append(table(d, man, summ))
        mans.append(man)
    if len(mans) > 1:
        md.insert(0, "### Un-profiled medians and speed-ups, side by side\n\n" + cross_table(mans))
    text = "\n".join(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
