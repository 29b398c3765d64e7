"""Predicted vs measured: does the what-if estimate match what the fix really did?

For each workload with a fixed version, analyze the "before" trace, take the estimate of the finding
the fix addresses, and compare the predicted step time after the fix with the measured one (both
un-profiled: the prediction scales the measured before-time by the predicted saving fraction).

    python sample_traces/validate.py            # prints the Markdown table
    python sample_traces/validate.py DIR        # ... of another recording of these workloads (DIR/manifest.json)
    python sample_traces/validate.py --write    # writes sample_traces/validation.md: these traces, then each
                                                # re-recording under sample_traces/rerun/
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The same workloads recorded again by record_all.py on later leases (TEARDOWN_CUPTI=1: every variant timed with
# CUPTI torn down after each profiler session, which the traces in this folder were not): one folder each.
RERUNS = HERE / "rerun"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from validate_matrix import _analyze, _saving, scored_fix  # noqa: E402  (the matrix's reading and scoring)


def _with_workers(entry: dict) -> dict:
    """The entry with the DataLoader worker count its description names as `info` (the matrix manifests carry
    it there): loading moved into N workers is scored against the report's estimate for N."""
    m = re.search(r"num_workers=(\d+)", entry.get("description", ""))
    return {**entry, "info": {"num_workers": int(m.group(1))}} if m else entry


def rows(where: Path = HERE) -> list[dict]:
    man = json.loads((where / "manifest.json").read_text())
    by = {(t["workload"], t["variant"]): t for t in man["traces"]}
    out = []
    for (wl, variant), before in sorted(by.items()):
        if variant != "before" or (wl, "after") not in by:
            continue
        after = by[(wl, "after")]
        d = _analyze((where / before["file"], None))
        kind = before["expected_kind"]
        f = next((x for x in d["findings"] if x["kind"] == kind), None)
        rank = [x["kind"] for x in d["findings"]].index(kind) + 1 if f else None
        kinds, option = scored_fix(d, (kind,), wl, variant, _with_workers(before), _with_workers(after))
        saving, range_ms = _saving(d, kinds, option)
        before_ms = before["step_time_ms"]["median_ms"]
        after_ms = after["step_time_ms"]["median_ms"]
        trace_ms = d["summary"].get("unprofiled_step_ms") or d["summary"]["median_step_ms"]
        frac = (saving / trace_ms) if f and trace_ms else 0.0
        pred_after = before_ms * (1 - frac)
        pred_speedup = before_ms / pred_after if pred_after > 0 else float("inf")
        meas_speedup = before_ms / after_ms
        out.append({
            "workload": wl, "kind": kind, "rank": rank, "top": d["findings"][0]["kind"] if d["findings"] else "-",
            "before_ms": before_ms, "after_ms": after_ms, "pred_after_ms": round(pred_after, 3),
            "meas_speedup": round(meas_speedup, 2), "pred_speedup": round(pred_speedup, 2),
            "speedup_err_pct": round(100 * (pred_speedup - meas_speedup) / meas_speedup, 1),
            "range_ms": range_ms if f else None, "option": option,
        })
    return out


def table(rs: list[dict]) -> str:
    lines = ["| workload | finding (rank; top) | before ms | after ms (measured) | after ms (predicted) | "
             "speedup measured | speedup predicted | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['workload']} | `{r['kind']}`{' (' + r['option'] + ')' if r['option'] else ''} "
                     f"({r['rank'] or 'not found'}; top `{r['top']}`) | "
                     f"{r['before_ms']:.3f} | {r['after_ms']:.3f} | {r['pred_after_ms']:.3f} | "
                     f"{r['meas_speedup']:.2f}x | {r['pred_speedup']:.2f}x | {r['speedup_err_pct']:+.0f}% |")
    return "\n".join(lines)


def rerun_section(where: Path) -> str:
    """A re-recording's table, headed by its host and date."""
    man = json.loads((where / "manifest.json").read_text())
    env = man.get("environment") or {}
    rs = rows(where)
    ok = sum(abs(r["speedup_err_pct"]) <= 25 for r in rs)
    return (f"## Re-recorded: `{where.relative_to(HERE)}`\n\n{man.get('gpu')} on a {env.get('cpu_count')}-core "
            f"{env.get('cpu')} host, torch {man.get('torch')}, {env.get('date_utc')}, TEARDOWN_CUPTI="
            f"{env.get('teardown_cupti')}: predicted within 25% of measured on {ok} of {len(rs)}, top finding the "
            f"measured fix on {sum(r['rank'] == 1 for r in rs)}.\n\n" + table(rs))


if __name__ == "__main__":
    dirs = [Path(a) for a in sys.argv[1:] if not a.startswith("--")]
    rs = rows(dirs[0].resolve() if dirs else HERE)
    text = table(rs)
    print(text)
    if "--write" in sys.argv and not dirs:
        man = json.loads((HERE / "manifest.json").read_text())
        head = (f"# What-if validation\n\nMeasured on {man.get('gpu')} (torch {man.get('torch')}, CUDA "
                f"{man.get('cuda')}); un-profiled step times from manifest.json. Predicted = measured before "
                "x (1 - estimated saving / the tool's un-profiled step estimate); the saving of the fix as measured (a "
                "worker count where the report estimates that count). Regenerate: "
                "`python sample_traces/validate.py --write`.\n\n")
        reruns = [rerun_section(d) for d in sorted(RERUNS.glob("*")) if (d / "manifest.json").exists()]
        (HERE / "validation.md").write_text(head + text + "\n" + "".join("\n" + r + "\n" for r in reruns))
