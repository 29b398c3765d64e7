#!/usr/bin/env python3
"""The record path end to end: traces `traceinsight record` made on the GPU machine (matrix/record_e2e.sh),
scored against the fixes measured on the same host in the same lease.

    python sample_traces/score_e2e.py LABEL [LABEL...] [--write]

Per workload, fix and profiler setting: record's own un-profiled step (the mean of 60 steps after its window)
against the matrix recorder's median (>= 50 steps, before profiling, same process kind); the predicted
speed-up of the measured fix from record's trace as analyzed (calibrated to record's step) and from the same
trace with that step removed (the cost model's estimate, as for a trace recorded elsewhere); the measured
speed-up (the matrix recorder's medians, before / after). --write puts the table in
matrix/<LABEL>/record/e2e.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import validate_matrix as vm  # noqa: E402


def _doc(path: Path, keep_measured: bool) -> dict:
    from traceinsight.report.analyze import analyze_model
    from traceinsight.report.document import document
    from traceinsight.trace.profiler_cost import measured_unprofiled_us
    model = vm.model_of(path, strip=not keep_measured)
    recorded = measured_unprofiled_us(model)
    d = document(analyze_model(model))
    return {"findings": d["findings"], "minor": d["minor_findings"], "plan": (d["whatif"] or {}).get("plan") or [],
            "u": d["summary"].get("unprofiled_step_ms") or d["summary"]["median_step_ms"],
            "profiled": d["summary"]["median_step_ms"],
            "record_u": round(recorded / 1000, 4) if recorded is not None else None,
            "top": d["findings"][0]["kind"] if d["findings"] else ("healthy" if d["healthy"] else "-")}


def rows(label: str) -> list[dict]:
    run = vm.MATRIX / label
    man = json.loads((run / "manifest.json").read_text())
    by = {(e["workload"], e["variant"]): e for e in man["entries"]}
    out = []
    for trace in sorted((run / "record").glob("*__*/*.json.gz")):
        wl, setting = trace.parent.name.rsplit("__", 1)
        before = by.get((wl, "before"))
        if before is None:
            continue
        docs = {True: _doc(trace, True), False: _doc(trace, False)}
        if docs[True]["record_u"] is None:
            continue
        fixes = [(var, e) for (w, var), e in by.items() if w == wl and var != "before" and e["role"] == "pair"]
        best = max((before["step_ms"]["median"] / e["step_ms"]["median"], vm._kinds(var, before)) for var, e in fixes)
        for var, after in sorted(fixes):
            kinds = vm._kinds(var, before)
            meas = before["step_ms"]["median"] / after["step_ms"]["median"]
            row = {"label": label, "workload": wl, "variant": var, "setting": setting, "kind": "+".join(kinds),
                   "best_fix": "+".join(best[1]), "meas_speedup": round(meas, 2),
                   "matrix_before_ms": before["step_ms"]["median"], "record_u_ms": docs[True]["record_u"],
                   "profiled_ms": docs[True]["profiled"], "estimate_u_ms": docs[False]["u"]}
            for key, d in (("record", docs[True]), ("alone", docs[False])):
                k, option = vm.scored_fix(d, kinds, wl, var, before, after)
                s, _rng = vm._saving(d, k, option)
                u = d["u"]
                pred = u / (u - s) if s is not None and u - s > 0 else None
                row[f"{key}_top"] = d["top"]
                row[f"{key}_pred"] = round(pred, 2) if pred else None
                row[f"{key}_err_pct"] = round(100 * (pred - meas) / meas, 1) if pred else None
            out.append(row)
    return out


def table(rs: list[dict]) -> str:
    lines = ["| host | workload (fix) | profiler | un-profiled step: record / matrix (ms) | top finding | predicted, "
             "record's trace (error) | predicted, its step estimated (error) | measured |", "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        def pred(key):
            return f"{r[key + '_pred']:.2f}x ({r[key + '_err_pct']:+.0f}%)" if r[key + "_pred"] else "-"
        mark = "" if r["record_top"] in r["best_fix"].split("+") else "(x) "
        lines.append(f"| {r['label']} | {r['workload']} ({r['variant']}) | {r['setting']} | {r['record_u_ms']:.3f} / "
                     f"{r['matrix_before_ms']:.3f} | {mark}`{r['record_top']}` | {pred('record')} | {pred('alone')} | "
                     f"{r['meas_speedup']:.2f}x |")
    n = len(rs)

    def within(key, bar):
        return sum(r[key] is not None and abs(r[key]) <= bar for r in rs)
    u_err = [abs(r["record_u_ms"] - r["matrix_before_ms"]) / r["matrix_before_ms"] for r in rs]
    lines.append("")
    lines.append(f"{n} rows: predicted within 25% of the measured speed-up in {within('record_err_pct', 25)} from "
                 f"record's trace, {within('alone_err_pct', 25)} with its step estimated; within 50% in "
                 f"{within('record_err_pct', 50)} and {within('alone_err_pct', 50)}; record's un-profiled step within "
                 f"10% of the matrix recorder's median in {sum(e <= 0.10 for e in u_err)}/{n}.")
    return "\n".join(lines)


if __name__ == "__main__":
    labels = [a for a in sys.argv[1:] if not a.startswith("--")]
    rs = [r for label in labels for r in rows(label)]
    text = table(rs)
    print(text)
    if "--write" in sys.argv:
        for label in labels:
            own = [r for r in rs if r["label"] == label]
            (vm.MATRIX / label / "record" / "e2e.md").write_text(
                f"# The record path end to end ({label})\n\nGenerated by `python sample_traces/score_e2e.py "
                f"{label} --write`; see its docstring.\n\n" + table(own) + "\n")
            (vm.MATRIX / label / "record" / "e2e.json").write_text(json.dumps(own, indent=1) + "\n")
