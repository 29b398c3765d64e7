"""The document's tables: GPU activities and ops per full step, the longest idle gaps with their
cause and what the CPU was doing, GPU idle over the whole span (what HTA calls idle time)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..analyses import CAUSES
from ..analyses.base import op_rows, top_op
from ..analyses.sync_stall import SPEC as SYNC
from ..trace.facts import launched_before_window
from ..trace.dims import dims_text
from ..trace.model import TraceModel
from ..trace.steps import merged_intervals, step_at
from .analyze import Analysis
from .numbers import num


def _in_full_steps(a: Analysis, g: pd.DataFrame) -> pd.DataFrame:
    """The GPU activities that start inside a full step's window."""
    return g[step_at(a.full_steps, g["ts"].to_numpy()) >= 0]


# The rows analyze --json keeps of the kernel and op tables (diff reads a shorter list as whole).
TABLE_ROWS = 50


def kernel_table(a: Analysis, limit: int = TABLE_ROWS) -> list[dict]:
    """GPU activities by name over full steps: count, total and per-step time (ms), share of GPU time. Work
    launched before the profiling window is left out: it belongs to earlier steps (a per-step mean over
    three steps had one collective at 24 ms in a 19 ms step)."""
    g = a.model.gpu
    if g.empty:
        return []
    rank, names = a.model.name_ranks("gpu")
    full = (step_at(a.full_steps, g["ts"].to_numpy()) >= 0) & ~launched_before_window(a.model)
    g = pd.DataFrame({"name": rank[full], "kind": g["kind"].to_numpy()[full], "dur": g["dur"].to_numpy()[full]})
    n = max(1, len(a.full_steps))
    agg = g.groupby(["name", "kind"]).agg(count=("dur", "size"), total=("dur", "sum"), mean=("dur", "mean"))
    total = float(g["dur"].sum()) or 1.0
    agg = agg.sort_values("total", ascending=False).head(limit)
    return [{"name": names[name][:400], "kind": kind, "count_per_step": round(r["count"] / n, 2),
             "ms_per_step": round(r["total"] / n / 1000, 4), "mean_us": round(r["mean"], 2),
             "pct_gpu_time": round(100 * r["total"] / total, 2)} for (name, kind), r in agg.iterrows()]


def op_table(a: Analysis, limit: int = TABLE_ROWS) -> list[dict]:
    """GPU time by the op (outermost aten op, with its input shapes) that launched it, over full steps."""
    g = a.model.gpu
    cpu = a.model.cpu
    g = g[g["launcher"] >= 0]
    if g.empty:
        return []
    g = _in_full_steps(a, g)
    top = op_rows(cpu, g["launcher"].to_numpy())
    names = np.where(top >= 0, cpu["name"].to_numpy()[np.maximum(top, 0)], "(no op)")
    uniq, inv = np.unique(top, return_inverse=True)
    col = cpu["input_dims"].to_numpy()
    # Tens of thousands of op calls share a few hundred shapes (the model interns them): each distinct
    # shape is made text once.
    codes, shapes = pd.factorize(col[uniq[uniq >= 0]])
    text = np.array([dims_text(s) for s in shapes] + [""], dtype=object)
    dims = np.full(len(uniq), "", dtype=object)
    dims[uniq >= 0] = text[codes]
    dims = dims[inv]
    df = pd.DataFrame({"op": names, "input_dims": dims, "dur": g["dur"].to_numpy(), "top": top})
    n = max(1, len(a.full_steps))
    agg = df.groupby(["op", "input_dims"]).agg(kernels=("dur", "size"), total=("dur", "sum"), calls=("top", "nunique"))
    agg = agg.sort_values("total", ascending=False).head(limit)
    # Calls are op instances (diff counts them: an after side that adds a memset per call has as many calls);
    # GPU activities launched without an op have none.
    return [{"op": op[:300], "input_dims": d[:200], "kernels_per_step": round(r["kernels"] / n, 2),
             "calls_per_step": round(r["calls"] / n, 2) if op != "(no op)" else None,
             "gpu_ms_per_step": round(r["total"] / n / 1000, 4)} for (op, d), r in agg.iterrows()]


def gap_table(a: Analysis, limit: int = 100) -> list[dict]:
    """The longest GPU idle gaps: when, how long, on which stream work resumed, why, and what the
    launching thread was doing (the outermost ops it was in, or the call that blocked it)."""
    gaps = a.gaps
    if gaps.empty:
        return []
    cpu, gpu = a.model.cpu, a.model.gpu
    top = gaps.nlargest(limit, "dur")
    ops = cpu["kind"].isin(("op", "annotation")).to_numpy() & ~cpu["is_step"].to_numpy()
    frames = a.model.thread_frames(ops, ["ts", "end", "dur", "depth", "name"]) if len(top) else {}
    # The longest op per thread bounds how far back an op overlapping a gap can start.
    longest = {th: float(g["dur"].max()) for th, g in frames.items()}
    # Per thread, its ops by start as arrays (ts, end, depth, name): a hundred gaps look them up.
    by_thread = {th: [g[c].to_numpy() for c in ("ts", "end", "depth", "name")]
                 for th, g in ((th, g.sort_values("ts")) for th, g in frames.items())}
    out = []
    for r in top.itertuples():
        causes = {c: getattr(r, c) for c in CAUSES if getattr(r, c) > 0}
        stream = int(gpu.at[r.next_gpu, "stream"]) if r.next_gpu >= 0 else None
        doing: list[str] = []
        # A short wait, then the rest of the gap outside any recorded op (numpy after an .item()).
        bare = "Python outside any recorded op" + (f", after {cpu.at[r.blocker, 'name']} "
                                                   f"({top_op(cpu, int(r.blocker))}) returned" if r.blocker >= 0 else "")
        if r.blocker >= 0 and getattr(r, "reads_copy", False):
            doing = [f"working on the result {cpu.at[r.blocker, 'name']} ({top_op(cpu, int(r.blocker))}) copied "
                     "to the host"]
        elif r.blocker >= 0 and causes.get(SYNC.kind, 0.0) >= 0.5 * r.dur:
            doing = [f"blocked in {cpu.at[r.blocker, 'name']} ({top_op(cpu, int(r.blocker))})"]
        elif r.thread in by_thread:
            tts, tend, tdepth, tname = by_thread[r.thread]
            b = min(r.end, r.launch_ts) if r.launch_ts == r.launch_ts else r.end
            lo = np.searchsorted(tts, r.start - longest[r.thread], side="left")
            hi = np.searchsorted(tts, b, side="left")
            cand = lo + np.flatnonzero(tend[lo:hi] > r.start)
            if len(cand):
                # The ranges that cover most of the gap (the DataLoader's __next__ over the .to() after it).
                ov = np.minimum(tend[cand], r.end) - np.maximum(tts[cand], r.start)
                cand = cand[np.argsort(-ov, kind="stable")]
                doing = list(dict.fromkeys(tname[cand].tolist()))[:3]
                if ov.max() < 0.5 * r.dur:
                    # Recorded ops cover little of it: the gap is mostly Python outside any op.
                    doing = [bare] + doing[:2]
        if not doing and r.blocker >= 0:
            doing = [bare]
        out.append({"step": int(r.step), "device": int(r.device), "start_ms": num(r.start / 1000),
                    "duration_ms": num(r.dur / 1000), "resumed_on_stream": stream,
                    "cause": max(causes, key=causes.get) if causes else None,
                    "by_cause_ms": {c: num(v / 1000) for c, v in causes.items()},
                    "launching_thread": r.thread or None, "cpu_was_in": doing})
    return out




def gpu_idle_over_span(model: TraceModel) -> dict:
    """GPU idle inside [first GPU start, last GPU end] per device: what HTA calls idle time."""
    out = {}
    for dev, g in model.gpu.groupby("device"):
        s, e = merged_intervals(g["ts"].to_numpy(), g["end"].to_numpy())
        span = float(e.max() - s.min())
        out[int(dev)] = {"span_us": span, "busy_us": float((e - s).sum()),
                         "idle_us": span - float((e - s).sum())}
    return out
