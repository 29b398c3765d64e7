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


# Moving the host's reading of a copied result onto the GPU does not make it free when that reading is
# torch ops on CPU tensors (torch.cdist, topk, a vote, a hit count): each op then dispatches and launches
# its kernels from the CPU. Views and scalar reads launch nothing; an op shorter than this did no work
# worth a kernel here (a no-op .to()).
MOVED_OP_MIN_US = 5.0
NO_KERNEL_OPS = frozenset({
    "aten::detach", "aten::resolve_conj", "aten::resolve_neg", "aten::view", "aten::reshape", "aten::select",
    "aten::slice", "aten::squeeze", "aten::unsqueeze", "aten::expand", "aten::as_strided", "aten::t",
    "aten::transpose", "aten::permute", "aten::alias", "aten::item", "aten::_local_scalar_dense",
    "aten::lift_fresh", "aten::numpy_T", "aten::contiguous", "aten::empty", "aten::empty_like",
})
# CUDA kernels one call launches where that is more than one and the trace does not show the op on the
# GPU: counted in our own recordings (torch 2.11, H100; topk over 2,048-long rows, the radix select's
# passes; cdist's Euclidean path through a matmul).
KERNELS_PER_CALL = {"aten::topk": 20, "aten::cdist": 12, "aten::_unique2": 12, "aten::unique": 12,
                    "aten::logsumexp": 9, "aten::nonzero": 4}


def replacement_launches(ctx: Context) -> float:
    """Kernels per copy that the host's reading of it launches once it runs on the GPU (median over the
    full steps' read gaps): the recorded torch ops in each read gap that launched nothing, views and
    scalar reads aside, counted by what the same op launched on the GPU in this trace, or
    KERNELS_PER_CALL, or one. Numpy and other Python show no ops: nothing is counted for them."""
    g = ctx.gaps
    if "reads_copy" not in g or not g["reads_copy"].any():
        return 0.0
    reads = g[g["reads_copy"].to_numpy() & np.isin(g["step"].to_numpy(), ctx.full_steps)]
    cpu, gpu = ctx.model.cpu, ctx.model.gpu
    tops = cpu[(cpu["kind"] == "op").to_numpy() & (cpu.index.to_numpy() == cpu["top_op"].to_numpy())]
    kern = gpu[(gpu["launcher"] >= 0).to_numpy() & (gpu["kind"] == "kernel").to_numpy()]
    per_top = pd.Series(cpu["top_op"].to_numpy()[kern["launcher"].to_numpy()]).value_counts()
    launching = tops[tops.index.isin(per_top.index)]
    seen = per_top.reindex(launching.index).groupby(launching["name"].to_numpy()).median()
    counts = []
    for r in reads.itertuples():
        t = tops[(tops["thread"] == r.thread).to_numpy() & (tops["ts"] >= r.start - AFTER_COPY_US).to_numpy()
                 & (tops["end"] <= r.launch_ts).to_numpy()]
        t = t[~t.index.isin(per_top.index) & ~t["name"].isin(NO_KERNEL_OPS) & (t["dur"] >= MOVED_OP_MIN_US)]
        counts.append(sum(float(seen.get(n, KERNELS_PER_CALL.get(n, 1))) for n in t["name"]))
    return float(np.median(counts)) if counts else 0.0
