"""Why does removing a sync alone make a launch-bound step slower?  (issue 12, "sync removal alone")

On H100 and H200 hosts, three matrix pairs measured their sync fix slower than the step with the sync
(holdout3_grad_clip_item 0.58-0.75x on 3 of 4 hosts: the same kernels, only .item() gone;
holdout11_masked_select_loss 0.77-0.88x; sync_and_small_kernels 0.82x on one H100). This probe runs the
variants un-profiled, blocks of steps interleaved A/B so host drift cancels, and splits each step's time:

  wall_ms       block time / steps (sync at the block's ends only), the matrix's measure
  cpu_ms        the step() call's own time on the CPU (launches, plus the sync's wait where there is one)
  gpu_ms        the GPU's time from the step's first kernel to its last (CUDA events on the stream)
  +sync modes   the fixed step with torch.cuda.synchronize() after each step (a sync without .item())

Run on the GPU machine from the repository root:  python benchmarks/sync_removal_probe.py > $OUT/probe.json
"""
from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sample_traces"))

import torch  # noqa: E402

PAIRS = {
    "holdout3_grad_clip_item": ("before", "after"),
    "holdout11_masked_select_loss": ("before", "after"),
    "sync_and_small_kernels": ("before", "after_nosync"),
    "sync_mask_loss": ("before", "after"),          # a control: its fix measured faster
}


def modes(steps: dict):
    b, a = steps["before"], steps["after"]

    def a_sync():
        a()
        torch.cuda.synchronize()

    def b_sync():
        b()
        torch.cuda.synchronize()
    return {"before": b, "after": a, "after+sync": a_sync, "before+sync": b_sync}


def block(fn, n):
    torch.cuda.synchronize()
    cpu = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(n):
        c0 = time.perf_counter()
        fn()
        cpu.append(time.perf_counter() - c0)
    end.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e3
    return wall, statistics.median(cpu) * 1e3, start.elapsed_time(end) / n


def gpu_only(fn, n=20):
    """The step's GPU time alone: the step's work queued behind a long sleep kernel, so the CPU's
    launches are all done before the GPU starts it (the GPU then runs it back to back)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))      # ~1 s of cycles: the queue fills behind it
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


def profile_once(step, with_stack):
    """A profiler session as the matrix recorder runs one (wait 1, warm-up 2, active 5), trace exported."""
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    sched = torch.profiler.schedule(wait=1, warmup=2, active=5, repeat=1)
    with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=with_stack,
                                with_stack=with_stack) as prof:
        for _ in range(8):
            step()
            prof.step()
        torch.cuda.synchronize()
    prof.export_chrome_trace("/tmp/probe_trace.json")


def measure(out, key, all_steps):
    for name, steps in all_steps.items():
        ms = modes(steps)
        res = {m: {"wall": [], "cpu": [], "gpu_span": []} for m in ms}
        for _ in range(8):                                  # interleaved blocks
            for m, fn in ms.items():
                w, c, g = block(fn, 30)
                res[m]["wall"].append(w)
                res[m]["cpu"].append(c)
                res[m]["gpu_span"].append(g)
        row = {m: {k: round(statistics.median(v), 4) for k, v in d.items()} for m, d in res.items()}
        # (only the fixed step: the one with the sync would wait out the sleep inside each step)
        row["after"]["gpu_alone"] = round(gpu_only(ms["after"]), 4)
        row["after_vs_before_speedup"] = round(row["before"]["wall"] / row["after"]["wall"], 3)
        out[key][name] = row
        print(key, name, json.dumps(row), file=sys.stderr, flush=True)


def main():
    # Phase 1 in a process that never ran the profiler; phase 2 after one profiler session (as the matrix
    # recorder measures every variant but the first: after the previous variant's traces were taken).
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "fresh": {}, "after_profiler": {},
           "after_profiler_stack": {}}
    all_steps = {}
    for name, (vb, va) in PAIRS.items():
        mod = importlib.import_module(f"matrix.workloads.{name}")
        all_steps[name] = {"before": mod.make(vb, "cuda"), "after": mod.make(va, "cuda")}
        for s in all_steps[name].values():
            for _ in range(15):  # warm-up
                s()
    measure(out, "fresh", all_steps)
    profile_once(all_steps["sync_mask_loss"]["before"], with_stack=False)
    measure(out, "after_profiler", all_steps)
    profile_once(all_steps["sync_mask_loss"]["before"], with_stack=True)
    measure(out, "after_profiler_stack", all_steps)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
