"""A Python loop over a batch's items: per-sample code (torchvision-style transforms on the GPU, a detector's decode
one image at a time, a per-sample loss) that runs the same few ops once an item, each `x[i]` an aten::select. No sync
turns it (a loop with one is split_loop's), so it reads as plain launch overhead, and a CUDA graph is the launch fix's
usual advice; but done on the whole batch the loop is a turn or two of ops, and its many small kernels go as well:
the forty-seventh set's batched augmentation and decode measured 2.1-2.7x and 5.3-6.1x (H200), where the graph's
estimate, the loop's kernels kept, read 2.3-3.4x and 2.9-5.0x.

Found from the trace alone: on one thread in a full step, at least MIN_TURNS turns of outermost ops, each starting at
an aten::select (every k-th one, for a turn that indexes k tensors), each turn's ops the first turn's give or take one
(a flip on a coin), each turn at most MAX_OPS ops, and the turns launching kernels. The fix as advised is the loop
done on the whole batch (fixes.BatchItems), the graph another way. A recurrence stepped over time (`h = cell(x[t], h)`)
looks the same but cannot be done at once: a turn with a recurrent cell's op is none (its graph stays the fix); a
hand-written one is not told apart, and the advice says what to do then.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from .base import Context, calls_in, outermost_ops, user_frame
from .fixes import BatchItems

HEAD = "aten::select"
# A recurrent cell's op in a turn: a recurrence stepped over time (`h = cell(x[t], h)`), which no batching removes
# (holdout19_launch_gru_loop: its graph measured 2.1-2.9x); a hand-written one is not told apart (the advice says so).
CELL = re.compile(r"^aten::(gru|lstm|rnn_tanh|rnn_relu)_cell$")
# Python frames of a host-side random draw (with_stack): a graph of the loop would replay the draws made at capture.
HOST_RANDOM = re.compile(r"^random\.py\(|numpy/random|of Random object")
MIN_TURNS = 8
MAX_OPS = 64
# The batched code's CPU work, in ops: the forty-seventh set's batched augmentation made about 20 where a turn made
# 8, its batched decode about 14 where a turn made 23. The turns it keeps: BATCHED_OPS over a turn's, at least one.
BATCHED_OPS = 20


def find(ctx: Context) -> dict | None:
    """The fix that does each item loop at once (its spans: the turns past those the batched code's ops make up,
    (thread, start, end);
    the launches and kernels in them), the loop's size and where it is; None where the steps hold no such loop."""
    cpu = ctx.model.cpu
    names = cpu["name"].to_numpy()      # (objects: a fixed-width copy of a big trace's frame names takes GBs)
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    top, step_of = outermost_ops(ctx)
    spans, whole, turns, items, sizes, heads = [], [], [], [], [], []
    for s in ctx.full_steps:
        here = top[step_of[top] == s]
        for th in dict.fromkeys(thread[here]):
            seq = here[thread[here] == th]
            for bounds in _runs(names[seq]):
                if any(CELL.match(str(x)) for x in names[seq[bounds[0]:bounds[1]]]):
                    continue
                size = int(np.median(np.diff(bounds)))
                kept = max(1, round(BATCHED_OPS / size))
                last = float(end[seq[bounds[-1] - 1]])
                spans.append((str(th), float(ts[seq[bounds[kept]]]), last))
                whole.append((str(th), float(ts[seq[bounds[0]]]), last))
                turns, sizes, items = turns + [len(bounds) - 1 - kept], sizes + [size], items + [len(bounds) - 1]
                heads.append(int(seq[bounds[0]]))
    if not spans:
        return None
    calls = calls_in(cpu, spans)
    g = ctx.model.gpu
    is_kernel = (g["kind"] == "kernel").to_numpy()
    kernels = np.flatnonzero(np.isin(g["launcher"].to_numpy(), calls) & is_kernel)
    if len(kernels) < sum(turns):      # (turns that launch next to nothing: host work, not this)
        return None
    mine = np.flatnonzero(np.isin(g["launcher"].to_numpy(), calls_in(cpu, whole)) & is_kernel)
    n = max(1, len(ctx.full_steps))
    py = np.flatnonzero((cpu["kind"] == "python").to_numpy())
    py = py[[bool(HOST_RANDOM.search(str(x))) for x in names[py]]] if len(py) else py
    parent = cpu["parent"].to_numpy()[py]
    py = py[~np.isin(parent, py)]       # (a draw's own frames: randint's randrange, its getrandbits)
    draws = sum(int(((thread[py] == t) & (ts[py] >= a) & (ts[py] < b)).sum()) for t, a, b in whole)
    return {"fix": BatchItems(spans=tuple(spans), calls=tuple(calls), kernels=tuple(int(k) for k in g.index[kernels])),
            "where": next((w for w in (user_frame(cpu, h) for h in heads) if w), None),
            "evidence": {"loops_per_step": round(len(spans) / n, 1), "items_each": int(np.median(items)),
                         "ops_each_item": int(np.median(sizes)),
                         "kernels_per_step": round(len(mine) / n, 1),
                         "kernels_gpu_ms_per_step": round(float(g["dur"].to_numpy()[mine].sum()) / n / 1000, 3),
                         "host_random_draws_per_step": round(draws / n, 1)}}


def _runs(names: np.ndarray) -> list[list[int]]:
    """The turn boundaries (the turns' first positions, their heads, and the end of the last) of each run
    of >= MIN_TURNS similar turns headed by every k-th HEAD (k = 1..3, whichever covers most), none overlapping."""
    at = np.flatnonzero(names == HEAD)
    out: list[list[int]] = []
    taken = np.zeros(len(names), dtype=bool)
    found = []
    for k in (1, 2, 3):
        for phase in range(k):
            found += _similar(names, at[phase::k])
    for bounds in sorted(found, key=lambda b: b[0] - b[-1]):       # the longest first
        if not taken[bounds[0]:bounds[-1]].any():
            taken[bounds[0]:bounds[-1]] = True
            out.append(bounds)
    return out


def _similar(names: np.ndarray, heads: np.ndarray) -> list[list[int]]:
    """Runs of consecutive turns (from one head to the next) whose ops are the run's first turn's give or take one;
    the last turn ends where as many ops as the first turn's have run, if they match it too."""
    out = []
    i = 0
    while i < len(heads) - 1:
        first = Counter(names[heads[i]:heads[i + 1]])
        j = i
        while j + 1 < len(heads) and _close(first, names[heads[j]:heads[j + 1]]):
            j += 1
        bounds = [int(h) for h in heads[i:j + 1]]
        if len(bounds) > 1:     # (the last turn: as long as the first, give or take its optional op)
            n = bounds[1] - bounds[0]
            last = next((bounds[-1] + k for k in (n, n - 1, n + 1)
                         if bounds[-1] + k <= len(names) and _close(first, names[bounds[-1]:bounds[-1] + k])), None)
            if last is not None:
                bounds.append(last)
        if len(bounds) - 1 >= MIN_TURNS:
            out.append(bounds)
        i = max(j, i + 1)
    return out


def _close(first: Counter, turn: np.ndarray) -> bool:
    if not 2 <= len(turn) <= MAX_OPS:
        return False
    got = Counter(turn)
    return sum(((got - first) + (first - got)).values()) <= 1


def advice(loop: dict, graph: str) -> str:
    """The launch fix's words for an item loop: do it on the whole batch (the estimate), else `graph`, the graph's."""
    e = loop["evidence"]
    where = f" ({loop['where']})" if loop.get("where") else ""
    loops = "one such loop a step" if e["loops_per_step"] == 1 else f"{e['loops_per_step']:g} such loops a step"
    draws = e["host_random_draws_per_step"]
    frozen = (f" Its turns draw from Python's random ({draws:.0f} calls a step): a CUDA graph of the loop would replay "
              "the draws made at capture, every step the same." if draws else
              " A CUDA graph of the loop would replay any offsets or coins drawn on the host at capture, every step "
              "the same.")
    return (f"Much of the step is a Python loop that indexes one item a turn (x[i]) and runs the same ops on it{where}: "
            f"{loops}, {e['items_each']} turns of about {e['ops_each_item']} ops, launching "
            f"{e['kernels_per_step']:.0f} kernels a step ({e['kernels_gpu_ms_per_step']:.3f} ms of GPU time, profiled). "
            "Do it on the whole batch (the estimate is of this: the other turns' CPU work and their kernels' fixed "
            "cost gone): batched ops in place of per-item ones, indices or offsets drawn with torch.randint on the "
            "GPU, torch.gather, topk over a dim, torch.where in place of a per-item branch." + frozen +
            " If each turn needs the one before (a recurrence stepped over time), it cannot be batched: "
            + graph.replace("the estimate is of this", "estimated as another way")
            .replace("Cut the per-kernel CPU cost: c", "c"))
