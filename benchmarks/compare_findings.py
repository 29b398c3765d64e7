"""Are two `traceinsight analyze --json` outputs the same diagnosis? (a loader or model change must not
move the findings).

    python benchmarks/compare_findings.py BEFORE.json AFTER.json [--tol 0.01]

Same: the same finding kinds (ranked and minor, in the same order), the same verdict kind, estimates
and measured costs within --tol (relative, default 1%; absolute 0.005 ms for values near zero), the
same step count and per-step summary numbers within --tol. Prints what differs; exit 1 if anything
does. Byte-identical files are reported as such.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

NUMBERS = ("estimated_savings_ms", "estimated_savings_pct", "measured_cost_ms_per_step", "measured_cost_ms_total")


def close(a, b, tol: float) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= max(tol * max(abs(a), abs(b)), 0.005)
    return a == b


def compare(before: dict, after: dict, tol: float) -> list[str]:
    out = []
    for key in ("findings", "minor_findings"):
        ka = [f["kind"] for f in before.get(key, [])]
        kb = [f["kind"] for f in after.get(key, [])]
        if ka != kb:
            out.append(f"{key}: kinds {ka} -> {kb}")
            continue
        for fa, fb in zip(before[key], after[key]):
            for n in NUMBERS:
                if not close(fa.get(n), fb.get(n), tol):
                    out.append(f"{key} {fa['kind']}.{n}: {fa.get(n)} -> {fb.get(n)}")
            ra, rb = fa.get("savings_range_ms") or [], fb.get("savings_range_ms") or []
            if len(ra) != len(rb) or not all(close(x, y, tol) for x, y in zip(ra, rb)):
                out.append(f"{key} {fa['kind']}.savings_range_ms: {ra} -> {rb}")
    sa, sb = before.get("summary", {}), after.get("summary", {})
    for k in sorted(set(sa) | set(sb)):
        va, vb = sa.get(k), sb.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            bad = [c for c in set(va) | set(vb) if not close(va.get(c), vb.get(c), tol)]
            if bad:
                out.append(f"summary.{k}: {va} -> {vb}")
        elif not close(va, vb, tol):
            out.append(f"summary.{k}: {va} -> {vb}")
    if before.get("healthy") != after.get("healthy"):
        out.append(f"healthy: {before.get('healthy')} -> {after.get('healthy')}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--tol", type=float, default=0.01)
    args = ap.parse_args(argv)
    a_bytes, b_bytes = args.before.read_bytes(), args.after.read_bytes()
    before, after = json.loads(a_bytes), json.loads(b_bytes)
    diffs = compare(before, after, args.tol)
    kinds = [f["kind"] for f in after.get("findings", [])]
    if diffs:
        print("DIFFERENT diagnosis:", *diffs, sep="\n  ")
        return 1
    same = "byte-identical" if a_bytes == b_bytes else f"same within {args.tol:.0%}"
    print(f"same diagnosis ({same}): findings {kinds}, minor {[f['kind'] for f in after.get('minor_findings', [])]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
