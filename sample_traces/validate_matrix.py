#!/usr/bin/env python3
"""The estimate against measured fixes: every pair of sample_traces/matrix, on each GPU and profiler
setting, analyzed from its profiled "before" trace only.

    python sample_traces/validate_matrix.py [--write] [--jobs N]

Per row: the fix that was measured (the after variant), the finding the tool ranks first, the
predicted speed-up of the measured fix (with its range), the measured speed-up (un-profiled medians
over >= 50 steps), the error, and the tool's un-profiled step estimate against the measured one.
Predicted speed-up = U / (U - S): U the tool's un-profiled step, S the estimated saving of the fix
(for a fix that is a plan, e.g. syncs removed then a CUDA graph, the plan's cumulative saving).
--write puts the table into sample_traces/matrix/validation.md.
"""
from __future__ import annotations

import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
MATRIX = HERE / "matrix"
sys.path.insert(0, str(HERE.parent))

# The fix measured by each after variant, as the tool's kinds: one kind, or a plan (kinds in order).
MEASURED_FIX = {
    "after_nosync": ("sync_stall",),
    "after_graph": ("sync_stall", "launch_overhead"),
}
# Pairs whose "after" changes the work per step (the comparison is per sample), not a fix of this step.
NOT_COMPARABLE = {"large_vs_small_batch"}


def _analyze(path: str) -> dict:
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(Path(path)))
    return {"findings": d["findings"], "minor": d["minor_findings"], "healthy": d["healthy"], "summary": d["summary"],
            "plan": (d["whatif"] or {}).get("plan") or [], "verdict": d["verdict"]}


def _saving(doc: dict, kinds: tuple) -> tuple[float | None, list | None]:
    if len(kinds) > 1:
        plan = doc["plan"]
        got = [r for r in plan if r["kind"] in kinds]
        if not got:
            return None, None
        return max(r["cumulative_saves_ms"] for r in got), None
    f = next((x for x in doc["findings"] + doc["minor"] if x["kind"] == kinds[0]), None)
    # Not reported at all: the tool says this fix saves (almost) nothing.
    return (f["estimated_savings_ms"], f["savings_range_ms"]) if f else (0.0, None)


def rows(jobs: int = 2) -> list[dict]:
    todo = []
    for gpu in ("h100", "h200"):
        man = json.loads((MATRIX / gpu / "manifest.json").read_text())
        by = {(e["workload"], e["variant"]): e for e in man["entries"]}
        for (wl, var), e in sorted(by.items()):
            if e["role"] == "healthy":
                for setting, f in e["traces"].items():
                    todo.append((gpu, setting, wl, var, None, e, MATRIX / gpu / f))
            if e["role"] != "pair" or var == "before" or wl in NOT_COMPARABLE:
                continue
            before = by.get((wl, "before"))
            if not before:
                continue
            for setting, f in before["traces"].items():
                todo.append((gpu, setting, wl, var, e, before, MATRIX / gpu / f))
    paths = sorted({str(t[-1]) for t in todo})
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        docs = dict(zip(paths, ex.map(_analyze, paths)))
    out = []
    for gpu, setting, wl, var, after, before, path in todo:
        d = docs[str(path)]
        top = d["findings"][0]["kind"] if d["findings"] else ("healthy" if d["healthy"] else "-")
        u = d["summary"].get("unprofiled_step_ms") or d["summary"]["median_step_ms"]
        meas_before = before["step_ms"]["median"]
        row = {"gpu": gpu, "setting": setting, "workload": wl, "variant": var, "top": top,
               "profiled_ms": d["summary"]["median_step_ms"], "unprofiled_est_ms": u,
               "unprofiled_ms": meas_before, "deinflated_err_pct": round(100 * (u - meas_before) / meas_before, 1),
               "healthy": d["healthy"]}
        if after is None:
            row.update(kind="healthy", ok_top=d["healthy"])
        else:
            kinds = MEASURED_FIX.get(var, (before["expected_kind"],))
            s, rng = _saving(d, kinds)
            meas = meas_before / after["step_ms"]["median"]
            pred = u / (u - s) if s is not None and u - s > 0 else None
            lo_hi = [u / (u - x) if u - x > 0 else None for x in rng] if rng else None
            row.update(kind="+".join(kinds), saving_ms=s, meas_speedup=round(meas, 2),
                       pred_speedup=round(pred, 2) if pred else None,
                       pred_range=[round(x, 2) if x else None for x in lo_hi] if lo_hi else None,
                       err_pct=round(100 * (pred - meas) / meas, 1) if pred else None,
                       ok_top=top == kinds[-1] or top in kinds)
        out.append(row)
    return out


def table(rs: list[dict]) -> str:
    lines = ["| GPU | profiler | workload (after) | measured fix | top finding | predicted speed-up (range) | "
             "measured | error | un-profiled step: tool / measured (error) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        if r["kind"] == "healthy":  # noqa: SIM114
            lines.append(f"| {r['gpu']} | {r['setting']} | {r['workload']} | (healthy) | {r['top']} | - | - | - | "
                         f"{r['unprofiled_est_ms']:.3f} / {r['unprofiled_ms']:.3f} ({r['deinflated_err_pct']:+.0f}%) |")
            continue
        pred = f"{r['pred_speedup']:.2f}x" if r["pred_speedup"] else "not found"
        if r.get("pred_range") and all(r["pred_range"]):
            pred += f" ({r['pred_range'][0]:.2f}-{r['pred_range'][1]:.2f})"
        err = f"{r['err_pct']:+.0f}%" if r["err_pct"] is not None else "-"
        lines.append(f"| {r['gpu']} | {r['setting']} | {r['workload']} ({r['variant']}) | `{r['kind']}` | "
                     f"`{r['top']}` | {pred} | {r['meas_speedup']:.2f}x | {err} | "
                     f"{r['unprofiled_est_ms']:.3f} / {r['unprofiled_ms']:.3f} ({r['deinflated_err_pct']:+.0f}%) |")
    return "\n".join(lines)


def summary(rs: list[dict]) -> str:
    pairs = [r for r in rs if r["kind"] != "healthy"]
    errs = [abs(r["err_pct"]) for r in pairs if r["err_pct"] is not None]
    found = len(errs)
    w25 = sum(e <= 25 for e in errs)
    w50 = sum(e <= 50 for e in errs)
    top = sum(r["ok_top"] for r in pairs)
    de = [abs(r["deinflated_err_pct"]) for r in rs]
    healthy = [r for r in rs if r["kind"] == "healthy"]
    return (f"{len(pairs)} pair rows: measured fix found in {found}; predicted speed-up within 25% of the measured "
            f"one in {w25}/{len(pairs)}, within 50% in {w50}/{len(pairs)}; the measured fix ranked first in "
            f"{top}/{len(pairs)}. Un-profiled step estimate within 15% of the measured median in "
            f"{sum(e <= 15 for e in de)}/{len(de)} traces. Healthy workloads called healthy: "
            f"{sum(r['healthy'] for r in healthy)}/{len(healthy)}.")


if __name__ == "__main__":
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 2
    rs = rows(jobs)
    text = table(rs) + "\n\n" + summary(rs) + "\n"
    print(text)
    (MATRIX / "validation.json").write_text(json.dumps(rs, indent=1) + "\n") if "--write" in sys.argv else None
    if "--write" in sys.argv:
        (MATRIX / "validation.md").write_text(
            "# Estimates against measured fixes (matrix)\n\nGenerated by `python sample_traces/validate_matrix.py "
            "--write`; see its docstring for the method.\n\n" + text)
