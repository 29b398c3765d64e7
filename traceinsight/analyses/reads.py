"""Host work that reads a result just copied to the host: a gap in GPU work that starts as a blocking
copy of GPU results to the host returns, on the thread that made the copy (numpy's argmax, metrics).

Attribution moves that idle from host_bound to sync_stall (its fix, keeping the results on the GPU,
removes the work with the copy and its wait), with the copy call as its blocker.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.model import TraceModel
from .base import Context
from .fixes import RESULT_READ_GBPS

# A gap "starts as a copy returns" when the copy call ends no earlier than this before the GPU went idle,
# and the copy is big enough that reading it at fixes.RESULT_READ_GBPS could take the whole gap (a
# scalar's .item() before unrelated numpy work is not that: sync_then_host_work).
AFTER_COPY_US = 50.0


def copy_reads(m: TraceModel, gaps: pd.DataFrame) -> pd.DataFrame:
    """Of the host-bound gaps given, those that read a copy: the gap's index, its host-bound idle (us), its
    step, and the copy call (cpu row) that returned as it began."""
    g = m.gpu
    own = (g["copy_dir"] == "DtoH").to_numpy() & (g["launcher"] >= 0).to_numpy()
    out = {"gap": [], "idle_us": [], "step": [], "call": []}
    if own.any() and not gaps.empty:
        copied = g[own].groupby("launcher")["bytes"].sum()
        calls = m.cpu.loc[copied.index].assign(bytes=copied.to_numpy())
        by_thread = {th: grp.sort_values("end") for th, grp in calls.groupby("thread")}
        for row in gaps.itertuples():
            c = by_thread.get(row.thread)
            if c is None:
                continue
            k = int(np.searchsorted(c["end"].to_numpy(), row.end)) - 1
            if k < 0 or c["end"].iat[k] < row.start - AFTER_COPY_US:
                continue
            if c["bytes"].iat[k] / (RESULT_READ_GBPS * 1e3) < row.host_bound:
                continue
            out["gap"].append(row.Index)
            out["idle_us"].append(float(row.host_bound))
            out["step"].append(row.step)
            out["call"].append(int(c.index[k]))
    return pd.DataFrame(out)


def read_idle_us(ctx: Context) -> float:
    """The idle per step (median over full steps) that the host's reading of copied results holds: the
    gaps attribution marked reads_copy, counted under sync_stall."""
    g = ctx.gaps
    reads = g[g["reads_copy"]] if "reads_copy" in g else g.iloc[:0]
    return ctx.per_step_median(reads.groupby("step")["sync_stall"].sum()) if len(reads) else 0.0


def host_work_us(ctx: Context) -> float:
    """The step's host work outside the GPU's reach (median per full step): host_bound's idle and the host's
    reading of copied results."""
    return ctx.per_step_median(ctx.per_step["host_bound"]) + read_idle_us(ctx)
