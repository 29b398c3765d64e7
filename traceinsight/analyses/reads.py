"""Host work that reads a result just copied to the host: a gap in GPU work that starts as a blocking
copy of GPU results to the host returns, on the thread that made the copy (numpy's argmax, metrics).

Attribution moves that idle from host_bound to sync_stall (its fix, keeping the results on the GPU,
removes the work with the copy and its wait), with the copy call as its blocker.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.dims import parsed
from ..trace.model import TraceModel
from ..trace.pycalls import calls_in
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
            if c["bytes"].iat[k] / (RESULT_READ_GBPS * 1e3) < row.host_bound and \
                    not _reads_the_shape(m, int(c.index[k]), row.thread, row.start, row.end):
                continue
            out["gap"].append(row.Index)
            out["idle_us"].append(float(row.host_bound))
            out["step"].append(row.step)
            out["call"].append(int(c.index[k]))
    return pd.DataFrame(out)


# With record_shapes, the trace shows what the host's ops read: an op in the gap whose first input has the
# copied tensor's shape reads the copy, however slowly (a sort is not a pass over the bytes). Small shapes
# are too common to link anything.
LINK_MIN_ELEMENTS = 1024


def _reads_the_shape(m: TraceModel, call: int, thread: str, start: float, end: float) -> bool:
    cpu = m.cpu
    if "input_dims" not in cpu:
        return False
    shape = _first_dims(cpu.at[int(cpu.at[call, "top_op"]), "input_dims"])
    if shape is None or int(np.prod(shape)) < LINK_MIN_ELEMENTS:
        return False
    rows = _starting_in(_op_starts(m, all_ops=True), thread, start - AFTER_COPY_US, end, right=False)
    return any(_first_dims(d) == shape for d in cpu["input_dims"].to_numpy()[rows])


def _op_starts(m: TraceModel, all_ops: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per thread, its ops' (or only its outermost ops') rows and start times, by start time: what a
    gap's window is searched in, instead of a scan of the whole table per gap."""
    def build():
        cpu = m.cpu
        sel = (cpu["kind"] == "op").to_numpy()
        if not all_ops:
            sel = sel & (cpu.index.to_numpy() == cpu["top_op"].to_numpy())
        ts = cpu["ts"].to_numpy()
        out = {}
        for th, rows in m.thread_rows().items():
            r = rows[sel[rows]]
            o = np.argsort(ts[r], kind="stable")
            out[th] = (r[o], ts[r][o])
        return out
    return m.memo(f"op_starts:{all_ops}", build)


def _starting_in(starts: dict, thread: str, a: float, b: float, right: bool) -> np.ndarray:
    """The rows of `thread` that start at or after a and before b (at or before b with `right`)."""
    rows, ts = starts.get(thread, (np.zeros(0, dtype=np.int64), np.zeros(0)))
    return rows[np.searchsorted(ts, a, "left"):np.searchsorted(ts, b, "right" if right else "left")]


def _first_dims(raw) -> list | None:
    """The first input's shape in a recorded op's Input Dims (b'[[16384], [], []]'), or None."""
    dims = parsed(raw)
    first = dims[0] if dims else None
    return first if isinstance(first, list) and first and all(isinstance(x, int) for x in first) else None


def read_idle_us(ctx: Context) -> float:
    """The idle per step (median over full steps) that the host's reading of copied results holds: the
    gaps attribution marked reads_copy, counted under sync_stall."""
    g = ctx.gaps
    reads = g[g["reads_copy"]] if "reads_copy" in g else g.iloc[:0]
    return ctx.per_step_median(reads.groupby("step")["sync_stall"].sum()) if len(reads) else 0.0


def _full_step_reads(ctx: Context) -> pd.DataFrame:
    """The gaps in full steps that attribution marked reads_copy (none when it marked none)."""
    g = ctx.gaps
    if "reads_copy" not in g:
        return g.iloc[:0]
    return g[g["reads_copy"].to_numpy() & np.isin(g["step"].to_numpy(), ctx.full_steps)]


def replacement_gpu_us(ctx: Context, launches: float) -> float:
    """GPU time per step that `launches` kernels per copy read add once on the GPU: the copies read per
    full step, each at the trace's median kernel time."""
    if not launches:
        return 0.0
    reads = _full_step_reads(ctx)
    k = ctx.model.gpu
    k = k[(k["kind"] == "kernel").to_numpy()]
    return float(launches * len(reads) / ctx.n_full * k["dur"].median()) if len(k) else 0.0


def reading_calls(ctx: Context, limit: int = 3) -> list[tuple[str, float]]:
    """What the host's reading of copied results ran, us per full step: the user's calls with stacks
    (argsort() in auc(), ...), else the recorded ops (aten::cdist); empty when it was Python outside any
    op (numpy without stacks)."""
    reads = _full_step_reads(ctx)
    if reads.empty:
        return []
    out: dict[str, float] = {}
    stacks = bool((ctx.model.cpu["kind"] == "python").any())
    for th, grp in reads.groupby("thread", sort=False):
        if stacks:
            got = calls_in(ctx.model, th, list(zip(grp["start"], grp["end"]))).items()
        else:
            got = [kv for r in grp.itertuples() for kv in ctx.host.host_ops_in(th, r.start, r.end)]
        for name, us in got:
            out[name] = out.get(name, 0.0) + us
    top = sorted(out.items(), key=lambda kv: -kv[1])
    # (names that hold a small part of the reading are not what it was)
    total = float(reads["sync_stall"].sum()) or 1.0
    return [(n, v / ctx.n_full) for n, v in top[:limit] if v >= 0.1 * total]


def host_work_us(ctx: Context) -> float:
    """The step's host work outside the GPU's reach (median per full step): host_bound's idle and the host's
    reading of copied results."""
    return ctx.per_step_median(ctx.per_step["host_bound"]) + read_idle_us(ctx)


# Moving the host's reading of a copied result onto the GPU does not make it free when that reading is
# torch ops on CPU tensors (torch.cdist, topk, a vote, a hit count): each op then dispatches and launches
# its kernels from the CPU. An op runs the same ATen decomposition on either device: the ops of its
# recorded tree that do their own work launch, one kernel each, except views, allocations and scalar reads
# (nothing) and the native ops below (several).
SELF_SHARE = 0.5
NO_KERNEL_OPS = frozenset({     # (with or without the aten:: prefix: autograd records a bare "detach")
    "detach", "resolve_conj", "resolve_neg", "view", "reshape", "select", "slice", "squeeze", "unsqueeze",
    "squeeze_", "unsqueeze_", "expand", "as_strided", "as_strided_", "t", "transpose", "permute", "alias",
    "item", "_local_scalar_dense", "lift_fresh", "numpy_T", "contiguous", "empty", "empty_like",
    "empty_strided", "resize_", "result_type", "to", "_reshape_alias", "_unsafe_view", "set_",
})
# CUDA kernels one call launches where that is more than one and the trace does not show the op on the
# GPU: counted in our own recordings (torch 2.11, H100; topk over 2,048-long rows, the radix select's
# passes; cdist's Euclidean path through a matmul; sort of 16,384 floats, seen in the fourteenth held-out
# set's AUC eval, after its out-of-sample check).
KERNELS_PER_CALL = {"aten::topk": 20, "aten::cdist": 12, "aten::_unique2": 12, "aten::unique": 12,
                    "aten::logsumexp": 9, "aten::nonzero": 4, "aten::sort": 7}


def replacement_launches(ctx: Context) -> float:
    """Kernels per copy that the host's reading of it launches once it runs on the GPU (median over the
    full steps' read gaps): the recorded torch ops in each read gap that launched nothing, counted by what
    the same op launched on the GPU in this trace, else by its op tree's leaves. Numpy and other Python
    show no ops: nothing is counted for them."""
    reads = _full_step_reads(ctx)
    if reads.empty:
        return 0.0
    cpu, gpu = ctx.model.cpu, ctx.model.gpu
    is_top = (cpu["kind"] == "op").to_numpy() & (cpu.index.to_numpy() == cpu["top_op"].to_numpy())
    tops = cpu[is_top]
    launched = gpu[(gpu["launcher"] >= 0).to_numpy()]
    launchers = set(cpu["top_op"].to_numpy()[launched["launcher"].to_numpy()])   # copies too
    kern = launched[(launched["kind"] == "kernel").to_numpy()]
    per_top = pd.Series(cpu["top_op"].to_numpy()[kern["launcher"].to_numpy()]).value_counts()
    launching = tops[tops.index.isin(per_top.index)]
    seen = per_top.reindex(launching.index).groupby(launching["name"].to_numpy()).median()
    # The ops of each tree that do their own work (at least half their time outside the ops inside them:
    # not a wrapper such as cdist around _euclidean_dist), and the kernels each stands for.
    ops = cpu[(cpu["kind"] == "op").to_numpy()]
    inner = ops.groupby("parent")["dur"].sum()
    own = ops["dur"] - inner.reindex(ops.index).fillna(0.0).to_numpy()
    work = ops[(own >= SELF_SHARE * ops["dur"]).to_numpy() & ~ops["name"].str.removeprefix("aten::").isin(NO_KERNEL_OPS).to_numpy()]
    tree = work["name"].map(lambda n: KERNELS_PER_CALL.get(n, 1)).groupby(work["top_op"].to_numpy()).sum()
    counts = []
    starts, end, names = _op_starts(ctx.model, all_ops=False), cpu["end"].to_numpy(), cpu["name"].to_numpy()
    for r in reads.itertuples():
        rows = _starting_in(starts, r.thread, r.start - AFTER_COPY_US, r.launch_ts, right=True)
        rows = [i for i in rows.tolist() if end[i] <= r.launch_ts and i not in launchers]
        # (an op whose tree did no work, a no-op .to(), counts nothing even where the same op launched)
        counts.append(sum(float(seen[names[i]]) if names[i] in seen.index and tree.get(i, 0) else
                          float(tree.get(i, 0)) for i in rows))
    return float(np.median(counts)) if counts else 0.0
