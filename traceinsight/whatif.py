"""what-if: transform the timeline graph as a fix would, replay it, and read off the new step time.

The replay is a longest-path walk in topological order:
  CPU call start = previous call's end on its thread + the host and feed time between them
  CPU call end   = start + its own cost; a blocking call also waits for the GPU work its sync edges
                   point at (plus the small return latency it had)
  GPU start      = max(its launch call's start + launch latency, previous activity's end on its stream)
A step's replayed time is max(CPU time between its end marker and the previous one, GPU time between
the last activities of consecutive steps): whichever side is the bottleneck sets the pace.

Launch calls much slower than usual mean the CPU was held back by a full launch queue; their excess
is not a cost of the program, so every replay (the baseline too) caps them (LAUNCH_CAP).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import networkx as nx
import numpy as np

GRAPH_KERNEL_GAP_US = 1.0     # kernel-to-kernel spacing inside a CUDA graph replay
UNBLOCKED_CALL_US = 5.0       # a call that no longer waits costs about what a launch costs
PINNED_GBPS_DEFAULT = 20.0    # conservative pinned H2D bandwidth when the trace shows none


@dataclass
class Replay:
    step_us: dict[int, float]

    @property
    def median_us(self) -> float:
        vals = list(self.step_us.values())
        return float(np.median(vals)) if vals else float("nan")


def launch_cap(G: nx.DiGraph) -> float:
    durs = [d["dur"] for n, d in G.nodes(data=True) if n[0] == "cpu" and d["rkind"] == "launch"]
    return max(4.0 * float(np.median(durs)), 30.0) if durs else 30.0


def apply(G: nx.DiGraph, transform: dict, pinned_gbps: float = PINNED_GBPS_DEFAULT) -> nx.DiGraph:
    """A copy of G changed as the fix would change the program."""
    G = G.copy()
    nodes = G.nodes
    if transform.get("cuda_graph"):
        for u, v, d in G.edges(data=True):
            if d["kind"] == "cpu_order":
                d["feed_us"] = 0.0
            elif d["kind"] == "launch":
                d["latency_us"] = GRAPH_KERNEL_GAP_US
        for n, d in G.nodes(data=True):
            if n[0] == "cpu" and d["rkind"] == "launch":
                d["dur"] = 0.0
    if transform.get("remove_host_work"):
        for _, _, d in G.edges(data=True):
            if d["kind"] == "cpu_order":
                d["host_us"] = 0.0
    for b in transform.get("unblock", []):
        n = ("cpu", b)
        if n in G:
            _unblock(G, n)
    if transform.get("pin_copies"):
        for n, d in list(G.nodes(data=True)):
            if n[0] == "gpu" and d.get("pageable"):
                d["dur"] = d.get("bytes", 0.0) / (pinned_gbps * 1e3) if d.get("bytes") else d["dur"] / 2
                _detach_from_stream(G, n)
                for c in [u for u, _, k in G.in_edges(n, data="kind") if k == "launch"]:
                    _unblock(G, c)
    if "drop_kernels" in transform:
        pat = re.compile(transform["drop_kernels"])
        for n, d in G.nodes(data=True):
            if n[0] == "gpu" and pat.search(d["name"]):
                d["dur"] = 0.0
                for c, _, k in G.in_edges(n, data="kind"):
                    if k == "launch":
                        nodes[c]["dur"] = 0.0
    if "scale_kernels" in transform:
        pat = re.compile(transform["scale_kernels"], re.I)
        for n, d in G.nodes(data=True):
            if n[0] == "gpu" and d["gkind"] == "kernel" and pat.search(d["name"]):
                d["dur"] *= transform["factor"]
    if "optimizer_regions" in transform:
        for t0, t1, th in transform["optimizer_regions"]:
            for n, d in G.nodes(data=True):
                if n[0] == "cpu" and d["thread"] == th and t0 <= d["ts"] < t1 and d["rkind"] == "launch":
                    d["dur"] = 0.0
                    for _, k, ed in G.out_edges(n, data=True):
                        if ed["kind"] == "launch":
                            nodes[k]["dur"] *= transform["factor"]
                        elif ed["kind"] == "cpu_order":
                            ed["feed_us"] = 0.0
    return G


def _unblock(G: nx.DiGraph, n) -> None:
    for u in [u for u, _, k in G.in_edges(n, data="kind") if k == "sync"]:
        G.remove_edge(u, n)
    G.nodes[n]["dur"] = min(G.nodes[n]["dur"], UNBLOCKED_CALL_US)
    G.nodes[n]["unblocked"] = True


def _detach_from_stream(G: nx.DiGraph, n) -> None:
    """Move an activity to a stream of its own (a prefetch stream): its neighbours close ranks."""
    preds = [u for u, _, k in G.in_edges(n, data="kind") if k == "stream"]
    succs = [v for _, v, k in G.out_edges(n, data="kind") if k == "stream"]
    for u in preds:
        G.remove_edge(u, n)
    for v in succs:
        G.remove_edge(n, v)
    for u in preds:
        for v in succs:
            G.add_edge(u, v, kind="stream", gap_us=0.0)


def simulate(G: nx.DiGraph) -> Replay:
    cap = launch_cap(G)
    start: dict = {}
    end: dict = {}
    try:
        order = list(nx.topological_sort(G))
    except nx.NetworkXUnfeasible:  # inconsistent clocks can make a cycle; fall back to time order
        order = sorted(G.nodes, key=lambda n: G.nodes[n].get("ts", 0.0))
    for n in order:
        kind = n[0]
        if kind == "op":
            continue
        d = G.nodes[n]
        if kind == "gpu":
            t = None
            for u, _, e in G.in_edges(n, data=True):
                if u not in end:
                    continue
                if e["kind"] == "launch":
                    c = start[u] + e["latency_us"]
                elif e["kind"] == "stream":
                    c = end[u] + (e["gap_us"] if not _has_launch(G, n) else 0.0)
                else:
                    continue
                t = c if t is None else max(t, c)
            if t is None:
                t = d["ts"]
            start[n], end[n] = t, t + d["dur"]
            continue
        # CPU call or step marker.
        t = None
        waits = []
        for u, _, e in G.in_edges(n, data=True):
            if u not in end:
                continue
            if e["kind"] == "cpu_order":
                t = end[u] + e["host_us"] + e["feed_us"]
            elif e["kind"] == "sync":
                waits.append(u)
        if t is None:
            t = d["ts"]
        dur = d["dur"]
        if d["rkind"] == "launch":
            dur = min(dur, cap)
        if waits:
            w = max(end[u] for u in waits)
            orig_w = max(G.nodes[u]["end"] for u in waits)
            ret = float(np.clip(d["end"] - orig_w, 0.0, 20.0))
            own = min(dur, UNBLOCKED_CALL_US)
            e_ = max(t + own, w + ret)
        else:
            e_ = t + dur
        start[n], end[n] = t, e_
    return Replay(step_us=_step_times(G, start, end))


def _has_launch(G: nx.DiGraph, n) -> bool:
    return any(k == "launch" for _, _, k in G.in_edges(n, data="kind"))


def _step_times(G: nx.DiGraph, start: dict, end: dict) -> dict[int, float]:
    steps = G.graph["steps"]
    starts = G.graph["step_starts"]
    cpu_mark = {s: start.get(("step", s)) for s in steps}
    # Last GPU end among the work each step issued (by its launch call's original time).
    gpu_last: dict[int, float] = {}
    bounds = np.array(starts + [G.graph["t1"]])
    for n, d in G.nodes(data=True):
        if n[0] != "gpu" or n not in end:
            continue
        launchers = [u for u, _, k in G.in_edges(n, data="kind") if k == "launch"]
        t_orig = G.nodes[launchers[0]]["ts"] if launchers else d["ts"]
        k = int(np.searchsorted(bounds, t_orig, side="right")) - 1
        if 0 <= k < len(steps):
            gpu_last[steps[k]] = max(gpu_last.get(steps[k], -np.inf), end[n])
    # The first step starts where it started: the replay anchors the first call of each thread there.
    prev_cpu, prev_gpu = starts[0], starts[0]
    out = {}
    for s in steps:
        if cpu_mark.get(s) is None:
            continue
        cpu_t = cpu_mark[s] - prev_cpu
        gpu_t = gpu_last[s] - prev_gpu if s in gpu_last else 0.0
        out[s] = max(cpu_t, gpu_t)
        prev_cpu = cpu_mark[s]
        prev_gpu = gpu_last.get(s, prev_gpu)
    return out
