#!/usr/bin/env python3
"""Record the validation matrix: every workload variant, un-profiled timings + two profiled traces.

    python sample_traces/matrix/record_matrix.py --out sample_traces/matrix      # on a GPU
    TI_CPU=1 python sample_traces/matrix/record_matrix.py --out /tmp/mx          # CPU smoke test

In ONE process, for each workload in workloads.ALL and each of its variants:
  1. build the step (``make(variant, device)``) and run WARMUP_STEPS eager warm-up steps;
  2. un-profiled timing: 10 blocks of N steps (N >= 5, chosen so a block takes >= ~40 ms),
     torch.cuda.synchronize() at the end of each block; step time = block time / N;
     median / p10 / p90 / min / max over the 10 per-block values (>= 50 timed steps);
  3. two profiled runs with torch.profiler (schedule wait=1, warmup=2, active=5, prof.step()
     after each step, activities CPU+CUDA), settings
        default: record_shapes=False, with_stack=False
        stack:   record_shapes=True,  with_stack=True
     (--settings picks others: shapes = record_shapes=True alone, memory = profile_memory=True, memory_stack
     = profile_memory with stacks and shapes)
     exported with export_chrome_trace and gzipped to
        <out>/<gpu>/<workload>__<variant>__<setting>.json.gz
Trace-only workloads (cold_first_step, compile_capture) define record(rec, device) and use
other schedules (wait=0, warmup=0) for their cold traces.

<out>/<gpu>/manifest.json: top-level GPU / torch / CUDA / cuDNN / driver / date;
``entries``: one per (workload, variant) with the un-profiled timing (step_ms) and its traces;
``traces``: one per trace file; ``failures`` / ``skipped``.  Failures are caught per variant.
``--deadline S`` skips the remaining work once S seconds have passed (recorded under skipped).

TEARDOWN_CUPTI=1 (unless set otherwise): Kineto leaves CUPTI attached after a profiler session unless
told to tear it down (pytorch/pytorch#144455), and every variant timed after the process's first
profiled one then ran slow where the step is launch-bound. Found 2026-11-26
(benchmarks/sync_removal_probe.py): holdout3_grad_clip_item's step on an H200, 3.42 ms fresh, 4.08 ms
after one profiler session (TEARDOWN_CUPTI=0), 3.44 ms after one with TEARDOWN_CUPTI=1. Runs recorded
before that date (manifest environment without "teardown_cupti") timed their first variant clean and
the rest with CUPTI attached.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib
import json
import math
import os
import re
import shutil
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.dirname(HERE)
sys.path.insert(0, SAMPLE)          # -> ``import workloads`` (existing) and ``import matrix``
os.environ.setdefault("TEARDOWN_CUPTI", "1")      # before torch: un-profiled timings after a session stay clean

import torch  # noqa: E402

from workloads import common  # noqa: E402

SETTINGS = {
    "default": {"record_shapes": False, "with_stack": False},
    "stack": {"record_shapes": True, "with_stack": True},
    # record_shapes alone, and profile_memory (an instant event per allocation and free): --settings, not in
    # the default matrix
    "shapes": {"record_shapes": True, "with_stack": False},
    "memory": {"record_shapes": False, "with_stack": False, "profile_memory": True},
    "memory_stack": {"record_shapes": True, "with_stack": True, "profile_memory": True},
}
DEFAULT_SETTINGS = ("default", "stack")


def gpu_label(name: str | None) -> str:
    if not name:
        return "cpu"
    m = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", name)
    return (m.group(1) if m else re.sub(r"[^a-z0-9]+", "_", name.lower())).lower()


def env_info(device) -> dict:
    import platform
    import subprocess
    import datetime as dt
    info = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "device": str(device),
    }
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        info["triton"] = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if common.is_cuda(device):
        p = torch.cuda.get_device_properties(0)
        info.update({"gpu": torch.cuda.get_device_name(0), "gpu_capability": f"{p.major}.{p.minor}",
                     "gpu_sm_count": p.multi_processor_count,
                     "gpu_total_memory_MiB": p.total_memory // 2**20})
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            f = [s.strip() for s in out.stdout.strip().splitlines()[0].split(",")]
            info.update({"gpu_nvidia_smi": f[0], "driver": f[1], "gpu_memory": f[2], "gpu_max_sm_clock": f[3]})
        except Exception as e:  # noqa: BLE001
            info["driver"] = f"unknown ({e})"
    else:
        info["gpu"] = None
    return info


class Recorder:
    def __init__(self, out_dir, device, deadline_s=None, settings=None):
        self.out_dir = out_dir
        self.device = device
        self.cuda = common.is_cuda(device)
        self.settings = list(settings or DEFAULT_SETTINGS)
        self.t_start = time.perf_counter()
        self.deadline_s = deadline_s
        self.manifest = None     # set by main
        self.cpu = common.cpu_mode() or not self.cuda

    # ------------------------------------------------------------------ helpers
    def elapsed(self):
        return time.perf_counter() - self.t_start

    def past_deadline(self):
        return self.deadline_s is not None and self.elapsed() > self.deadline_s

    def sync(self):
        common.sync(self.device)

    def cleanup(self):
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def save(self):
        self.manifest["total_wall_s"] = round(self.elapsed(), 1)
        tmp = os.path.join(self.out_dir, "manifest.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.manifest, f, indent=1)
        os.replace(tmp, os.path.join(self.out_dir, "manifest.json"))

    # ------------------------------------------------------------------ entries
    def new_entry(self, mod, variant):
        e = {
            "workload": mod.NAME,
            "variant": variant,
            "role": getattr(mod, "ROLE", "pair"),
            "is_before": variant == "before",
            "expected_kind": mod.EXPECTED_KIND,
            "fix": getattr(mod, "FIX", None),
            "description": mod.DESCRIPTION[variant],
            "module": f"sample_traces/matrix/workloads/{mod.__name__.rsplit('.', 1)[-1]}.py",
        }
        for k in ("EXPECTED_ALSO", "EXPECTED_NOT", "EXPECTED_ADVICE", "SOURCE", "PER_SAMPLE"):
            if hasattr(mod, k):
                e[k.lower()] = getattr(mod, k)
        e["traces"] = {}
        return e

    def add_entry(self, e):
        self.manifest["entries"].append(e)
        self.save()

    # ------------------------------------------------------------------ measuring
    def measure_into(self, entry, step, blocks=10, min_steps=5):
        block_s = 0.004 if self.cpu else 0.04
        n = 1
        while True:                                  # calibrate
            self.sync()
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            self.sync()
            dt = time.perf_counter() - t0
            if dt >= block_s / 2 or n >= 4096:
                break
            n *= 2
        per = dt / n
        N = max(min_steps, math.ceil(block_s / per))
        vals = []
        for _ in range(blocks):
            self.sync()
            t0 = time.perf_counter()
            for _ in range(N):
                step()
            self.sync()
            vals.append((time.perf_counter() - t0) / N * 1e3)
        q = statistics.quantiles(vals, n=10, method="inclusive")   # q[0]=p10, q[-1]=p90
        entry["step_ms"] = {"median": round(statistics.median(vals), 4), "p10": round(q[0], 4),
                            "p90": round(q[-1], 4), "min": round(min(vals), 4), "max": round(max(vals), 4),
                            "n_steps": N * blocks}
        entry["timing"] = {"blocks": blocks, "steps_per_block": N, "block_ms": [round(v, 4) for v in vals],
                           "calibration_ms": round(per * 1e3, 4)}
        return entry["step_ms"]

    # ------------------------------------------------------------------ profiling
    def profile_into(self, entry, step, setting, wait=1, warmup=2, active=5):
        opts = SETTINGS[setting]
        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        fname = f"{entry['workload']}__{entry['variant']}__{setting}.json.gz"
        path = os.path.join(self.out_dir, fname)
        raw = path[:-3]
        sched = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1)
        t0 = time.perf_counter()
        self.sync()
        with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=opts["record_shapes"],
                                    with_stack=opts["with_stack"],
                                    profile_memory=opts.get("profile_memory", False)) as prof:
            for _ in range(wait + warmup + active):
                step()
                prof.step()
            self.sync()
        t1 = time.perf_counter()
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f_in, gzip.open(path, "wb", compresslevel=9) as f_out:
            shutil.copyfileobj(f_in, f_out)
        os.remove(raw)
        t2 = time.perf_counter()
        tr = {
            "file": fname,
            "workload": entry["workload"],
            "variant": entry["variant"],
            "profile": setting,
            "record_shapes": opts["record_shapes"],
            "with_stack": opts["with_stack"],
            "profile_memory": opts.get("profile_memory", False),
            "activities": ["CPU"] + (["CUDA"] if self.cuda else []),
            "schedule": {"wait": wait, "warmup": warmup, "active": active, "repeat": 1},
            "steps_profiled": active,
            "expected_kind": entry["expected_kind"],
            "fix": entry["fix"],
            "description": entry["description"],
            "bytes": os.path.getsize(path),
            "profile_wall_s": round(t1 - t0, 2),
            "export_wall_s": round(t2 - t1, 2),
        }
        entry["traces"][setting] = fname
        self.manifest["traces"].append(tr)
        print(f"    [{setting}] {fname}: {tr['bytes']/1e3:.0f} kB, run {tr['profile_wall_s']}s, "
              f"export {tr['export_wall_s']}s", flush=True)
        return tr

    # ------------------------------------------------------------------ one variant
    def record_variant(self, mod, variant):
        label = f"{mod.NAME}/{variant}"
        if self.past_deadline():
            print(f"SKIP {label}: past deadline ({self.elapsed():.0f}s)", flush=True)
            self.manifest["skipped"].append({"workload": mod.NAME, "variant": variant, "reason": "deadline"})
            return None
        print(f"\n===== {label}  (t={self.elapsed():.0f}s) =====", flush=True)
        entry = self.new_entry(mod, variant)
        step = None
        try:
            t0 = time.perf_counter()
            step = mod.make(variant, self.device)
            for _ in range(getattr(mod, "WARMUP_STEPS", 5)):
                step()
            self.sync()
            entry["build_warmup_s"] = round(time.perf_counter() - t0, 2)
            m = self.measure_into(entry, step)
            print(f"    un-profiled: median {m['median']:.4f} ms (p10 {m['p10']:.4f}, p90 {m['p90']:.4f}, "
                  f"n={m['n_steps']}), build+warmup {entry['build_warmup_s']}s", flush=True)
            for setting in self.settings:
                self.profile_into(entry, step, setting)
            entry["info"] = dict(getattr(step, "info", {}) or {})
            self.add_entry(entry)
            return entry
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            print(f"FAILED {label}:\n{tb}", flush=True)
            self.manifest["failures"].append({"workload": mod.NAME, "variant": variant, "error": tb[-4000:],
                                              "partial_entry": {k: v for k, v in entry.items()}})
            self.save()
            return None
        finally:
            if step is not None:
                try:
                    common.close_step(step)
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
            del step
            try:
                self.cleanup()
            except Exception:  # noqa: BLE001
                traceback.print_exc()

    def record_workload(self, mod):
        custom = getattr(mod, "record", None)
        if custom is None:
            for v in mod.VARIANTS:
                self.record_variant(mod, v)
            return
        if self.past_deadline():
            print(f"SKIP {mod.NAME}: past deadline", flush=True)
            self.manifest["skipped"].append({"workload": mod.NAME, "variant": None, "reason": "deadline"})
            return
        print(f"\n===== {mod.NAME} (custom record, t={self.elapsed():.0f}s) =====", flush=True)
        try:
            custom(self, self.device)
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            print(f"FAILED {mod.NAME}:\n{tb}", flush=True)
            self.manifest["failures"].append({"workload": mod.NAME, "variant": None, "error": tb[-4000:]})
            self.save()
            self.cleanup()


def add_speedups(manifest):
    by = {(e["workload"], e["variant"]): e for e in manifest["entries"]}
    for e in manifest["entries"]:
        b = by.get((e["workload"], "before"))
        if e["variant"] == "before" or e["role"] != "pair" or not b or not e.get("step_ms") or not b.get("step_ms"):
            continue
        sp = b["step_ms"]["median"] / e["step_ms"]["median"]
        if e.get("per_sample"):
            nb = b.get("info", {}).get("samples_per_step", 1)
            na = e.get("info", {}).get("samples_per_step", 1)
            e["per_sample_ms"] = round(e["step_ms"]["median"] / na, 6)
            b["per_sample_ms"] = round(b["step_ms"]["median"] / nb, 6)
            e["speedup_per_step"] = round(sp, 3)
            sp = sp * na / nb
            e["speedup_basis"] = "per sample"
        else:
            e["speedup_basis"] = "per step"
        e["speedup_vs_before"] = round(sp, 3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="output root; traces go to <out>/<gpu label>/")
    ap.add_argument("--label", help="sub-folder name (default: from the GPU name, e.g. h100 / h200; cpu)")
    ap.add_argument("--only", nargs="*", help="workload names (default: all)")
    ap.add_argument("--skip", nargs="*", default=[], help="workload names to leave out")
    ap.add_argument("--deadline", type=float, default=None, help="seconds; skip what is left after this")
    ap.add_argument("--cpu", action="store_true", help="tiny CPU smoke test (same as TI_CPU=1)")
    ap.add_argument("--settings", nargs="*", choices=sorted(SETTINGS), default=list(DEFAULT_SETTINGS),
                    help="profiler settings to record (default: default stack)")
    args = ap.parse_args(argv)
    if args.cpu:
        os.environ["TI_CPU"] = "1"
    from matrix.workloads import ALL

    device = common.pick_device()
    env = env_info(device)
    env["teardown_cupti"] = os.environ.get("TEARDOWN_CUPTI")
    label = args.label or gpu_label(env.get("gpu"))
    out_dir = os.path.join(args.out, label)
    os.makedirs(out_dir, exist_ok=True)
    rec = Recorder(out_dir, device, deadline_s=args.deadline, settings=args.settings)
    rec.manifest = {
        "gpu": env.get("gpu"), "gpu_label": label, "torch": env["torch"], "cuda": env["cuda"],
        "cudnn": env["cudnn"], "driver": env.get("driver"), "date_utc": env["date_utc"], "environment": env,
        "command": "python sample_traces/matrix/record_matrix.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "step_time_method": ("un-profiled, after WARMUP_STEPS warm-up steps: 10 blocks of N steps (N >= 5, chosen so a "
                             "block takes >= 40 ms on GPU), torch.cuda.synchronize() at the end of each block; "
                             "step time = block time / N; median/p10/p90/min/max over the 10 blocks; n_steps = 10*N"),
        "profile_settings": {k: SETTINGS[k] for k in args.settings},
        "profile_schedule": {"wait": 1, "warmup": 2, "active": 5, "repeat": 1,
                             "note": "trace-only cold/capture traces use wait=0 warmup=0 active=5"},
        "entries": [], "traces": [], "failures": [], "skipped": [],
    }
    print(json.dumps(env, indent=1), flush=True)
    rec.save()
    names = [n for n in (args.only or ALL) if n not in set(args.skip)]
    for name in names:
        try:
            mod = importlib.import_module(f"matrix.workloads.{name}")
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            print(tb, flush=True)
            rec.manifest["failures"].append({"workload": name, "variant": None, "error": tb[-4000:]})
            continue
        try:
            rec.record_workload(mod)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            rec.manifest["skipped"].append({"workload": name, "variant": None, "reason": "interrupted"})
            break
        add_speedups(rec.manifest)
        rec.save()

    add_speedups(rec.manifest)
    rec.save()
    print("\n" + "=" * 100)
    print(f"{'workload':26s} {'variant':13s} {'median ms':>10s} {'p10':>9s} {'p90':>9s} {'n':>6s} {'speedup':>8s}")
    for e in rec.manifest["entries"]:
        m = e.get("step_ms") or {}
        sp = e.get("speedup_vs_before")
        print(f"{e['workload']:26s} {e['variant']:13s} {m.get('median', float('nan')):10.4f} "
              f"{m.get('p10', float('nan')):9.4f} {m.get('p90', float('nan')):9.4f} {m.get('n_steps', 0):6d} "
              f"{(f'{sp:.2f}x' if sp else ''):>8s}")
    for f in rec.manifest["failures"]:
        print(f"FAILED: {f['workload']} / {f['variant']}: {f['error'].strip().splitlines()[-1]}")
    for s in rec.manifest["skipped"]:
        print(f"SKIPPED: {s}")
    total = sum(t["bytes"] for t in rec.manifest["traces"])
    print(f"{len(rec.manifest['traces'])} traces, {total/1e6:.2f} MB; total wall {rec.elapsed():.1f}s -> {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
