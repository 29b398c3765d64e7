#!/usr/bin/env python3
"""Score the runs of profiler options beyond the matrix's two (README: "profile_memory: the profiler's cost per
allocation event", "record_shapes alone"):

    python sample_traces/matrix/options_check.py [RUN_DIR ...] [--json OUT]

Each RUN_DIR (default: the committed sample_traces/matrix/h200_mem1* and h200_shapes1*) holds one recording
process's traces in some of the settings default, stack, shapes (record_shapes=True alone), memory
(profile_memory=True) and memory_stack (with with_stack and record_shapes too), with the un-profiled medians in
its manifest. The rows are validate_matrix.py's (the same scoring: predicted against measured speed-up, the
un-profiled step against the measured median, the healthy verdict); printed per setting and per set (F: the
workloads a cost was fitted on, in a run's first lease; H: held out).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import validate_matrix as vm  # noqa: E402

# The fit set, registered before recording (README); every other workload, and every trace of a later run, is
# held out.
FIT = {"launch_tiny_conv", "sync_mask_loss", "unfused_optimizer", "sync_and_small_kernels", "item_logging",
       "holdout_adamw_loop", "holdout3_grad_clip_item", "holdout12_multi_item_metrics", "healthy_transformer_bf16",
       "host_preprocess", "holdout27_grad_norm_items", "holdout29_clip_per_tensor"}
FIT_RUNS = {"h200_mem1A", "h200_shapes1A"}
SETTINGS = ("default", "stack", "shapes", "memory", "memory_stack")
RUN_GLOBS = ("h200_mem1*", "h200_shapes1*")


def score(run_dirs: list[Path], jobs: int = 2) -> list[dict]:
    """validate_matrix.rows() over the given run folders (their parent as the matrix, each an H200 run)."""
    out = []
    for d in run_dirs:
        vm.MATRIX, vm.RUNS = d.parent, {d.name: "h200"}
        for r in vm.rows(jobs=jobs):
            r["set"] = "F" if r["run"] in FIT_RUNS and r["workload"] in FIT else "H"
            out.append(r)
    return out


def summary(rows: list[dict]) -> list[str]:
    lines = ["| run | setting | set | traces: U within 15% | pair rows within 25% | within 50% | top right | "
             "healthy right |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for run, s, part in sorted({(r["run"], r["setting"], r["set"]) for r in rows},
                               key=lambda k: (k[0], SETTINGS.index(k[1]), k[2])):
        rs = [r for r in rows if r["run"] == run and r["setting"] == s and r["set"] == part]
        # A before trace is scored once per after variant: count each trace once for U.
        traces = {r["workload"]: r for r in rs}
        u = sum(abs(r["deinflated_err_pct"]) <= 15 for r in traces.values())
        pairs = [r for r in rs if r["kind"] != "healthy" and r["err_pct"] is not None]
        healthy = [r for r in rs if r["kind"] == "healthy"]
        lines.append(f"| {run} | {s} | {part} | {u}/{len(traces)} | {sum(abs(r['err_pct']) <= 25 for r in pairs)}/"
                     f"{len(pairs)} | {sum(abs(r['err_pct']) <= 50 for r in pairs)} | "
                     f"{sum(r['ok_top'] for r in rs if r['kind'] != 'healthy')} | "
                     f"{sum(r['ok_top'] for r in healthy)}/{len(healthy)} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    runs = a.runs or sorted(p for g in RUN_GLOBS for p in HERE.glob(g) if (p / "manifest.json").exists())
    rows = score(runs, a.jobs)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
