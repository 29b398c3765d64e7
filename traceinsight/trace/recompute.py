"""Activation checkpointing's recomputation inside the window (torch.utils.checkpoint.checkpoint, checkpoint_sequential,
Hugging Face's gradient_checkpointing_enable()).

A checkpointed segment keeps only its input in the forward pass and runs its forward again in the backward pass, before
its own backward: the segment's forward ops (linears, convolutions, norms, attention, activations) run inside a
backward node's `autograd::engine::evaluate_function: ...` range, on autograd's thread. With use_reentrant=True that node
is `CheckpointFunctionBackward` (whose own inner backward follows the recompute in the same range); with
use_reentrant=False it is whichever node first unpacks a saved tensor of the segment (a linear's AddmmBackward0).
A backward formula never calls these ops by these names (a linear's backward is mm, a norm's native_*_backward, a
ReLU's threshold_backward), so several of them under one node are a forward run again. (Recorded on the CPU with
torch 2.13 for the fifty-second held-out set before it ran on a GPU, then read on its H100 traces, torch 2.11: 10
outermost forward ops a layer under AddmmBackward0; re-entrant segments under CheckpointFunctionBackward.)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .nesting import innermost_marked
from .steps import merged_intervals, step_at

# Composite forward ops a backward formula does not call (matched through model.cpu_match, once per distinct name).
# (In-place activations too: torchvision's bottlenecks end a segment with relu_, after the residual add_.)
FORWARD_ONLY = (r"^aten::(linear|layer_norm|group_norm|rms_norm|batch_norm|instance_norm|conv[123]d|conv_transpose[123]d"
                r"|scaled_dot_product_attention|dropout|embedding|relu_?|gelu_?|silu_?|hardtanh_?|leaky_relu_?"
                r"|hardswish_?|softmax|log_softmax)$")
# torch.utils.checkpoint's own Python (with_stack traces only): its pack and unpack hooks, the RNG and device state it
# saves and restores, its wrapper's set-up; those of its frames that hold no forward op (the others run the segment).
HOOK_FRAME = r"^torch/utils/checkpoint\.py\(\d+\): "
ENGINE_FN = r"^autograd::engine::evaluate_function: "
REENTRANT_NODE = r"^autograd::engine::evaluate_function: CheckpointFunctionBackward"
MIN_OPS = 3                   # fewer under one node is not a segment run again (a custom Function's own F.linear;
                              # outermost ops only: aten::linear inside aten::linear is one)
STEADY_SHARE = 0.5            # of the full steps: recomputing in this many is what the program does each step
COLUMNS = ["thread", "start", "end", "ops", "node", "step"]


def segments(model) -> pd.DataFrame:
    """One row per backward node that ran a segment's forward again: thread, start, end (the node's start to its own
    backward's), ops (the outermost forward ops), node (the engine range's name), step."""
    def compute():
        cpu = model.cpu
        if cpu.empty or "parent" not in cpu:
            return pd.DataFrame(columns=COLUMNS)
        is_op = (cpu["kind"] == "op").to_numpy()
        fw = is_op & model.cpu_match(FORWARD_ONLY)
        engine = is_op & model.cpu_match(ENGINE_FN)
        if not fw.any() or not engine.any():
            return pd.DataFrame(columns=COLUMNS)
        parent = cpu["parent"].to_numpy()
        node = innermost_marked(parent, cpu["depth"].to_numpy(), engine)
        rows = np.flatnonzero(fw & (node >= 0))
        rows = rows[~((parent[rows] >= 0) & fw[np.maximum(parent[rows], 0)])]      # (outermost)
        ts, end = cpu["ts"].to_numpy(dtype=float), cpu["end"].to_numpy(dtype=float)
        t = pd.DataFrame({"node_row": node[rows], "last": end[rows]})
        out = t.groupby("node_row").agg(last=("last", "max"), ops=("last", "size")).reset_index()
        # (re-entrant checkpoint's own node needs no count: its name says what it is; a two-op stem segment has two)
        named = model.cpu_match(REENTRANT_NODE)[out["node_row"].to_numpy()]
        out = out[(out["ops"] >= MIN_OPS) | named].reset_index(drop=True)
        if out.empty:
            return pd.DataFrame(columns=COLUMNS)
        r = out["node_row"].to_numpy()
        out["thread"] = cpu["thread"].to_numpy()[r]
        # The recompute is the node's work from its start (the saved tensors' unpack hooks, re-entrant checkpoint's
        # set-up) until the node's own backward begins: the first op to start after the last forward op ended (the
        # early stop of a non-re-entrant recompute, 0.25 ms of Python a layer, falls inside).
        out["start"] = ts[r]
        out["end"] = _next_op_start(cpu, is_op, out["thread"].to_numpy(), out["last"].to_numpy(), end[r])
        out["node"] = [str(n).split(": ", 1)[-1] for n in cpu["name"].to_numpy()[r]]
        out["step"] = (step_at(model.steps, out["start"].to_numpy(), "cpu_start", "cpu_end") if len(model.steps)
                       else -1)
        return out[COLUMNS].sort_values("start", kind="stable").reset_index(drop=True)
    return model.memo("recompute_segments", compute)


def _next_op_start(cpu: pd.DataFrame, is_op: np.ndarray, threads: np.ndarray, after: np.ndarray,
                   until: np.ndarray) -> np.ndarray:
    """Per (thread, after, until): the start of the first op on the thread in [after, until), else until."""
    out = until.astype(float).copy()
    ts, th = cpu["ts"].to_numpy(dtype=float), cpu["thread"].to_numpy()
    for name in set(threads.tolist()):
        starts = np.sort(ts[is_op & (th == name)])
        k = threads == name
        j = np.searchsorted(starts, after[k], side="left")
        nxt = np.where(j < len(starts), starts[np.minimum(j, len(starts) - 1)], np.inf)
        out[k] = np.minimum(out[k], nxt)
    return out


def steady(model, full_steps) -> bool:
    """A segment was run again in most of these full steps."""
    s = segments(model)
    full = set(int(x) for x in full_steps)
    return bool(full) and len(set(s["step"].astype(int)) & full) >= STEADY_SHARE * len(full)


def recompute_spans(model) -> tuple[tuple[str, float, float], ...]:
    """(thread, start, end) of each recomputed forward: what the fix takes out of the step."""
    s = segments(model)
    return tuple((str(th), float(a), float(b)) for th, a, b in zip(s["thread"], s["start"], s["end"]))


def hook_spans(model) -> tuple[tuple[str, float, float], ...]:
    """(thread, start, end) of checkpointing's own Python outside the recomputed forwards, merged: the forward's pack
    hooks (one per saved tensor), the RNG and device states, the unpack hooks that recompute nothing. Only a trace with
    Python frames shows them; without, they hide in the forward ops' own time (a review of h100_clean65A: 3.2 ms of a
    profiled step's 14.7 ms of checkpointing CPU)."""
    def compute():
        cpu = model.cpu
        if cpu.empty or not (cpu["kind"] == "python").any() or segments(model).empty:
            return ()
        frames = np.flatnonzero((cpu["kind"] == "python").to_numpy() & model.cpu_match(HOOK_FRAME))
        if not len(frames):
            return ()
        ts, end, th = cpu["ts"].to_numpy(dtype=float), cpu["end"].to_numpy(dtype=float), cpu["thread"].to_numpy()
        fw = np.flatnonzero((cpu["kind"] == "op").to_numpy() & model.cpu_match(FORWARD_ONLY))
        out = []
        spans = recompute_spans(model)
        for name in set(th[frames].tolist()):
            f = frames[th[frames] == name]
            starts = np.sort(ts[fw[th[fw] == name]])
            holds = np.searchsorted(starts, end[f], "left") > np.searchsorted(starts, ts[f], "left")
            f = f[~holds]
            mine = [(a, b) for t, a, b in spans if t == name]
            if mine:
                sa, sb = merged_intervals(*np.array(mine).T)       # (sorted, disjoint: one search per frame)
                j = np.searchsorted(sa, ts[f], "right") - 1
                f = f[~((j >= 0) & (ts[f] < sb[np.maximum(j, 0)]))]
            a, b = merged_intervals(ts[f], end[f])
            out += [(str(name), float(x), float(y)) for x, y in zip(a, b)]
        return tuple(out)
    return model.memo("recompute_hook_spans", compute)
