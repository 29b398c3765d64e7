"""Shared harness for the sample-trace workloads.

Every workload module in this package exposes:

    NAME            short name, used in the trace file name
    EXPECTED_KIND   finding kind the "before" trace should show ("healthy" for the healthy one)
    WITH_STACK      whether the profiler records Python stacks for it
    VARIANTS        tuple of variant names, normally ("before", "after")
    DESCRIPTION     dict: variant -> one-line description of what that variant does
    FIX             one-line description of the fix (what "after" changes)
    make(variant, device) -> step_fn
                    step_fn() runs one training / inference step.  It may carry
                    ``step_fn.close()`` (release workers, restore global flags) and
                    ``step_fn.info`` (a dict merged into the manifest entry).
    prepare(device) -> dict   (optional) run once before the variants, e.g. a probe.
    WARMUP_STEPS    (optional) eager warm-up steps before measuring (default 5).

The harness (``record_one``) warms a step up, measures its un-profiled step time
in blocks, then profiles it with torch.profiler and writes a gzipped Chrome trace.

Set TI_CPU=1 (or pass --cpu to record_all.py) to run everything on the CPU with
tiny sizes: only useful to smoke-test the scripts without a GPU.
"""

from __future__ import annotations

import gc
import gzip
import json
import math
import os
import re
import shutil
import statistics
import time
import traceback
from collections import defaultdict

import torch


def cpu_mode() -> bool:
    return os.environ.get("TI_CPU", "") not in ("", "0")


def pick_device() -> torch.device:
    if cpu_mode() or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def is_cuda(device) -> bool:
    return torch.device(device).type == "cuda"


def sync(device) -> None:
    if is_cuda(device):
        torch.cuda.synchronize()


class Step:
    """A callable step with optional cleanup and extra manifest info."""

    def __init__(self, fn, close=None, info=None):
        self._fn = fn
        self._close = close
        self.info = dict(info or {})

    def __call__(self):
        return self._fn()

    def close(self):
        if self._close is not None:
            c, self._close = self._close, None
            c()


def close_step(step) -> None:
    c = getattr(step, "close", None)
    if callable(c):
        c()


# --------------------------------------------------------------------------- measuring


def measure_step_time(step, device, block_s: float | None = None, blocks: int = 5) -> dict:
    """Un-profiled step time: blocks of N steps, synchronize at the end of each block.

    N is chosen so that one block takes at least ``block_s`` seconds (0.3 s on a GPU).
    Returns median / min / max of the per-block mean step time in ms.
    """
    if block_s is None:
        block_s = 0.05 if cpu_mode() else 0.3
    # calibrate: double n until a block takes >= 1/3 of the target
    n = 1
    while True:
        sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync(device)
        dt = time.perf_counter() - t0
        if dt >= block_s / 3 or n >= 8192:
            break
        n *= 2
    per_step = dt / n
    N = max(1, math.ceil(block_s * 1.1 / per_step))
    times = []
    for _ in range(blocks):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(N):
            step()
        sync(device)
        times.append((time.perf_counter() - t0) / N * 1e3)
    return {
        "median_ms": round(statistics.median(times), 4),
        "min_ms": round(min(times), 4),
        "max_ms": round(max(times), 4),
        "steps_per_block": N,
        "blocks": blocks,
        "block_ms": [round(t, 4) for t in times],
    }


# --------------------------------------------------------------------------- profiling


def profile_step(step, device, path_gz: str, with_stack: bool, active: int = 5,
                 wait: int = 1, warmup: int = 2, record_shapes: bool = True) -> None:
    acts = [torch.profiler.ProfilerActivity.CPU]
    if is_cuda(device):
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    sched = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1)
    sync(device)
    with torch.profiler.profile(
        activities=acts,
        schedule=sched,
        record_shapes=record_shapes,
        with_stack=with_stack,
        on_trace_ready=None,
    ) as prof:
        for _ in range(wait + warmup + active):
            step()
            prof.step()
        sync(device)
    raw = path_gz[: -len(".gz")] if path_gz.endswith(".gz") else path_gz + ".json"
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f_in, gzip.open(path_gz, "wb", compresslevel=9) as f_out:
        shutil.copyfileobj(f_in, f_out)
    os.remove(raw)


# --------------------------------------------------------------------------- reading back

# layout-conversion kernels (cuDNN nchwToNhwc / nhwcToNchw / tensorTransform, generic transposes)
LAYOUT_RE = re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|tensorTransform|transpose|permute", re.I)


def is_layout_kernel(name: str) -> bool:
    # mangled CUTLASS conv kernels mention "Transpose" in their template arguments: not conversions
    return bool(LAYOUT_RE.search(name)) and "cutlass" not in name.lower()


def load_trace(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _union_us(intervals):
    total = 0.0
    end = -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        if s > end:
            total += e - s
        else:
            total += e - end
        end = e
    return total


def trace_stats(path: str, top: int = 8) -> dict:
    """Summary of an exported trace, used for the manifest and for eyeballing."""
    tr = load_trace(path)
    evs = [e for e in tr.get("traceEvents", []) if isinstance(e, dict)]
    by_cat = defaultdict(int)
    kern = defaultdict(lambda: [0, 0.0])
    memcpy = defaultdict(lambda: [0, 0.0])
    runtime = defaultdict(int)
    cpu_ops = defaultdict(int)
    steps = []
    gpu_ev = []          # (start, end, correlation) of kernels / memcpys / memsets
    launch_ts = {}       # correlation -> ts of the runtime call that issued it
    for e in evs:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        name = e.get("name", "")
        by_cat[cat] += 1
        dur = float(e.get("dur", 0) or 0)
        ts = float(e.get("ts", 0) or 0)
        if cat == "kernel":
            kern[name][0] += 1
            kern[name][1] += dur
            gpu_ev.append((ts, ts + dur, (e.get("args") or {}).get("correlation")))
        elif cat in ("gpu_memcpy", "gpu_memset"):
            memcpy[name][0] += 1
            memcpy[name][1] += dur
            gpu_ev.append((ts, ts + dur, (e.get("args") or {}).get("correlation")))
        elif cat in ("cuda_runtime", "cuda_driver"):
            runtime[name] += 1
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launch_ts[corr] = ts
        elif cat == "cpu_op":
            cpu_ops[name] += 1
        if name.startswith("ProfilerStep#") and cat in ("user_annotation", "cpu_op"):
            steps.append((ts, ts + dur, name))
    kt = sorted(kern.items(), key=lambda kv: -kv[1][1])
    total_k = sum(v[1] for v in kern.values())
    layout = {k: v for k, v in kern.items() if is_layout_kernel(k)}
    stats = {
        "file_bytes": os.path.getsize(path),
        "events": len(evs),
        "profiler_steps": len(steps),
        "kernel_events": sum(v[0] for v in kern.values()),
        "kernel_time_us": round(total_k, 1),
        "kernels_per_step": round(sum(v[0] for v in kern.values()) / max(1, len(steps)), 1),
        "top_kernels": [
            {"name": k, "count": v[0], "total_us": round(v[1], 1),
             "pct": round(100 * v[1] / total_k, 1) if total_k else 0.0}
            for k, v in kt[:top]
        ],
        "memcpy": {k: {"count": v[0], "total_us": round(v[1], 1)} for k, v in memcpy.items()},
        "sync_runtime_calls": {k: v for k, v in runtime.items()
                               if "Synchronize" in k or "Memcpy" in k or "EventQuery" in k},
        "cuda_launches": sum(v for k, v in runtime.items() if "LaunchKernel" in k or "GraphLaunch" in k),
        "graph_launches": sum(v for k, v in runtime.items() if "GraphLaunch" in k),
        "sync_ops": {k: cpu_ops[k] for k in ("aten::item", "aten::_local_scalar_dense", "aten::nonzero",
                                               "aten::unique", "aten::_unique2", "aten::masked_select",
                                               "aten::index", "aten::to", "aten::copy_")
                     if cpu_ops.get(k)},
        "layout_kernels": {k: {"count": v[0], "total_us": round(v[1], 1)} for k, v in layout.items()},
        "layout_kernel_pct": round(100 * sum(v[1] for v in layout.values()) / total_k, 1) if total_k else 0.0,
        "python_function_events": by_cat.get("python_function", 0),
    }
    if steps:
        # CPU side: span of the ProfilerStep# annotations.  GPU side: the GPU work launched
        # from inside those steps (matched by correlation id), from its first start to its
        # last end; busy % = union of that work / that window.
        t0 = min(s for s, _, _ in steps)
        t1 = max(e for _, e, _ in steps)
        span = t1 - t0
        mine = [(s, e) for s, e, c in gpu_ev if c in launch_ts and t0 <= launch_ts[c] <= t1]
        stats["cpu_steps_span_us"] = round(span, 1)
        stats["cpu_step_ms_mean"] = round(span / len(steps) / 1e3, 4)
        if mine:
            g0 = min(s for s, _ in mine)
            g1 = max(e for _, e in mine)
            busy = _union_us(mine)
            stats["gpu_window_us"] = round(g1 - g0, 1)
            stats["gpu_step_ms_mean"] = round((g1 - g0) / len(steps) / 1e3, 4)
            stats["gpu_busy_pct"] = round(100 * busy / (g1 - g0), 1) if g1 > g0 else None
    return stats


def print_stats(label: str, st: dict) -> None:
    print(f"--- {label}: {st['file_bytes']/1e6:.2f} MB gz, {st['events']} events, "
          f"{st['profiler_steps']} ProfilerStep#, {st['kernel_events']} kernels "
          f"({st['kernels_per_step']}/step), GPU busy {st.get('gpu_busy_pct')}%, "
          f"profiled step cpu {st.get('cpu_step_ms_mean')} ms / gpu {st.get('gpu_step_ms_mean')} ms")
    for k in st["top_kernels"]:
        print(f"      {k['pct']:5.1f}%  {k['total_us']:10.1f} us  x{k['count']:<5d} {k['name'][:150]}")
    if st["memcpy"]:
        print(f"    memcpy/memset: {st['memcpy']}")
    if st["sync_runtime_calls"]:
        print(f"    sync/memcpy runtime calls: {st['sync_runtime_calls']}")
    if st["sync_ops"]:
        print(f"    ops: {st['sync_ops']}")
    if st["layout_kernels"]:
        print(f"    layout-like kernels ({st['layout_kernel_pct']}% of kernel time):")
        for k, v in st["layout_kernels"].items():
            print(f"      x{v['count']:<5d} {v['total_us']:9.1f} us {k[:150]}")
    print(f"    launches: {st['cuda_launches']} (graph launches {st['graph_launches']}), "
          f"python_function events: {st['python_function_events']}")


# --------------------------------------------------------------------------- one record


def cleanup(device) -> None:
    gc.collect()
    if is_cuda(device):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def record_one(mod, variant: str, device, out_dir: str, *, active: int = 5,
               with_stack: bool | None = None, file_name: str | None = None) -> dict:
    """Build, warm up, measure and profile one (workload, variant). Returns a manifest entry."""
    if with_stack is None:
        with_stack = bool(getattr(mod, "WITH_STACK", False))
    file_name = file_name or f"{mod.NAME}__{variant}.json.gz"
    path = os.path.join(out_dir, file_name)
    entry = {
        "file": file_name,
        "workload": mod.NAME,
        "variant": variant,
        "expected_kind": mod.EXPECTED_KIND,
        "description": mod.DESCRIPTION[variant],
        "fix": getattr(mod, "FIX", None),
        "with_stack": with_stack,
        "record_shapes": True,
        "steps_profiled": active,
        "profiler_schedule": {"wait": 1, "warmup": 2, "active": active},
    }
    if variant != "before":
        entry["fixed"] = True
    step = None
    try:
        t0 = time.perf_counter()
        step = mod.make(variant, device)
        for _ in range(getattr(mod, "WARMUP_STEPS", 5)):
            step()
        sync(device)
        t_build = time.perf_counter() - t0
        m = measure_step_time(step, device)
        entry["step_time_ms"] = {k: m[k] for k in ("median_ms", "min_ms", "max_ms")}
        entry["measure"] = {k: m[k] for k in ("steps_per_block", "blocks", "block_ms")}
        print(f"[{mod.NAME}/{variant}] build+warmup {t_build:.1f}s, step median {m['median_ms']:.3f} ms "
              f"(min {m['min_ms']:.3f}, max {m['max_ms']:.3f}, N={m['steps_per_block']})", flush=True)
        t1 = time.perf_counter()
        profile_step(step, device, path, with_stack, active=active)
        print(f"[{mod.NAME}/{variant}] profiled + exported in {time.perf_counter()-t1:.1f}s -> {path}",
              flush=True)
        entry.update(getattr(step, "info", {}) or {})
    finally:
        if step is not None:
            try:
                close_step(step)
            except Exception:
                traceback.print_exc()
        del step
        cleanup(device)
    st = trace_stats(path)
    print_stats(f"{mod.NAME}/{variant}", st)
    entry["trace_stats"] = st
    return entry
