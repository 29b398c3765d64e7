"""Score traceinsight's job reports against measured fixes of real two-GPU NCCL jobs (the held-out set 31 and
comm_bound -> accumulate4): per pair, profiler setting and rank scored, the rank's top finding, its estimated
saving as a predicted speed-up of the job's step, and the measured speed-up (un-profiled medians, rank 0's
clock around a barrier: the job's step).

    python sample_traces/nccl/score_jobs.py [--markdown]
    python sample_traces/nccl/score_jobs.py --unprofiled     (the jobs' un-profiled step against the measured)

Which rank a pair is scored on: the one the fix changes. A fix every rank makes (DataLoader workers, a fused
optimizer) is scored on every rank; a fix one rank makes (rank 0's logging) on that rank, which the job
report must also name as the straggler. The predicted speed-up is that rank's un-profiled step estimate u
over u less the estimated saving of the fix's finding, as in validate_matrix.py. A rank's estimate holds the
other ranks as they are (a rank that waits for another keeps that wait), so on a fix every rank makes, the
rank the job report shows (the straggler's, else the median rank's; * in the table) is the job's answer.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from traceinsight.job import analyze_job, focus_rank  # noqa: E402

# (job folder, before, after, kinds the fix addresses (the first is the one it is named for), ranks the fix
# changes, the straggler the job report must name (None: no requirement)); registered before recording
# (sample_traces/nccl/README.md).
PAIRS = [
    ("h200x2", "comm_bound", "accumulate4", ("exposed_communication",), (0, 1), None),
    ("h200x2_set31A", "loader_workers0", "loader_workers4", ("host_bound",), (0, 1), None),
    ("h200x2_set31A", "rank0_metrics", "rank0_metrics_deferred", ("sync_stall", "host_bound"), (0,), 0),
    ("h200x2_set31A", "unfused_adam", "fused_adam", ("unfused_optimizer",), (0, 1), None),
    ("h200x2_set31B", "loader_workers0", "loader_workers4", ("host_bound",), (0, 1), None),
    ("h200x2_set31B", "rank0_metrics", "rank0_metrics_deferred", ("sync_stall", "host_bound"), (0,), 0),
    ("h200x2_set31B", "unfused_adam", "fused_adam", ("unfused_optimizer",), (0, 1), None),
    # Set 32 (registered before recording): set 31's pairs again on a new lease, and a straggler-only loader,
    # scored on the straggler (its loading) and on the rank that waits for it (the other rank in time).
    ("h200x2_set32A", "loader_workers0", "loader_workers4", ("host_bound",), (0, 1), None),
    ("h200x2_set32A", "rank0_metrics", "rank0_metrics_deferred", ("sync_stall", "host_bound"), (0,), 0),
    ("h200x2_set32A", "unfused_adam", "fused_adam", ("unfused_optimizer",), (0, 1), None),
    ("h200x2_set32A", "rank1_loader_workers0", "loader_workers4", ("host_bound",), (1,), 1),
    ("h200x2_set32A", "rank1_loader_workers0", "loader_workers4", ("collective_wait",), (0,), 1),
]
# Set 33 (registered before recording, twice on one lease: A and B): unfused_adam's fixes side by side (the fused
# optimizer, the whole step in one CUDA graph, both), and the graph of the fused program.
for _job in ("h200x2_set33A", "h200x2_set33B"):
    PAIRS += [
        (_job, "unfused_adam", "fused_adam", ("unfused_optimizer",), (0, 1), None),
        (_job, "unfused_adam", "unfused_adam_graph", ("launch_overhead",), (0, 1), None),
        (_job, "unfused_adam", "fused_adam_graph", ("unfused_optimizer", "launch_overhead"), (0, 1), None),
        (_job, "fused_adam", "fused_adam_graph", ("launch_overhead",), (0, 1), None),
    ]
# Fixes made of several kinds in order (the fused optimizer, then the graph): scored on the report's fix plan, each
# fix replayed on top of the ones before it (as validate_matrix.py scores its plans).
PLANS = {("unfused_adam", "fused_adam_graph")}
SETTINGS = {"default": "", "stack": "__stack"}


def _step(manifest: dict, variant: str) -> float:
    """The un-profiled step per micro-batch (accumulate4 runs 4 a step: compared per sample)."""
    return manifest["variants"][variant]["step_ms"]["per_micro_batch_median"]


def score(root: Path = HERE, pairs=PAIRS) -> list[dict]:
    rows = []
    for job, before, after, kinds, ranks, straggler in pairs:
        folder = root / job
        if not (folder / "manifest.json").exists():
            continue
        manifest = json.loads((folder / "manifest.json").read_text())
        meas = _step(manifest, before) / _step(manifest, after)
        for setting, suffix in SETTINGS.items():
            traces = folder / f"{before}{suffix}"
            if not traces.is_dir():
                continue
            block = analyze_job([traces], workers=1, full_ranks=ranks)
            named = block["straggler"]["rank"]
            # The rank whose report the job's HTML and Markdown show (the straggler's, else the rank that arrives
            # last, else the median rank's).
            focus = focus_rank(block)
            for rank in ranks:
                rep = block["rank_reports"].get(str(rank))
                if rep is None:
                    continue
                top = rep["findings"][0]["kind"] if rep["findings"] else ("healthy" if rep["healthy"] else "-")
                u = rep["summary"].get("unprofiled_step_ms") or rep["summary"]["median_step_ms"]
                if (before, after) in PLANS:
                    plan = (rep.get("whatif") or {}).get("plan") or []
                    got = [r for r in plan if r["kind"] in kinds or set(r.get("prerequisite_for") or ()) & set(kinds)]
                    s = round(sum(r["saves_ms"] for r in got), 3) if got else None
                else:
                    found = [f for f in rep["findings"] + rep.get("minor_findings", []) if f["kind"] in kinds]
                    s = max((f.get("estimated_savings_ms") or 0.0 for f in found), default=None)
                pred = u / (u - s) if s is not None and u - s > 0 else None
                rows.append({"job": job, "before": before, "after": after, "setting": setting, "rank": rank,
                             "top": top, "fix_kinds": list(kinds), "ok_top": top in kinds,
                             "straggler": named, "ok_straggler": straggler is None or named == straggler,
                             "focus": rank == focus,
                             "profiled_ms": rep["summary"]["median_step_ms"], "unprofiled_est_ms": u,
                             "unprofiled_ms": _step(manifest, before), "saving_ms": s,
                             "pred_speedup": round(pred, 2) if pred else None, "meas_speedup": round(meas, 2),
                             "err_pct": round(100 * (pred - meas) / meas, 1) if pred else None})
    _best_fix(rows)
    return rows


def _best_fix(rows: list[dict]) -> None:
    """Per before-trace and rank: the fix measured to help most among the pairs scored from it (ok_best: the top
    finding is one of its kinds; with one pair it is that pair's ok_top)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["job"], r["before"], r["setting"], r["rank"]), []).append(r)
    for rs in groups.values():
        best = max(rs, key=lambda r: r["meas_speedup"])
        for r in rs:
            r["best_fix"] = best["after"]
            r["ok_best"] = r["top"] in best["fix_kinds"]


def unprofiled(root: Path = HERE) -> list[dict]:
    """Per recorded job trace folder: the job's un-profiled step (the straggler's estimate) against the
    measured median of its variant."""
    out = []
    for man in sorted(root.glob("*/manifest.json")):
        variants = json.loads(man.read_text())["variants"]
        for d in sorted(x for x in man.parent.iterdir() if x.is_dir()):
            v, _, setting = d.name.partition("__")
            meas = variants[v]["step_ms"]["median"]
            u = analyze_job([d], workers=1).get("unprofiled_step_ms")
            out.append({"job": man.parent.name, "variant": v, "setting": setting or "default", "estimate_ms": u,
                        "measured_ms": meas, "err_pct": round(100 * (u - meas) / meas, 1) if u else None})
    return out


def markdown(rows: list[dict]) -> str:
    out = ["| pair | setting | rank | top finding | straggler named | un-profiled step: estimate / measured (ms) "
           "| predicted | measured | error |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['err_pct']:+.0f}%" if r["err_pct"] is not None else "-"
        pred = f"{r['pred_speedup']:.2f}x" if r["pred_speedup"] else "-"
        out.append(f"| {r['job']}: {r['before']} -> {r['after']} | {r['setting']} | {r['rank']}{'*' if r['focus'] else ''} "
                   f"| {r['top']}"
                   f"{'' if r['ok_top'] else ' (x)'} | {r['straggler'] if r['straggler'] is not None else 'none'}"
                   f"{'' if r['ok_straggler'] else ' (x)'} | {r['unprofiled_est_ms']:.2f} / {r['unprofiled_ms']:.2f} "
                   f"| {pred} | {r['meas_speedup']:.2f}x | {err} |")
    for what, rs in (("rows", rows), ("rows on the rank the job report shows", [r for r in rows if r["focus"]])):
        w25 = sum(r["err_pct"] is not None and abs(r["err_pct"]) <= 25 for r in rs)
        w50 = sum(r["err_pct"] is not None and abs(r["err_pct"]) <= 50 for r in rs)
        top = sum(r["ok_top"] and r["ok_straggler"] for r in rs)
        best = sum(r["ok_best"] and r["ok_straggler"] for r in rs)
        out.append(f"\n{len(rs)} {what}: within 25% {w25}, within 50% {w50}, top finding (and straggler) right {top}; "
                   f"the top finding is the fix measured to help most from that trace {best}.")
    return "\n".join(out)


if __name__ == "__main__":
    if "--unprofiled" in sys.argv:
        rows = unprofiled()
        for setting in ("default", "stack"):
            errs = sorted(r["err_pct"] for r in rows if r["setting"] == setting and r["err_pct"] is not None)
            n15 = sum(abs(e) <= 15 for e in errs)
            print(f"{setting}: the job's un-profiled step within 15% of the measured median on {n15} of {len(errs)} "
                  f"traces, median error {errs[len(errs) // 2]:+.0f}%" if errs else f"{setting}: none")
    else:
        rows = score()
        print(markdown(rows) if "--markdown" in sys.argv else json.dumps(rows, indent=1))
