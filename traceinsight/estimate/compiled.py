"""The timeline graph as flat arrays, in topological order: what the what-if replay (replay.py) runs on.

Compiled once per graph; a fix changes a copy of its arrays (state.State), never the graph.
"""
from __future__ import annotations

import re

import networkx as nx
import numpy as np

from ..trace.unasked import KEYS

QUEUED_GAP_MAX_US = 5.0      # a larger "queued" gap is something else (a wait the graph does not show)


class Compiled:
    """The graph as arrays, indexed by position in topological order."""

    def __init__(self, G: nx.DiGraph):
        try:
            order = [n for n in nx.topological_sort(G) if n[0] != "op"]
        except nx.NetworkXUnfeasible:  # inconsistent clocks can make a cycle; fall back to time order
            order = sorted((n for n in G.nodes if n[0] != "op"), key=lambda n: G.nodes[n]["ts"])
        pos = {n: i for i, n in enumerate(order)}
        n = len(order)
        self.nodes = order
        data = [G.nodes[x] for x in order]      # (each node's attributes, looked up once)
        self.is_gpu = np.array([x[0] == "gpu" for x in order], dtype=bool)
        self.ts = np.array([a["ts"] for a in data], dtype=float)
        self.end = np.array([a["end"] for a in data], dtype=float)
        self.dur = np.array([a["dur"] for a in data], dtype=float)
        self.rkind = [a.get("rkind", "") for a in data]
        self.names = [a.get("name", "") for a in data]
        self.gkind = [a.get("gkind", "") for a in data]
        self.pageable = np.array([bool(a.get("pageable", False)) for a in data])
        self.to_device = np.array([a.get("copy_dir") == "HtoD" for a in data], dtype=bool)
        # A call that waited mostly for the GPU queue before its copy to the host (trace/facts.py).
        self.copy_sync = np.array([a.get("block_kind") == "copy_sync" for a in data], dtype=bool)
        self.bytes = np.array([a.get("bytes", 0.0) for a in data], dtype=float)
        # A job's collective kernel waits this long for the other ranks once it could start (trace/peer_waits.py).
        self.peer_wait = np.array([a.get("peer_wait", 0.0) for a in data], dtype=float)
        self.thread = [a.get("thread", "") for a in data]
        self.compiled = np.array([bool(a.get("compiled", False)) for a in data], dtype=bool)
        # Per kind of work the program did not ask for (trace/unasked.py): the calls made in it, and (below) its
        # bucket of each edge's time; `theirs`, the calls made in any of them.
        made = [a.get("unasked", ()) for a in data]
        self.made_in = {k: np.array([k in m for m in made], dtype=bool) for k in KEYS}
        self.theirs = np.logical_or.reduce([np.zeros(n, dtype=bool), *self.made_in.values()])
        self.cpred = np.full(n, -1, dtype=np.int64)
        self.csucc = np.full(n, -1, dtype=np.int64)
        self.host = np.zeros(n)
        self.input = np.zeros(n)
        self.bare = np.zeros(n)
        self.compiled_us = np.zeros(n)
        self.unasked = {k: np.zeros(n) for k in KEYS}
        self.feed = np.zeros(n)
        self.join = np.zeros(n, dtype=bool)     # the edge in follows a helper thread's last call
        self.lpred = np.full(n, -1, dtype=np.int64)
        self.latency = np.zeros(n)
        self.spred = np.full(n, -1, dtype=np.int64)
        self.ssucc = np.full(n, -1, dtype=np.int64)
        self.sgap = np.zeros(n)
        self.syncs: list[list[int]] = [[] for _ in range(n)]
        self.own = np.array([pos.get(a.get("own_copy"), -1) for a in data], dtype=np.int64)
        # A blocking copy to pageable host memory: how long its call ran on after the DMA (replay.py).
        j = np.maximum(self.own, 0)
        self.staged_tail = np.where((self.own >= 0) & self.pageable[j] & ~self.to_device[j],
                                    np.maximum(self.end - self.end[j], 0.0), 0.0)
        for u, v, d in G.edges(data=True):
            if u not in pos or v not in pos:
                continue
            a, b = pos[u], pos[v]
            k = d["kind"]
            if k == "cpu_order":
                self.cpred[b], self.csucc[a] = a, b
                self.host[b], self.feed[b] = d["host_us"], d["feed_us"]
                self.input[b] = d.get("input_us", 0.0)
                self.bare[b] = d.get("bare_us", 0.0)
                self.compiled_us[b] = d.get("compiled_us", 0.0)
                for key, us in d.get("unasked_us", {}).items():
                    self.unasked[key][b] = us
                self.join[b] = bool(d.get("join", False))
            elif k == "launch":
                self.lpred[b], self.latency[b] = a, d["latency_us"]
            elif k == "stream":
                self.spred[b], self.ssucc[a], self.sgap[b] = a, b, d["gap_us"]
            elif k == "sync":
                self.syncs[b].append(a)
        # The innermost op above each runtime call (nests edges; -1 where none).
        self.op = np.full(n, -1, dtype=np.int64)
        for u, v, k in G.edges(data="kind"):
            if k == "nests" and v in pos:
                self.op[pos[v]] = u[1]
        self.steps = G.graph["steps"]
        self.step_starts = G.graph["step_starts"]
        self.t1 = G.graph["t1"]
        self.markers = {x[1]: pos[x] for x in order if x[0] == "step"}
        # The steps a replay reports (all replayed ones unless set: the quiet steps of a disturbed host).
        self.report_steps: set | None = None
        # Every replayed step time is multiplied by this: 1, or a measured un-profiled step over the replay's
        # (the host's own pace; estimate/rank.py).
        self.time_scale = 1.0
        # Which step issued each GPU activity (by its launch call's original time).
        issue_t = np.where(self.lpred >= 0, self.ts[np.maximum(self.lpred, 0)], self.ts)
        bounds = np.array(list(self.step_starts) + [self.t1])
        k = np.searchsorted(bounds, issue_t, side="right") - 1
        self.gpu_step = np.where(self.is_gpu & (k >= 0) & (k < len(self.steps)), k, -1)
        launch_durs = self.dur[[r == "launch" for r in self.rkind]] if n else np.array([])
        self.gpu_pos = {x[1]: i for i, x in enumerate(order) if x[0] == "gpu"}
        self.cpu_pos = {x[1]: i for i, x in enumerate(order) if x[0] == "cpu"}
        # The first GPU activity each step issued (by its launch call's time).
        first: dict[int, int] = {}
        for i in np.flatnonzero(self.gpu_step >= 0):
            k = int(self.gpu_step[i])
            if k not in first or issue_t[i] < issue_t[first[k]]:
                first[k] = int(i)
        self.first_gpu_of_step = sorted(first.values())
        self.cpu_idx = np.flatnonzero(~self.is_gpu)
        self.gpu_idx = np.flatnonzero(self.is_gpu)
        # The loop's thread (the step markers'): the warm rest after host work leaves applies there only.
        loop = list({self.thread[m] for m in self.markers.values()})
        self.loop_cpu_idx = (self.cpu_idx[np.isin(np.asarray(self.thread, dtype=object)[self.cpu_idx], loop)]
                             if loop else self.cpu_idx)
        self.is_launch = np.array([r == "launch" for r in self.rkind], dtype=bool)
        self.launch_cap = max(4.0 * float(np.median(launch_durs)), 30.0) if len(launch_durs) else 30.0
        self.is_kernel = np.array([k == "kernel" for k in self.gkind], dtype=bool)
        self.queued_gap = self._queued_gap()
        self._gpu_names: tuple[np.ndarray, list] | None = None

    def cpu_positions(self, rows) -> np.ndarray:
        """The replay positions of cpu rows (those the replay holds; the rest are dropped)."""
        return np.array(sorted({self.cpu_pos[r] for r in rows if r in self.cpu_pos}), dtype=np.int64)

    def _queued_gap(self) -> float:
        """The GPU's own gap between two kernels of a stream when the second was already queued (its
        launch call began before the first ended): median over the trace, at most QUEUED_GAP_MAX_US.
        An eager kernel pays it even in a GPU-bound step; fusing or dropping kernels removes it."""
        i = self.gpu_idx[self.is_kernel[self.gpu_idx]]
        sp, lp = self.spred[i], self.lpred[i]
        ok = (sp >= 0) & (lp >= 0)
        i, sp, lp = i[ok], sp[ok], lp[ok]
        ok = self.is_kernel[sp] & (self.ts[lp] < self.end[sp])
        gaps = self.ts[i[ok]] - self.end[sp[ok]]
        gaps = gaps[gaps >= 0]
        return float(min(np.median(gaps), QUEUED_GAP_MAX_US)) if len(gaps) else 0.0

    def step_times(self, start: list, end: list) -> dict[int, float]:
        """Each (reported) step's replayed duration from the replay's start and end times per node."""
        gpu_last: dict[int, float] = {}
        for i in np.flatnonzero(self.gpu_step >= 0):
            k = self.steps[self.gpu_step[i]]
            if end[i] > gpu_last.get(k, -np.inf):
                gpu_last[k] = end[i]
        # The first step starts where it started: the replay anchors each thread's first call there.
        # A step ends when both its CPU part (its end marker) and the GPU work it issued are done.
        prev = self.step_starts[0]
        out = {}
        for st in self.steps:
            m = self.markers.get(st)
            if m is None:
                continue
            done = max(start[m], gpu_last.get(st, -np.inf))
            if self.report_steps is None or st in self.report_steps:
                out[st] = (done - prev) * self.time_scale
            prev = done
        return out

    def gpu_named(self, pattern: str, flags: int = 0) -> np.ndarray:
        """Positions of the GPU nodes whose name the regex finds (searched once per distinct name), but those launched
        in work the program did not ask for (the autotuner's, cuDNN's trials, autograd's NaN checks): a fix of the
        program's kernels leaves those alone (their own fixes remove them)."""
        if self._gpu_names is None:
            index: dict = {}
            codes = [index.setdefault(self.names[i], len(index)) for i in self.gpu_idx.tolist()]
            self._gpu_names = np.array(codes, dtype=np.int64), list(index)
        codes, uniques = self._gpu_names
        rx = re.compile(pattern, flags)
        hit = np.array([bool(rx.search(u)) for u in uniques] + [False])
        idx = self.gpu_idx[hit[codes]] if len(codes) else self.gpu_idx
        lp = self.lpred[idx]
        return idx[~((lp >= 0) & self.theirs[np.maximum(lp, 0)])]

    def in_regions(self, idx: np.ndarray, regions) -> np.ndarray:
        """Per position in idx: whether its node (its time and thread) fell in one of the regions (t0, t1, thread)."""
        th, ts = np.asarray(self.thread, dtype=object)[idx], self.ts[idx]
        hit = np.zeros(len(idx), dtype=bool)
        for t0, t1, thread in regions:
            hit |= (th == thread) & (ts >= t0) & (ts < t1)
        return hit

    def span_share(self, spans) -> np.ndarray:
        """Per node: the share of the CPU stretch before it (from the previous call on its thread) that lies
        inside one of the spans (thread, start, end)."""
        out = np.zeros(len(self.nodes))
        if not spans:
            return out
        i = self.cpu_idx[self.cpred[self.cpu_idx] >= 0]
        a, b = self.end[self.cpred[i]], self.ts[i]
        th = np.asarray(self.thread, dtype=object)[i]
        ok = b > a
        i, a, b, th = i[ok], a[ok], b[ok], th[ok]
        cover = np.zeros(len(i))
        for t, lo, hi in spans:
            same = th == t
            cover += np.where(same, np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0.0, None), 0.0)
        out[i] = np.minimum(cover / (b - a), 1.0)
        return out
