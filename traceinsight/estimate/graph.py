"""graph: the timeline as a networkx DiGraph, built over a window of steps (not the whole trace).

Nodes
  ("cpu", i)   a runtime/driver call (cpu table row i): launch, memcpy, memset, sync, other.
  ("gpu", j)   a kernel / memcpy / memset (gpu table row j).
  ("step", n)  the end of step n on the thread that owns the ProfilerStep ranges.
Edges (attribute `kind`)
  cpu_order    consecutive calls on one thread; `host_us` and `feed_us` split the CPU time between them
               into host work that launches nothing and work that feeds the GPU (dispatch, Python);
               `input_us` is the input pipeline's part of host_us.
  launch       runtime call -> the GPU activity it issued; `latency_us` from call start to GPU start.
  stream       consecutive activities on one (device, stream); `gap_us` between them.
  sync         GPU activity -> the blocking call that waited for it (stream/device/event sync). A call
               that waits for a copy it issued itself (D2H, pageable H2D) has `own_copy` and a sync
               edge from the activity before that copy on its stream.
  nests        op -> runtime call below it (op nesting, for evidence; the replay ignores these).

Only the calls that matter for the timeline become nodes (runtime calls and GPU work): a
million-event trace gives a graph of a few thousand nodes per step window.
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from ..trace.facts import BLOCK_TOL_US, blocking_calls, in_compiled_region, launch_latency_us
from ..trace.unasked import UNASKED, calls_made_in
from ..trace.host import HostActivity
from ..trace.model import TraceModel

WAKE_US = 100.0   # a helper thread idle (in no op) this long between calls was parked, then woken
JOIN_COVER = 0.5  # a helper busy over this share of a loop-thread stretch: the loop waited for it


def step_window(model: TraceModel, max_steps: int = 6) -> pd.DataFrame:
    """The steps the replay runs over: up to max_steps consecutive full steps from the middle."""
    st = model.steps[~model.steps["partial"]]
    if st.empty:
        st = model.steps
    if len(st) <= max_steps:
        return st
    mid = len(st) // 2
    lo = max(0, mid - max_steps // 2)
    return st.iloc[lo:lo + max_steps]


def build_graph(model: TraceModel, host: HostActivity, steps: pd.DataFrame) -> nx.DiGraph:
    cpu, gpu = model.cpu, model.gpu
    # The CPU side of the steps: the calls the loop made, and its step markers.
    t0, t1 = float(steps["cpu_start"].min()), float(steps["cpu_end"].max())
    G = nx.DiGraph(t0=t0, t1=t1, steps=[int(s) for s in steps["step"]],
                   step_starts=[float(x) for x in steps["cpu_start"]],
                   launch_latency_us=launch_latency_us(model))
    rt = cpu[(cpu["kind"] == "runtime") & (cpu["ts"] >= t0) & (cpu["ts"] < t1)]
    launched = gpu[gpu["launcher"].isin(rt.index)]
    # Work with no launch in the window that runs while the window's work does: a backlog from
    # earlier steps (the GPU lags), CUDA-graph replays, other processes. It holds its stream's place.
    t_gpu = max(t1, float(launched["end"].max())) if len(launched) else t1
    unlaunched = gpu[~gpu.index.isin(launched.index) & (gpu["end"] > t0) & (gpu["ts"] < t_gpu)]
    g = pd.concat([launched, unlaunched]).sort_values("ts", kind="stable")

    compiled = in_compiled_region(model)
    # Calls made in work the program did not ask for (trace/unasked.py: the autotuner's launches and syncs while
    # torch.compile compiled, cuDNN's trials, autograd's NaN checks).
    made_in = calls_made_in(model, rt.index.to_numpy())
    unasked: list[tuple] = [()] * len(rt)
    for n in np.flatnonzero(np.logical_or.reduce(list(made_in.values()))):
        unasked[n] = tuple(k for k, m in made_in.items() if m[n])
    for i, r, u in zip(rt.index, rt.itertuples(index=False), unasked):
        G.add_node(("cpu", i), ts=r.ts, dur=r.dur, end=r.end, thread=r.thread, rkind=r.rkind, name=r.name,
                   compiled=bool(compiled[i]), unasked=u)
    for j, r in zip(g.index, g.itertuples(index=False)):
        G.add_node(("gpu", j), ts=r.ts, dur=r.dur, end=r.end, stream=(r.device, r.stream), name=r.name,
                   gkind=r.kind, pageable=bool(r.pageable), launcher=int(r.launcher),
                   bytes=float(r.bytes), copy_dir=r.copy_dir)
    # A job's collective kernels: how long each waited for the other ranks (trace/peer_waits.py).
    if "peer_wait" in g:
        for j, w in zip(g.index, g["peer_wait"].to_numpy()):
            if w > 0:
                G.nodes[("gpu", j)]["peer_wait"] = float(w)

    # Step markers on the thread that owns the ProfilerStep ranges (the training loop's thread).
    step_rows = cpu[cpu["is_step"].to_numpy()]
    loop_thread = step_rows["thread"].mode().iloc[0] if len(step_rows) else (
        rt["thread"].mode().iloc[0] if len(rt) else "")
    for s in steps.itertuples():
        G.add_node(("step", int(s.step)), ts=s.cpu_end, dur=0.0, end=s.cpu_end, thread=loop_thread,
                   rkind="marker", name=f"end of step {s.step}")
    # The window's start, so the host work before the first call is an edge a fix can shrink.
    G.add_node(("start", 0), ts=t0, dur=0.0, end=t0, thread=loop_thread, rkind="marker",
               name="start of the window")

    _cpu_order(G, host, loop_thread)
    _launch_edges(G, g, cpu)
    _stream_edges(G, g)
    _sync_edges(G, model, rt, g)
    _nesting(G, cpu, rt)
    return G


def _cpu_order(G: nx.DiGraph, host: HostActivity, loop_thread: str) -> None:
    """Consecutive calls on a thread. A helper thread (autograd's backward thread) that sat idle
    between calls was woken by the loop thread: its next call hangs off the loop thread's latest call
    instead, so a fix that speeds up the loop also moves the helper thread's work."""
    rows = [(d["thread"], d["ts"], d["end"], n) for n, d in G.nodes(data=True) if n[0] in ("cpu", "step", "start")]
    rows.sort(key=lambda x: (x[0], x[1]))
    by_thread: dict[str, list] = {}
    for r in rows:
        by_thread.setdefault(r[0], []).append(r)
    loop = by_thread.get(loop_thread, [])
    loop_ts = np.array([r[1] for r in loop])
    for th, rs in by_thread.items():
        if th != loop_thread and len(loop):
            # The helper thread's first call in the window was also set off by the loop thread.
            j = int(np.searchsorted(loop_ts, rs[0][1], side="right")) - 1
            if j >= 0:
                G.add_edge(loop[j][3], rs[0][3], kind="cpu_order", host_us=0.0, input_us=0.0,
                           feed_us=max(0.0, rs[0][1] - loop[j][2]), wake=True)
        if len(rs) < 2:
            continue
        a = np.array([r[2] for r in rs[:-1]])
        b = np.array([max(r[1], p[2]) for p, r in zip(rs[:-1], rs[1:])])
        host_us = host.host_time(th, a, b)
        covered = host.covered_time(th, a, b)
        bare = host.bare_time(th, a, b)
        inp = host.input_time(th, a, b)
        comp = host.compiled_time(a, b)
        # Work the program did not ask for (torch.compile compiling, cuDNN's search, autograd's anomaly detection):
        # a bucket of its own per kind, which only that kind's fix takes away (trace/unasked.py).
        theirs = [(u.key, u.host_us(host.model, a, b)) for u in UNASKED]
        for k, (p, r) in enumerate(zip(rs[:-1], rs[1:])):
            gap = max(0.0, r[1] - p[2])
            if th != loop_thread and gap - covered[k] >= WAKE_US and len(loop):
                j = int(np.searchsorted(loop_ts, r[1], side="right")) - 1
                # (Only a loop call after the helper's previous one can have woken it: a loop thread blocked since
                # before it, in loss.backward(), did not, and the stretch is the helper's own engine work.)
                if j >= 0 and loop[j][3] != r[3] and loop[j][2] > p[2]:
                    src = loop[j]
                    G.add_edge(src[3], r[3], kind="cpu_order", host_us=0.0, input_us=0.0,
                               feed_us=max(0.0, r[1] - src[2]), wake=True)
                    continue
            rest, own, buckets = gap, host_us[k], {}
            for key, us in theirs:
                buckets[key] = float(min(rest, us[k]))
                rest, own = rest - buckets[key], own - buckets[key]
            h = float(min(rest, max(0.0, own)))
            f = rest - h
            # Of the feed, the program's own Python (host.bare_time): what a CUDA graph keeps.
            G.add_edge(p[3], r[3], kind="cpu_order", host_us=h, feed_us=f, unasked_us=buckets,
                       input_us=float(min(h, inp[k])), bare_us=float(min(max(0.0, bare[k] - h), f)),
                       compiled_us=float(min(comp[k], f)))
    _joins(G, by_thread, loop_thread, host)


def _joins(G: nx.DiGraph, by_thread: dict, loop_thread: str, host: HostActivity) -> None:
    """The loop thread blocked while a helper thread worked (loss.backward() waits for autograd's device
    thread): its next call follows the helper's last call, not its own previous one, so a fix that
    shortens the helper's work (the backward of a boolean index) also shortens the step. A stretch counts
    as a wait when the helper was in its ops for JOIN_COVER of it (the loop resumes some 200 us after
    the last call: autograd's own work after it, which the join edge keeps). A helper that only made a
    few calls in it (the pin-memory thread while the loop waits for a DataLoader worker) is not waited on."""
    helpers = sorted((r for th, rs in by_thread.items() if th != loop_thread for r in rs), key=lambda r: r[1])
    loop = by_thread.get(loop_thread, [])
    if not helpers or len(loop) < 2:
        return
    h_ts = np.array([r[1] for r in helpers])
    has_ops = any(len(a.s) for a in host.cover.values())
    for p, r in zip(loop[:-1], loop[1:]):
        gap = r[1] - p[2]
        if gap < WAKE_US:
            continue
        lo, hi = np.searchsorted(h_ts, p[2], "left"), np.searchsorted(h_ts, r[1], "left")
        inside = [h for h in helpers[lo:hi] if h[2] <= r[1]]
        if not inside:
            continue
        last = max(inside, key=lambda h: h[2])
        if last[2] - inside[0][1] < JOIN_COVER * gap:
            continue
        # (A trace without CPU ops cannot say how busy the helper was: its calls' span decides.)
        if has_ops and host.covered_time(last[0], np.array([p[2]]), np.array([r[1]]))[0] < JOIN_COVER * gap:
            continue
        G.remove_edge(p[3], r[3])
        G.add_edge(last[3], r[3], kind="cpu_order", host_us=0.0, input_us=0.0, feed_us=r[1] - last[2],
                   wake=True, join=True)


def _launch_edges(G: nx.DiGraph, g: pd.DataFrame, cpu: pd.DataFrame) -> None:
    """latency_us: launch call start -> GPU start, capped at the typical launch latency. A longer
    delay is queueing behind earlier work (the stream edge already says so), not launch cost."""
    cap = G.graph["launch_latency_us"]
    cpu_ts = cpu["ts"].to_numpy()
    G.add_edges_from((("cpu", int(lr)), ("gpu", j),
                      {"kind": "launch", "latency_us": min(cap, max(0.0, float(ts - cpu_ts[int(lr)])))})
                     for j, lr, ts in zip(g.index, g["launcher"].to_numpy(), g["ts"].to_numpy())
                     if lr >= 0 and ("cpu", lr) in G)


def _stream_edges(G: nx.DiGraph, g: pd.DataFrame) -> None:
    for _, s in g.groupby(["device", "stream"], sort=False):
        idx = s.index.to_numpy()
        gaps = s["ts"].to_numpy()[1:] - s["end"].to_numpy()[:-1]
        G.add_edges_from((("gpu", a), ("gpu", b), {"kind": "stream", "gap_us": max(0.0, float(gap))})
                         for a, b, gap in zip(idx[:-1], idx[1:], gaps))


def _sync_edges(G: nx.DiGraph, model: TraceModel, rt: pd.DataFrame, g: pd.DataFrame) -> None:
    """A blocking call waited for: its own copy (D2H/pageable), else the last GPU work issued before it."""
    blocks = blocking_calls(model)
    blocks = blocks[blocks.index.isin(rt.index)]
    if blocks.empty or g.empty:
        return
    cpu = model.cpu
    own_rows = g[g["launcher"].isin(blocks.index)].drop_duplicates("launcher")
    own = dict(zip(own_rows["launcher"].to_numpy(), own_rows.index.to_numpy()))
    launched = g[g["launcher"] >= 0]
    lts = cpu["ts"].to_numpy()[launched["launcher"].to_numpy()]
    order = np.argsort(lts, kind="stable")
    lts_sorted = lts[order]
    ends = launched["end"].to_numpy()[order]
    idx_sorted = launched.index.to_numpy()[order]
    for b, r in zip(blocks.index, blocks.itertuples(index=False)):
        G.nodes[("cpu", b)]["block_kind"] = r.block_kind
        if b in own:
            # The call waits for its own copy, which waits for the work before it on its stream. An
            # edge copy -> call would close a cycle with the launch edge, so the call points at the
            # copy (own_copy: the replay times it inline) and waits on the copy's stream predecessor.
            j = ("gpu", int(own[b]))
            G.nodes[("cpu", b)]["own_copy"] = j
            for p, _, k in list(G.in_edges(j, data="kind")):
                if k == "stream":
                    G.add_edge(p, ("cpu", b), kind="sync")
            continue
        # Work issued before the call started; the one finishing last is what it waited for.
        k = int(np.searchsorted(lts_sorted, r.ts, side="left"))
        if k == 0:
            continue
        pos = int(np.argmax(ends[:k]))
        if r.ts - BLOCK_TOL_US <= ends[pos] <= r.end + BLOCK_TOL_US:
            G.add_edge(("gpu", int(idx_sorted[pos])), ("cpu", b), kind="sync")


def _nesting(G: nx.DiGraph, cpu: pd.DataFrame, rt: pd.DataFrame) -> None:
    """op -> runtime call edges for the innermost op above each call (evidence only)."""
    parents = cpu["parent"].to_numpy()
    names, ts = cpu["name"].to_numpy(), cpu["ts"].to_numpy()
    dur, end, thread = cpu["dur"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    for i in rt.index.to_numpy():
        p = int(parents[i])
        if p < 0:
            continue
        node = ("op", p)
        if node not in G:
            G.add_node(node, name=names[p], ts=float(ts[p]), dur=float(dur[p]), end=float(end[p]),
                       thread=thread[p], rkind="op")
        G.add_edge(node, ("cpu", int(i)), kind="nests")
