"""A Python loop over a batch's items: per-sample code (torchvision-style transforms on the GPU, a detector's decode
one image at a time, a per-sample loss, a model called once per image) that runs the same few ops once an item, each
item taken as `x[i]` (an aten::select) or by iterating the tensor (`for x in batch`, `zip(out, y)`: one aten::unbind,
then the turns). No sync turns it (a loop with one is split_loop's), so it reads as plain launch overhead, and a CUDA
graph is the launch fix's usual advice; but done on the whole batch the loop is a turn or two of ops, and its many
small kernels go as well: the forty-seventh set's batched augmentation and decode measured 2.1-2.7x and 5.3-6.1x
(H200), where the graph's estimate, the loop's kernels kept, read 2.3-3.4x and 2.9-5.0x; the forty-eighth's model
called on the batch 31x (H100), its graph 2.5-2.8x.

Found from the trace alone: on one thread in a full step, at least MIN_TURNS turns of outermost ops, each starting at
an aten::select (every k-th one, for a turn that indexes k tensors) or, after an aten::unbind (split, chunk), at the
op the first turn starts with (every k-th one); each turn's ops the first turn's give or take one (a flip on a coin),
each turn at most MAX_OPS ops, and the turns launching kernels. In training, the turns' own autograd nodes repeat the
same way in the backward (a per-sequence loss: NllLossBackward0, LogSoftmaxBackward0... once a sequence); batched,
they go too. The fix as advised is the loop done on the whole batch (fixes.BatchItems), the graph another way. A
recurrence stepped over time (`h = cell(x[t], h)`) looks the same but cannot be done at once: a turn with a recurrent
cell's op is none (its graph stays the fix); a hand-written one is not told apart, and the advice says what to do then.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from .base import Context, calls_in, outermost_ops, user_frame
from .fixes import BatchItems

HEAD = "aten::select"
# Iterating a tensor (Tensor.__iter__ is unbind(0)) or its pieces: the turns follow, each starting at the first's op.
ITER = {"aten::unbind", "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::tensor_split",
        "aten::unsafe_split", "aten::unsafe_chunk"}
# The backward's outermost ops: one autograd node's evaluation each.
NODE = "autograd::engine::evaluate_function: "
# A recurrent cell's op in a turn: a recurrence stepped over time (`h = cell(x[t], h)`), which no batching removes
# (holdout19_launch_gru_loop: its graph measured 2.1-2.9x); a hand-written one is not told apart (the advice says so).
CELL = re.compile(r"^aten::(gru|lstm|rnn_tanh|rnn_relu)_cell$")
# Python frames of a host-side random draw (with_stack): a graph of the loop would replay the draws made at capture.
HOST_RANDOM = re.compile(r"^random\.py\(|numpy/random|of Random object")
# A turn that takes a loss on one item, or runs a model's layers on it (two or more): the advice names the batched
# form (one loss call with reduction="none" and a mask or weight; the model called on the batch).
LOSS = re.compile(r"^aten::(cross_entropy_loss|nll_loss(_nd|2d)?|mse_loss|l1_loss|smooth_l1_loss|huber_loss|kl_div"
                  r"|binary_cross_entropy(_with_logits)?|ctc_loss|cosine_embedding_loss|margin_ranking_loss)$")
LAYER = re.compile(r"^aten::(conv[123]d|conv_transpose[123]d|linear|addmm|matmul|batch_norm|layer_norm|group_norm"
                   r"|embedding|scaled_dot_product_attention|lstm|gru|rms_norm)$")
MODULE = "nn.Module: "
MIN_TURNS = 8
# The threads an SM holds at once (2,048 on V100, A100, H100 and H200; fewer on some consumer parts, where a batched
# kernel then takes longer than said).
SM_THREADS = 2048
MAX_OPS = 64
# The batched code's CPU work, in ops: the forty-seventh set's batched augmentation made about 20 where a turn made
# 8, its batched decode about 14 where a turn made 23. The turns it keeps: BATCHED_OPS over a turn's, at least one.
BATCHED_OPS = 20


def find(ctx: Context) -> dict | None:
    """The fix that does each item loop at once (its spans: the turns past those the batched code's ops make up,
    (thread, start, end), forward and, in training, backward; the launches and kernels in them, and the share of each
    kernel's work the batched kernel still does), the loop's size and where it is; None where the steps hold no such
    loop."""
    cpu = ctx.model.cpu
    names = cpu["name"].to_numpy()      # (objects: a fixed-width copy of a big trace's frame names takes GBs)
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    top, step_of = outermost_ops(ctx)
    loops: list[dict] = []      # one a loop: its spans (the turns dropped), whole span, turns dropped, items, size
    for s in ctx.full_steps:
        here = top[step_of[top] == s]
        threads = list(dict.fromkeys(thread[here]))
        forward = []
        for th in threads:
            seq = here[thread[here] == th]
            for bounds in _runs(names[seq]):
                if not any(CELL.match(str(x)) for x in names[seq[bounds[0]:bounds[1]]]):
                    forward.append(dict(_loop(seq, bounds, th, ts, end, "forward"),
                                        turn=[str(x) for x in names[seq[bounds[0]:bounds[1]]]],
                                        first=(str(th), float(ts[seq[bounds[0]]]), float(ts[seq[bounds[1]]]))))
        loops += forward
        if not forward:
            continue
        # In training, the turns' autograd nodes: as many turns again in the backward, on autograd's thread.
        items = {lp["items"] for lp in forward}
        for th in threads:
            seq = here[thread[here] == th]
            if np.mean([str(x).startswith(NODE) for x in names[seq]]) > 0.5:
                loops += [_loop(seq, b, th, ts, end, "backward") for b in _node_runs(names[seq], items)]
    if not loops:
        return None
    g = ctx.model.gpu
    is_kernel = (g["kind"] == "kernel").to_numpy()
    launcher, threads, device = g["launcher"].to_numpy(), g["threads"].to_numpy(), g["device"].to_numpy()
    sms = {i: d.num_sms for i, d in ctx.model.devices.items()}
    kernels, work = [], []
    for lp in loops:
        k = np.flatnonzero(np.isin(launcher, calls_in(cpu, [lp["span"]])) & is_kernel)
        kernels += k.tolist()
        work += [_work(int(t), sms.get(int(dv)), lp["items"]) for t, dv in zip(threads[k], device[k])]
    if len(kernels) < sum(lp["dropped"] for lp in loops):     # (turns that launch next to nothing: host work)
        return None
    calls = calls_in(cpu, [lp["span"] for lp in loops])
    mine = np.flatnonzero(np.isin(launcher, calls_in(cpu, [lp["whole"] for lp in loops])) & is_kernel)
    n = max(1, len(ctx.full_steps))
    fwd = [lp for lp in loops if lp["pass"] == "forward"]
    bwd = [lp for lp in loops if lp["pass"] == "backward"]
    py = np.flatnonzero((cpu["kind"] == "python").to_numpy())
    py = py[[bool(HOST_RANDOM.search(str(x))) for x in names[py]]] if len(py) else py
    parent = cpu["parent"].to_numpy()[py]
    py = py[~np.isin(parent, py)]       # (a draw's own frames: randint's randrange, its getrandbits)
    draws = sum(int(((thread[py] == t) & (ts[py] >= a) & (ts[py] < b)).sum()) for t, a, b in
                (lp["whole"] for lp in fwd))
    turn = fwd[0]["turn"]
    loss = next((x for x in turn if LOSS.match(x)), None)
    model = sum(bool(LAYER.match(x)) for x in turn) >= 2
    return {"fix": BatchItems(spans=tuple(lp["span"] for lp in loops), calls=tuple(calls),
                              kernels=tuple(int(i) for i in g.index[kernels]), work=tuple(work)),
            "where": next((w for w in (user_frame(cpu, lp["head"]) for lp in fwd) if w), None),
            "evidence": {"loops_per_step": round(len(fwd) / n, 1), "items_each": int(np.median([lp["items"] for lp in fwd])),
                         "ops_each_item": int(np.median([lp["size"] for lp in fwd])),
                         "autograd_nodes_each_item": int(np.median([lp["size"] for lp in bwd])) if bwd else 0,
                         "kernels_per_step": round(len(mine) / n, 1),
                         "kernels_gpu_ms_per_step": round(float(g["dur"].to_numpy()[mine].sum()) / n / 1000, 3),
                         "host_random_draws_per_step": round(draws / n, 1),
                         # what a turn runs: a loss on one item (its op), a model's layers, else other ops
                         "turn_runs": "loss" if loss else ("model" if model else "ops"), "loss_op": loss,
                         "module": _module(cpu, fwd[0]["first"]) if model and not loss else None}}


def _module(cpu, first: tuple) -> str | None:
    """The outermost nn.Module a turn calls (with_stack's "nn.Module: Name_0" frames), None without stacks."""
    th, a, b = first
    py = cpu[(cpu["kind"] == "python").to_numpy() & (cpu["thread"] == th).to_numpy()
             & (cpu["ts"] >= a).to_numpy() & (cpu["ts"] < b).to_numpy()]
    mods = py[py["name"].astype(str).str.startswith(MODULE)]
    if mods.empty:
        return None
    top = mods[~mods["parent"].isin(mods.index)]
    return str(top["name"].iloc[0])[len(MODULE):] if len(top) else None


def _loop(seq: np.ndarray, bounds: list[int], th, ts, end, where: str) -> dict:
    """A loop found (bounds: its turns' first positions in seq, and the end of the last): the span of the turns the
    batched code leaves out (those past the ones its BATCHED_OPS ops make up), its whole span, its sizes."""
    size = int(np.median(np.diff(bounds)))
    kept = max(1, round(BATCHED_OPS / size))
    last = float(end[seq[bounds[-1] - 1]])
    return {"span": (str(th), float(ts[seq[bounds[kept]]]), last), "whole": (str(th), float(ts[seq[bounds[0]]]), last),
            "dropped": len(bounds) - 1 - kept, "items": len(bounds) - 1, "size": size, "head": int(seq[bounds[0]]),
            "pass": where}


def _work(threads: int, sms: int | None, items: int) -> float:
    """The share of a per-item kernel's work past its fixed cost that its part of the batched kernel still takes:
    one item's launch fills threads / (sms x SM_THREADS) of the GPU (at most, registers and shared memory aside), so
    the batch's fills items times that, at least one wave's time; all of it where one item's fills the GPU already
    or the launch's size is not in the trace."""
    if threads <= 0 or not sms:
        return 1.0
    return float(min(1.0, max(1.0 / items, threads / (sms * SM_THREADS))))


def _runs(names: np.ndarray) -> list[list[int]]:
    """The turn boundaries (the turns' first positions, their heads, and the end of the last) of each run
    of >= MIN_TURNS similar turns headed by every k-th HEAD (k = 1..3, whichever covers most), or starting right
    after an ITER op at its next op and every k-th one of those, none overlapping."""
    found = []
    at = np.flatnonzero(names == HEAD)
    for k in (1, 2, 3):
        for phase in range(k):
            found += _similar(names, at[phase::k])
    for p in np.flatnonzero(np.isin(names, list(ITER))).tolist():
        if p + 1 < len(names) and names[p + 1] not in ITER:
            at = np.flatnonzero(names[p + 1:] == names[p + 1]) + p + 1
            for k in (1, 2, 3):
                # (turns that unbind again are a model's layers, each splitting its qkv, not the items iterated)
                found += [b for b in _similar(names, at[::k], first_only=True)
                          if not (names[b[0]:b[-1]] == names[p]).any()]
    return _longest(found, len(names))


def _node_runs(names: np.ndarray, items: set[int]) -> list[list[int]]:
    """The backward's runs of similar turns (as _runs', headed by every k-th of any node) as many as a forward
    loop's items, give or take one."""
    found = []
    for v in {str(x) for x in names}:
        at = np.flatnonzero(names == v)
        for k in (1, 2, 3):
            if len(at) // k + 1 >= min(items) - 1:
                for phase in range(k):
                    found += [b for b in _similar(names, at[phase::k]) if any(abs(len(b) - 1 - i) <= 1 for i in items)]
    return _longest(found, len(names))


def _longest(found: list[list[int]], n: int) -> list[list[int]]:
    """The runs found, the longest first, none overlapping one taken before it."""
    out: list[list[int]] = []
    taken = np.zeros(n, dtype=bool)
    for bounds in sorted(found, key=lambda b: b[0] - b[-1]):
        if not taken[bounds[0]:bounds[-1]].any():
            taken[bounds[0]:bounds[-1]] = True
            out.append(bounds)
    return out


def _similar(names: np.ndarray, heads: np.ndarray, first_only: bool = False) -> list[list[int]]:
    """Runs of consecutive turns (from one head to the next) whose ops are the run's first turn's give or take one;
    the last turn ends where as many ops as the first turn's have run, if they match it too. first_only: the run
    from the first head alone."""
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
        if first_only:
            break
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
              " A CUDA graph of the loop would replay what capture saw, every step the same: the items' lengths or "
              "slice bounds held in Python, any offsets or coins drawn on the host.")
    nodes = (f" (and {e['autograd_nodes_each_item']} autograd nodes a turn in the backward)"
             if e.get("autograd_nodes_each_item") else "")
    runs = e.get("turn_runs")
    how = (f"each turn takes a loss on one item ({e['loss_op']}): take it once over the padded batch, with "
           "reduction='none' times a mask or per-position weight (or ignore_index on the padding), then one sum"
           if runs == "loss" else
           f"each turn calls the model{' (' + e['module'] + ')' if e.get('module') else ''} on one item: call it "
           "once on the whole batch (model(batch)), padding or stacking the items first"
           if runs == "model" else
           "batched ops in place of per-item ones, indices or offsets drawn with torch.randint on the GPU, "
           "torch.gather, topk over a dim, torch.where in place of a per-item branch")
    return (f"Much of the step is a Python loop that takes one item a turn (x[i], or for x in batch) and runs the same "
            f"ops on it{where}: {loops}, {e['items_each']} turns of about {e['ops_each_item']} ops{nodes}, launching "
            f"{e['kernels_per_step']:.0f} kernels a step ({e['kernels_gpu_ms_per_step']:.3f} ms of GPU time, profiled). "
            "Do it on the whole batch (the estimate is of this: the other turns' CPU work gone, and of their kernels "
            f"the fixed cost and the work a batched kernel does alongside the first item's): {how}." + frozen +
            " If each turn needs the one before (a recurrence stepped over time), it cannot be batched: "
            + graph.replace("the estimate is of this", "estimated as another way")
            .replace("Cut the per-kernel CPU cost: c", "c"))
