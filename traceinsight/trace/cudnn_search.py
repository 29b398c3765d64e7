"""cuDNN's algorithm search inside the window. With torch.backends.cudnn.benchmark=True, the first call of a
convolution at a shape not seen before in the process builds the candidate plans (up to
torch.backends.cudnn.benchmark_limit, 10 by default), runs each a few times and waits for each
(cudaEventSynchronize, cudaDeviceSynchronize), then runs the fastest: seconds of host work and syncs inside the
op, in which the GPU runs trials or idles. A steady-state cuDNN op never synchronizes, so a convolution (or cuDNN
RNN) op with syncs inside it is searching: from its start to the end of its last sync.
(sample_traces/matrix/h100_clean58*, h100_clean59*: a raw-audio classifier whose lengths change every step, 7
Conv1d layers, 21 syncs and 84-117 trial kernels per searched op, 12-61 ms each, most of it building the plans
before the first trial; a denoiser at a new photo size every call, 3 searched ops a step, 8-47 ms each.)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .steps import cum_lengths, merged_intervals, overlap_many, step_at

# Ops in which cuDNN searches: convolutions forward and backward (transposed too) and its RNNs.
SEARCH_OPS = r"cudnn|convolution|^aten::conv(_transpose)?[123]d$|^aten::_?(lstm|gru|rnn)"
# The waits a search makes (a cudaFree's implicit sync is the allocator's, not a trial's).
SEARCH_SYNCS = r"(Event|Stream|Device|Ctx)Synchronize"
# The workspaces a search allocates and frees for its candidates (none in the op once it no longer searches).
SEARCH_ALLOCS = r"^(cuda|hip)(Malloc|Free)$|^cuMem(Alloc|Free)"
MIN_SYNCS = 2                 # one trial timed: an event recorded, synchronized, read (at least two waits)
STEADY_SHARE = 0.5            # of the full steps: searching in this many is what the program does each step


def searches(model) -> pd.DataFrame:
    """One row per searching op: thread, op (cpu row), name, start, end (its last sync's end), syncs, step."""
    def compute():
        cpu = model.cpu
        cols = ["thread", "op", "name", "start", "end", "syncs", "op_end", "plans", "step"]
        if cpu.empty or "parent" not in cpu:
            return pd.DataFrame(columns=cols)
        sync = np.flatnonzero((cpu["kind"] == "runtime").to_numpy() & model.cpu_match(SEARCH_SYNCS))
        if not len(sync):
            return pd.DataFrame(columns=cols)
        is_search_op = model.cpu_match(SEARCH_OPS) & (cpu["kind"] != "runtime").to_numpy()
        parent = cpu["parent"].to_numpy()         # (cpu rows are positions, parents too: -1 for none)
        # Each sync's nearest enclosing search op (up the parents; -1: none).
        op = np.full(len(sync), -1, dtype=np.int64)
        cur = parent[sync]
        for _ in range(8):
            live = (op < 0) & (cur >= 0)
            if not live.any():
                break
            hit = live.copy()
            hit[live] = is_search_op[cur[live]]
            op[hit] = cur[hit]
            cur = np.where(live & ~hit, parent[np.maximum(cur, 0)], -1)
        keep = op >= 0
        if not keep.any():
            return pd.DataFrame(columns=cols)
        rows = pd.DataFrame({"op": op[keep], "sync_end": cpu["end"].to_numpy()[sync[keep]]})
        agg = rows.groupby("op").agg(syncs=("sync_end", "size"), end=("sync_end", "max")).reset_index()
        agg = agg[agg["syncs"] >= MIN_SYNCS]
        ops = cpu.iloc[agg["op"].to_numpy()]
        out = pd.DataFrame({"thread": ops["thread"].to_numpy(), "op": ops.index.to_numpy(),
                            "name": ops["name"].to_numpy(), "start": ops["ts"].to_numpy(dtype=float),
                            "end": agg["end"].to_numpy(dtype=float), "syncs": agg["syncs"].to_numpy(),
                            "op_end": ops["end"].to_numpy(dtype=float)})
        # A convolution's backward searches twice (its input's gradient and its weights'; 42 syncs where the
        # forward's search makes 21): the plans a search leaves cuDNN to build with it off.
        out["plans"] = np.where(out["name"].str.contains("backward", case=False), 2, 1)
        out["step"] = step_at(model.steps, out["start"].to_numpy(), "cpu_start", "cpu_end") if len(model.steps) \
            else -1
        return out.sort_values("start", kind="stable").reset_index(drop=True)
    return model.memo("cudnn_searches", compute)


def steady(model, full_steps) -> bool:
    """cuDNN searched in most of these full steps: its search is what the program does each step, not warm-up (new
    kernels then keep loading lazily as well: no sign of a cold window)."""
    s = searches(model)
    full = set(int(x) for x in full_steps)
    return bool(full) and len(set(s["step"].astype(int)) & full) >= STEADY_SHARE * len(full)


def search_spans(model, whole_op: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, cum_lengths), sorted and disjoint: where any thread was searching (whole_op: in a searching op,
    to its end)."""
    def compute():
        s = searches(model)
        end = s["op_end" if whole_op else "end"].to_numpy(dtype=float)
        a, b = merged_intervals(s["start"].to_numpy(dtype=float), end)
        return a, b, cum_lengths(a, b)
    return model.memo(f"cudnn_search_spans_{whole_op}", compute)


def search_us_in(model, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per [a, b): how much of it lies inside a search (us)."""
    return overlap_many(*search_spans(model), np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def while_searching(model, cpu_rows: np.ndarray) -> np.ndarray:
    """Per cpu row (a runtime call): the search's (its trials' launches and syncs, made inside it; its workspaces'
    cudaMalloc and cudaFree, anywhere in the searching op: a review found 28-67 a step, read as the program's
    syncs)."""
    cpu_rows = np.asarray(cpu_rows, dtype=np.int64)
    if not len(cpu_rows) or not len(search_spans(model)[0]):
        return np.zeros(len(cpu_rows), dtype=bool)
    ts = model.cpu["ts"].to_numpy(dtype=float)[cpu_rows]
    out = search_us_in(model, ts, ts + 1e-3) > 0
    alloc = model.cpu_match(SEARCH_ALLOCS)[cpu_rows] & ~out
    if alloc.any():
        out[alloc] = overlap_many(*search_spans(model, whole_op=True), ts[alloc], ts[alloc] + 1e-3) > 0
    return out
