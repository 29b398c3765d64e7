#!/usr/bin/env python3
"""Record every sample workload (before/after) as a gzipped PyTorch profiler trace.

    python sample_traces/record_all.py --out sample_traces --seed-out benchmarks/seed

Writes <out>/<workload>__<variant>.json.gz, <out>/manifest.json and (unless --no-seed)
<seed-out>/small_conv_with_stack.json.gz, then prints a summary table and the top GPU
kernels of each trace.  --cpu (or TI_CPU=1) runs tiny CPU versions as a smoke test.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# Kineto leaves CUPTI attached after a profiler session unless told otherwise: the workloads timed after
# the first profiled one then ran slow where launch-bound (matrix/record_matrix.py says more). The traces
# in this folder were recorded before this line; their manifest's environment has no "teardown_cupti".
os.environ.setdefault("TEARDOWN_CUPTI", "1")

import torch  # noqa: E402

from workloads import ALL  # noqa: E402
from workloads import common  # noqa: E402


def env_info() -> dict:
    info = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "teardown_cupti": os.environ.get("TEARDOWN_CUPTI"),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if torch.cuda.is_available() and not common.cpu_mode():
        info["gpu"] = torch.cuda.get_device_name(0)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            name, driver, mem = [s.strip() for s in out.stdout.strip().splitlines()[0].split(",")]
            info.update({"gpu_nvidia_smi": name, "driver": driver, "gpu_memory": mem})
        except Exception as e:  # noqa: BLE001
            info["driver"] = f"unknown ({e})"
    else:
        info["gpu"] = None
    return info


# --------------------------------------------------------------------------- per-trace checks

def _has_tf32(name: str) -> bool:
    n = name.lower()
    return "tf32" in n


def checks_for(entry: dict) -> dict:
    st = entry.get("trace_stats") or {}
    w, v = entry["workload"], entry["variant"]
    c = {"profiler_steps>=5": st.get("profiler_steps", 0) >= 5}
    if not common.cpu_mode():
        c["has_kernels"] = st.get("kernel_events", 0) > 0
    else:
        return c
    top = [k["name"] for k in st.get("top_kernels", [])]
    memcpy = st.get("memcpy", {})
    sync_calls = st.get("sync_runtime_calls", {})
    ops = st.get("sync_ops", {})
    if w == "sync_mask_loss":
        if v == "before":
            c["stream_sync_or_d2h"] = any(k in sync_calls for k in ("cudaStreamSynchronize", "cudaMemcpyAsync"))
            c["nonzero_and_item_ops"] = "aten::nonzero" in ops and "aten::item" in ops
        else:
            c["no_item_no_nonzero"] = "aten::item" not in ops and "aten::nonzero" not in ops
            c["no_stream_sync"] = "cudaStreamSynchronize" not in sync_calls
    if w == "pageable_h2d":
        if v == "before":
            c["pageable_memcpy"] = any("Pageable" in k for k in memcpy)
        else:
            c["pinned_memcpy_only"] = any("Pinned" in k for k in memcpy) and \
                not any("HtoD (Pageable" in k for k in memcpy)
    if w == "layout_nchw_fp16" and v == "before":
        c["layout_kernels"] = bool(st.get("layout_kernels"))
    if w == "fp32_matmul" and top:
        gemms = [k for k in top if "gemm" in k.lower() or "xmma" in k.lower()]
        if v == "before":
            c["top_gemm_not_tf32"] = bool(gemms) and not any(_has_tf32(k) for k in gemms)
        else:
            c["top_gemm_tf32"] = bool(gemms) and _has_tf32(gemms[0])
    if w.startswith("launch_") and v == "after":
        c["graph_launches"] = st.get("graph_launches", 0) > 0
    if w == "healthy_bf16_matmul":
        c["gpu_busy>=90%"] = (st.get("gpu_busy_pct") or 0) >= 90
    return c


# --------------------------------------------------------------------------- seed

class _SeedWorkload:
    NAME = "small_conv_with_stack"
    EXPECTED_KIND = "launch_overhead"
    WITH_STACK = True
    FIX = None
    DESCRIPTION = {"before": "parser-benchmark seed: tiny conv net (launch_tiny_conv model) training at batch 8, "
                             "eager, with_stack=True, record_shapes=True, 10 active steps"}

    @staticmethod
    def make(variant, device):
        from workloads import launch_tiny_conv
        return launch_tiny_conv.make("before", device, batch=8)


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="output dir for traces + manifest.json")
    ap.add_argument("--seed-out", default=os.path.join(os.path.dirname(HERE), "benchmarks", "seed"))
    ap.add_argument("--only", nargs="*", help="workload names to run (default: all)")
    ap.add_argument("--no-seed", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="tiny CPU smoke test (same as TI_CPU=1)")
    args = ap.parse_args(argv)
    if args.cpu:
        os.environ["TI_CPU"] = "1"
    os.makedirs(args.out, exist_ok=True)
    device = common.pick_device()
    t_start = time.perf_counter()
    env = env_info()
    manifest = {"gpu": env.get("gpu"), "torch": env["torch"], "cuda": env["cuda"], "driver": env.get("driver"),
                "date_utc": env["date_utc"], "environment": env, "device": str(device),
                "command": "python sample_traces/record_all.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "step_time_method": ("un-profiled: after warm-up, 5 blocks of N steps (N so a block takes >=0.3 s), "
                                     "torch.cuda.synchronize() at the end of each block; step = block time / N"),
                "traces": [], "failures": []}
    print(json.dumps(manifest["environment"], indent=1), flush=True)
    man_path = os.path.join(args.out, "manifest.json")

    def save():
        manifest["total_wall_s"] = round(time.perf_counter() - t_start, 1)
        with open(man_path, "w") as f:
            json.dump(manifest, f, indent=1)

    names = args.only or ALL
    for name in names:
        try:
            mod = importlib.import_module(f"workloads.{name}")
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            manifest["failures"].append({"workload": name, "variant": None, "error": traceback.format_exc()})
            continue
        prep = None
        if hasattr(mod, "prepare"):
            try:
                t0 = time.perf_counter()
                prep = mod.prepare(device)
                print(f"[{name}] prepare done in {time.perf_counter()-t0:.1f}s", flush=True)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                manifest["failures"].append({"workload": name, "variant": "prepare", "error": traceback.format_exc()})
        for variant in mod.VARIANTS:
            print(f"\n===== {name} / {variant} =====", flush=True)
            try:
                entry = common.record_one(mod, variant, device, args.out)
                if prep is not None:
                    entry["prepare"] = prep
                entry["checks"] = checks_for(entry)
                print(f"    checks: {entry['checks']}", flush=True)
                manifest["traces"].append(entry)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                common.cleanup(device)
                manifest["failures"].append({"workload": name, "variant": variant, "error": traceback.format_exc()})
            save()

    if not args.no_seed and not args.only:
        print("\n===== benchmark seed: small_conv_with_stack =====", flush=True)
        try:
            os.makedirs(args.seed_out, exist_ok=True)
            entry = common.record_one(_SeedWorkload, "before", device, args.seed_out, active=10,
                                      with_stack=True, file_name="small_conv_with_stack.json.gz")
            entry["path"] = os.path.join("benchmarks", "seed", entry["file"])
            entry["checks"] = checks_for(entry)
            entry["checks"]["profiler_steps>=10"] = entry["trace_stats"]["profiler_steps"] >= 10
            manifest["benchmark_seed"] = entry
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            manifest["failures"].append({"workload": "benchmark_seed", "variant": "before",
                                         "error": traceback.format_exc()})
        save()

    # ---- speedups + summary table
    by = {(e["workload"], e["variant"]): e for e in manifest["traces"]}
    for e in manifest["traces"]:
        b = by.get((e["workload"], "before"))
        if e["variant"] != "before" and b:
            e["speedup_vs_before"] = round(b["step_time_ms"]["median_ms"] / e["step_time_ms"]["median_ms"], 3)
            e["faster_than_before"] = e["step_time_ms"]["median_ms"] < b["step_time_ms"]["median_ms"]
    save()
    print("\n" + "=" * 120)
    print(f"{'workload':22s} {'variant':7s} {'median ms':>10s} {'min':>9s} {'max':>9s} {'speedup':>8s} "
          f"{'steps':>5s} {'kern/st':>8s} {'busy%':>6s} {'MB gz':>6s}  checks")
    for e in manifest["traces"] + ([manifest["benchmark_seed"]] if "benchmark_seed" in manifest else []):
        m, st = e["step_time_ms"], e["trace_stats"]
        sp = e.get("speedup_vs_before")
        bad = [k for k, ok in e.get("checks", {}).items() if not ok]
        print(f"{e['workload']:22s} {e['variant']:7s} {m['median_ms']:10.3f} {m['min_ms']:9.3f} {m['max_ms']:9.3f} "
              f"{(f'{sp:.2f}x' if sp else ''):>8s} {st['profiler_steps']:5d} {st['kernels_per_step']:8.1f} "
              f"{str(st.get('gpu_busy_pct')):>6s} {st['file_bytes']/1e6:6.2f}  {'OK' if not bad else 'FAIL ' + ','.join(bad)}")
    for f in manifest["failures"]:
        print(f"FAILED: {f['workload']} / {f['variant']}")
    print(f"total wall {time.perf_counter()-t_start:.1f}s; manifest -> {man_path}")
    return 0 if not manifest["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
