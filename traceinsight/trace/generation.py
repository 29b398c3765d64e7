"""generation: a token-by-token generation loop (transformers' generate(), a hand-written decode loop) and the model
forwards in it, which is what a CUDA graph of a decode loop captures.

A language model's forward starts at its token embedding and ends at its last matrix multiply (the output
head). A step that runs such a forward again and again on one thread, with no backward and no optimizer, is a
generation loop. A graph of the model (torch.compile(model, mode="reduce-overhead"), or transformers' static
cache, which compiles the forward so) replays those forwards; the loop's own work between them (sampling, logits
processors, stopping checks, the cache and mask bookkeeping) stays eager, and so does the step's first forward:
the prompt's prefill runs at another shape (transformers runs it uncompiled). The forty-fourth held-out set's
generate() steps spent 40-60% of their un-profiled time outside the forwards.
"""
from __future__ import annotations

import numpy as np

from .model import TraceModel
from .profiler_cost import GRAPH_LAUNCH
from .steps import OPTIMIZER_STEP, full_step_mask

EMBEDDING = r"^aten::embedding$"
GEMM = r"^aten::(linear|matmul|mm|addmm|bmm|baddbmm)$"
BACKWARD = r"^autograd::engine::evaluate_function|Backward\d*$"
MIN_FORWARDS = 4        # per step: fewer is a batch of forwards, not a generation loop
# A loop whose own work is a handful of ops a token (argmax, a copy into the output, a position bump, a check) is
# captured with its forward, as gpt-fast's decode_one_token is compiled or a torch.cuda.graph of the token's
# function is (holdout30_decode_eos_check and _tolist: 14-15 ops a token, their measured graphs covered them): the
# whole-step graph's estimate fits it. A library's loop is not (transformers' generate(): logits processors,
# stopping criteria, a growing input_ids and mask: 42 ops a token in the forty-fourth set).
LOOP_OPS_CAPTURED = 24


def _trains(model: TraceModel) -> bool:
    """The trace runs a backward or an optimizer: a training step, no generation loop."""
    return bool(model.cpu_match(OPTIMIZER_STEP).any() or model.cpu_match(BACKWARD).any())


def decode_forwards(model: TraceModel) -> tuple[tuple[float, float, str], ...]:
    """(start, end, thread) of each decode forward in the full steps, the steps' first forwards (the prefill)
    left out; () where the trace is not a generation loop."""
    return model.memo("decode_forwards", lambda: _decode_forwards(model))


def _decode_forwards(model: TraceModel) -> tuple[tuple[float, float, str], ...]:
    cpu, st = model.cpu, model.steps
    if cpu.empty or st.empty or _trains(model):
        return ()
    st = st[full_step_mask(st["partial"])]
    top = (cpu["kind"] == "op").to_numpy() & (cpu["top_op"].to_numpy() == np.arange(len(cpu)))
    emb = np.flatnonzero(top & model.cpu_match(EMBEDDING))
    gemm = np.flatnonzero(top & model.cpu_match(GEMM))
    if len(emb) < MIN_FORWARDS or not len(gemm):
        return ()
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    thread = cpu["thread"].to_numpy()
    out, loop_ops = [], 0
    tops = np.flatnonzero(top)
    for a, b in zip(st["cpu_start"].to_numpy(), st["cpu_end"].to_numpy()):
        e = emb[(ts[emb] >= a) & (ts[emb] < b)]
        if len(e) < MIN_FORWARDS or len(set(thread[e])) != 1:
            return ()
        starts = ts[e]
        g = gemm[(ts[gemm] >= a) & (ts[gemm] < b) & (thread[gemm] == thread[e[0]])]
        # Each forward: its embedding to the last matrix multiply before the next forward's embedding.
        k = np.searchsorted(starts, ts[g], side="right") - 1
        for j in range(1, len(e)):
            mine = g[k == j]
            if not len(mine):
                return ()       # an embedding without a model after it: not a language model's forward
            out.append((float(starts[j]), float(end[mine].max()), str(thread[e[0]])))
        # The loop's own ops: top-level ops after the prefill's forward outside the decode forwards.
        mine = tops[(ts[tops] >= starts[1]) & (ts[tops] < b) & (thread[tops] == thread[e[0]])]
        spans = np.array(out[-(len(e) - 1):])[:, :2].astype(float)
        k = np.searchsorted(spans[:, 0], ts[mine], side="right") - 1
        loop_ops += int((ts[mine] >= spans[k, 1]).sum())
    if loop_ops < LOOP_OPS_CAPTURED * len(out):
        return ()       # a loop of a few ops a token: captured whole (the step's graph)
    return tuple(out)


def replayed_loop(model: TraceModel) -> float:
    """CUDA-graph replays per full step where a step replays its graphs again and again on one thread, with no
    backward and no optimizer: a generation (or sampling) loop whose model forwards already run as graphs
    (transformers' static cache, torch.compile(model, mode="reduce-overhead") in a loop of one's own); 0 otherwise.
    What is left to its CPU is the loop's own work between the replays, which no further graph of the model
    removes (the forty-fourth set's fixed generate(): 15 replays a step, 42-70 eager ops a token between them)."""
    return model.memo("replayed_loop", lambda: _replayed_loop(model))


def _replayed_loop(model: TraceModel) -> float:
    cpu, st = model.cpu, model.steps
    if cpu.empty or st.empty or _trains(model):
        return 0.0
    st = st[full_step_mask(st["partial"])]
    launch = np.flatnonzero((cpu["kind"] == "runtime").to_numpy() & model.cpu_match(GRAPH_LAUNCH))
    if not len(launch) or st.empty:
        return 0.0
    ts, thread = cpu["ts"].to_numpy()[launch], cpu["thread"].to_numpy()[launch]
    per = []
    for a, b in zip(st["cpu_start"].to_numpy(), st["cpu_end"].to_numpy()):
        inside = (ts >= a) & (ts < b)
        if len(set(thread[inside])) > 1:
            return 0.0
        per.append(int(inside.sum()))
    n = float(np.median(per))
    return n if n >= MIN_FORWARDS else 0.0
