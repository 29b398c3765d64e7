"""host_bound: the GPU idles while the CPU runs work that launches nothing (data loading,
preprocessing, logging). Evidence: the ops (or Python) the CPU was in during those gaps.
"""
from __future__ import annotations


from .fixes import RemoveHostWork
from .base import Context, Finding, KindSpec

SPEC = KindSpec("host_bound", "host-bound", idle_cause=True, color="#c9443c", estimate="idle_floor")


def analyze(ctx: Context) -> list[Finding]:
    lost = ctx.per_step_median(ctx.per_step["host_bound"])
    gaps = ctx.gaps[ctx.gaps["host_bound"] > 0]
    busy_ops: dict[str, float] = {}
    for row in gaps.nlargest(50, "host_bound").itertuples():
        for name, us in ctx.host.host_ops_in(row.thread, row.start, row.end):
            busy_ops[name] = busy_ops.get(name, 0.0) + us
    top = sorted(busy_ops.items(), key=lambda kv: -kv[1])[:6]
    loader = any("DataLoader" in n or "__next__" in n for n, _ in top)
    what = top[0][0] if top else "Python code outside any profiled op"
    ev = {"cpu_work_during_idle": [{"name": n[:160], "ms": round(v / 1000, 3)} for n, v in top] or
          [{"name": "no op recorded: plain Python (record with with_stack=True to see the function)",
            "ms": round(float(gaps["host_bound"].sum()) / 1000, 3)}],
          "idle_ms_per_step": round(lost / 1000, 3)}
    if loader or not top:
        fix = ("Move the input pipeline off the training loop's critical path: DataLoader(num_workers=N, "
               "pin_memory=True, persistent_workers=True, prefetch_factor=2), do augmentation/preprocessing "
               "on the GPU (or in the workers), and log/checkpoint every N steps instead of every step.")
    else:
        names = ", ".join(n for n, _ in top[:3])
        fix = (f"Make the CPU work in the step that launches nothing cheaper, or move it off the critical "
               f"path ({names[:200]}): run it every N steps, in a background thread or DataLoader worker, "
               "or on the GPU.")
    return [Finding(
        kind="host_bound",
        title=f"The GPU idles while the CPU does work that launches nothing ({what[:80]}"
              f"{', data loading' if loader else ''})",
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["host_bound"].sum()), fix=fix,
        confidence="high" if loader else "medium", evidence=ev, fixes=(RemoveHostWork(),))]
