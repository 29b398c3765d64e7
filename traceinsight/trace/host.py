"""What a CPU thread was doing over a stretch of time: feeding the GPU, or work that launches nothing.

Used twice: to attribute GPU idle gaps (launch_overhead vs host_bound) and to label the host work
between runtime calls in the timeline graph, so the what-if replay can remove the right part.

Definitions (kept simple on purpose, stated in the report):
  launching op   an aten op with a kernel launch / memcpy / memset somewhere below it; time inside
                 it is dispatch (feeding the GPU). Annotations that launch are mere containers.
  host range     an annotation, or an op of at least HOST_OP_US, that launches nothing and is not
                 inside a launching op: data loading, preprocessing, CPU math, logging, ...
  bare stretch   time covered by no op at all (pure Python). Short ones between launching ops are
                 framework overhead (launch_overhead); long ones (>= BARE_HOST_US) are host work.
  no-launch stretch  BARE_HOST_US or more on a thread that feeds the GPU with no launching op, no
                 launch and no blocking call: Python data preparation chopped into tiny tensor ops
                 (tokenizing into torch.tensor rows) is host work in full, however short each op.
  input work     host ranges of the input pipeline (DataLoader, collate, pin_memory): the part of host
                 work a CUDA graph of the step would not remove.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .facts import COMPILE_MACHINERY
from .gil import gil_spans, intersect, op_stalls, side_threads
from .model import TraceModel
from .nesting import depth_levels
from .steps import cum_lengths, merged_intervals, overlap_many

BARE_HOST_US = 1000.0
HOST_OP_US = 50.0
FRAMEWORK = r"^autograd::engine|^torch::autograd::|Backward\d*$"
INPUT_NAMES = r"DataLoader|_next_data|__next__|collate|pin_memory|enumerate\("
FEEDS_GPU = ("launch", "memcpy", "memset")
# The driver allocating device memory (the caching allocator growing): however deep in a launching op (cuDNN's
# workspace inside conv2d), a long one is host work, not dispatch (a100_alexnet's measured forward: 14.7, 8.9 and
# 7.1 ms gaps inside cudaMalloc had read as launch overhead, though one under aten::empty_strided read as host work).
ALLOCATOR_MALLOC = r"^(?:cuda|hip)Malloc$"
TORCH_FRAME = r"(^|/)torch/|^<built-in (method|function) \w+ of (torch|PyCapsule)|^<built-in function _cuda"


def mark_launching(cpu: pd.DataFrame, levels: list[np.ndarray] | None = None) -> np.ndarray:
    """Boolean per cpu row: the row is, or contains, a call that puts work on the GPU. levels: the rows
    at each depth (nesting.depth_levels of the depth column)."""
    parent = cpu["parent"].to_numpy()
    # (compared on the categorical's codes: isin, or text, would compare a million strings)
    mark = np.logical_or.reduce([(cpu["rkind"] == k).to_numpy() for k in FEEDS_GPU])
    if levels is None:
        levels = depth_levels(cpu["depth"].to_numpy())
    for rows in reversed(levels[1:]):          # deepest first: a mark climbs a level per pass
        p = parent[rows[mark[rows]]]
        mark[p[p >= 0]] = True
    return mark


def _under_launcher(cpu: pd.DataFrame, launching: np.ndarray, is_op: np.ndarray,
                    levels: list[np.ndarray]) -> np.ndarray:
    """Boolean per row: some op above it launches GPU work (so its time is dispatch overhead)."""
    parent = cpu["parent"].to_numpy()
    under = np.zeros(len(cpu), dtype=bool)
    for rows in levels[1:]:
        p = parent[rows]
        ok = p >= 0
        rows, p = rows[ok], p[ok]
        under[rows] = under[p] | (launching[p] & is_op[p])
    return under


@dataclass
class ThreadActivity:
    """Disjoint sorted intervals of host work on one thread, with cumulative lengths."""
    s: np.ndarray
    e: np.ndarray
    cum: np.ndarray


class HostActivity:
    """Per-thread interval sets answering: of [a, b), how much was host work?"""

    def __init__(self, model: TraceModel):
        cpu = model.cpu
        self.model = model
        self.cpu = cpu
        steps = model.steps
        step_scale = float(steps["dur"].median()) if len(steps) else np.inf
        is_aten = (cpu["kind"] == "op").to_numpy()
        is_ann = (cpu["kind"] == "annotation").to_numpy()
        # Step-scale annotations (ProfilerStep#N, whole-run ranges) say nothing about what ran; the input
        # pipeline's ranges do, however long (a wait for DataLoader workers in every other step).
        big = cpu["is_step"].to_numpy() | (is_ann & (cpu["dur"].to_numpy() >= 0.9 * step_scale)
                                           & ~model.cpu_match(INPUT_NAMES))
        is_ann = is_ann & ~big
        levels = depth_levels(cpu["depth"].to_numpy())
        self.launching = mark_launching(cpu, levels)
        # Annotations that launch work are containers (a model's forward): only ops make dispatch time.
        under = _under_launcher(cpu, self.launching, is_aten, levels)
        # A cheap op that launches nothing (view, empty, as_strided, detach) is dispatcher overhead
        # like any other; only substantial ones (CPU compute, data loading) count as host work.
        substantial = cpu["dur"].to_numpy() >= HOST_OP_US
        # Substantial non-launching ops count even inside a launching op (aten::to's CPU-side work,
        # lazy CUDA init in empty_strided); cheap ones there are dispatch.
        # The autograd engine's own nodes (evaluate_function, *Backward0) are framework dispatch, however
        # long a profiler makes them look.
        framework = model.cpu_match(FRAMEWORK)
        malloc = (cpu["kind"] == "runtime").to_numpy() & substantial & model.cpu_match(ALLOCATOR_MALLOC)
        self.host_rows = (((is_aten & substantial) | (is_ann & ~under)) & ~self.launching & ~framework) | malloc
        is_op = is_aten | (is_ann & ~self.launching)
        self.threads: dict[str, ThreadActivity] = {}
        self.cover: dict[str, ThreadActivity] = {}
        self.input: dict[str, ThreadActivity] = {}
        input_rows = self.host_rows & model.cpu_match(INPUT_NAMES)
        ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
        by_thread = model.thread_rows()
        # Where each thread feeds the GPU (launching ops and the launch calls themselves): a thread
        # with no op of its own while another thread feeds the GPU is waiting on it (the loop thread
        # inside backward() while the autograd thread runs), not doing host work.
        feeding = {th: merged_intervals(ts[r][self.launching[r]], end[r][self.launching[r]])
                   for th, r in by_thread.items()}
        # For bare_time, which only the what-if graph's window asks for: built per thread on demand.
        self._feeding = feeding
        self._by_thread = by_thread
        self._framework_rows = is_aten | is_ann
        self._bare_sets: dict[str, tuple[dict, dict]] = {}
        # Where the loop's side threads ran Python holding the GIL (with stacks): the loop's thread cannot run
        # then, so its stretches between ops there, however short, wait on that thread's work (trace/gil.py).
        gil = gil_spans(model, side_threads(model))
        for th, rows in by_thread.items():
            t, e = ts[rows], end[rows]
            op, inp, host = is_op[rows], input_rows[rows], self.host_rows[rows]
            cs, ce = merged_intervals(t[op], e[op])
            self.cover[th] = ThreadActivity(cs, ce, cum_lengths(cs, ce))
            is_, ie = merged_intervals(t[inp], e[inp])
            self.input[th] = ThreadActivity(is_, ie, cum_lengths(is_, ie))
            # Long stretches covered by no op at all: Python doing its own work.
            bare_s = np.concatenate([[-np.inf], ce])
            bare_e = np.concatenate([cs, [np.inf]])
            long = (bare_e - bare_s) >= BARE_HOST_US
            bs, be = bare_s[long], bare_e[long]
            others = [feeding[o] for o in feeding if o != th and len(feeding[o][0])]
            if others and len(bs):
                os_, oe = merged_intervals(np.concatenate([o[0] for o in others]),
                                           np.concatenate([o[1] for o in others]))
                bs, be = subtract_intervals(bs, be, os_, oe)
                keep = (be - bs) >= BARE_HOST_US
                bs, be = bs[keep], be[keep]
            ns, ne = self._no_launch(th, rows, others)
            held = [g for o, g in gil.items() if o != th]
            gs, ge = np.zeros(0), np.zeros(0)
            if held and len(feeding[th][0]):
                # (between its ops, and stalled inside one: trace/gil.py's STALL_US)
                ss, se = op_stalls(model, rows)
                gs, ge = intersect(*merged_intervals(np.concatenate([[-np.inf], ce, ss]),
                                                     np.concatenate([cs, [np.inf], se])),
                                   *merged_intervals(np.concatenate([g[0] for g in held]),
                                                     np.concatenate([g[1] for g in held])))
            hs = np.concatenate([t[host], bs, ns, gs])
            he = np.concatenate([e[host], be, ne, ge])
            hs, he = merged_intervals(hs, he)
            self.threads[th] = ThreadActivity(hs, he, cum_lengths(hs, he))

    def _no_launch(self, th: str, rows: np.ndarray, others: list) -> tuple[np.ndarray, np.ndarray]:
        """No-launch stretches of a GPU-feeding thread (see the module doc), less other feeding threads'
        work and the thread's blocking calls."""
        cpu = self.cpu
        # Ops and calls that put work on the GPU; annotations and Python frames that contain them (a step,
        # a forward, the step function) are containers, not feeding.
        r = rows[self.launching[rows] & ((cpu["kind"] == "op") | (cpu["kind"] == "runtime")).to_numpy()[rows]]
        fs, fe = merged_intervals(cpu["ts"].to_numpy()[r], cpu["end"].to_numpy()[r])
        if not len(fs):
            return np.zeros(0), np.zeros(0)
        # Between launches, and before the thread's first launch and after its last: the window may open
        # on a step's data preparation (the first profiled step's tokenizing, before any GPU work, had
        # been called launch overhead while the same work in the later steps was host work).
        ts, end = cpu["ts"].to_numpy()[rows], cpu["end"].to_numpy()[rows]
        s_ = np.concatenate([[ts.min()], fe])
        e_ = np.concatenate([fs, [max(float(end.max()), fe[-1])]])
        long = (e_ - s_) >= BARE_HOST_US
        s_, e_ = s_[long], e_[long]
        if not len(s_):
            return s_, e_
        sync = rows[(cpu["rkind"] == "sync").to_numpy()[rows]]
        cut = others + ([(cpu["ts"].to_numpy()[sync], cpu["end"].to_numpy()[sync])] if len(sync) else [])
        if cut:
            os_, oe = merged_intervals(np.concatenate([o[0] for o in cut]), np.concatenate([o[1] for o in cut]))
            s_, e_ = subtract_intervals(s_, e_, os_, oe)
            keep = (e_ - s_) >= BARE_HOST_US
            s_, e_ = s_[keep], e_[keep]
        return s_, e_

    def host_time(self, thread: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Host-work length inside each stretch [a_k, b_k) on one thread (vectorised)."""
        if thread not in self.threads:  # a thread with no ranges at all: long stretches are host work
            a = np.asarray(a, dtype=float)
            span = np.maximum(np.asarray(b, dtype=float), a) - a
            return np.where(span >= BARE_HOST_US, span, 0.0)
        return _time_in(self.threads, thread, a, b)

    def input_time(self, thread: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Input-pipeline time within each [a_k, b_k) on a thread."""
        return _time_in(self.input, thread, a, b)

    def bare_time(self, thread: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Time within each [a_k, b_k) on a thread covered by none of its ops, annotations or PyTorch
        frames: the program's own Python between ops. Zero where a thread that feeds the GPU ran any op
        in the stretch: the loop thread inside backward() waits on the autograd thread, whose engine
        gaps are framework overhead."""
        if thread not in self._bare_sets:
            self._bare_sets[thread] = self._framework_and_others(thread)
        framework, others = self._bare_sets[thread]
        a = np.asarray(a, dtype=float)
        b = np.maximum(np.asarray(b, dtype=float), a)
        own = (b - a) - _time_in(framework, thread, a, b)
        return np.where(_time_in(others, thread, a, b) > 0, 0.0, np.maximum(own, 0.0))

    def _framework_and_others(self, thread: str) -> tuple[dict, dict]:
        # The thread's time inside the framework: its ops and every annotation short of a step (an
        # optimizer step's own Python sits inside its Optimizer.step annotation) and, with with_stack,
        # PyTorch's own Python frames (the profiler's step(), optimizer internals); the program's
        # frames and numpy's are not.
        cpu = self.cpu
        rows = self._by_thread.get(thread, np.zeros(0, dtype=np.int64))
        inside = self._framework_rows[rows] | (
            (cpu["kind"] == "python").to_numpy()[rows] & self.model.cpu_match(TORCH_FRAME)[rows])
        fs, fe = merged_intervals(cpu["ts"].to_numpy()[rows][inside], cpu["end"].to_numpy()[rows][inside])
        # Every op of the other threads that feed the GPU.
        others = [(c.s, c.e) for o, c in self.cover.items() if o != thread and len(self._feeding[o][0])]
        os_, oe = (merged_intervals(np.concatenate([o[0] for o in others]), np.concatenate([o[1] for o in others]))
                   if others else (np.zeros(0), np.zeros(0)))
        return ({thread: ThreadActivity(fs, fe, cum_lengths(fs, fe))},
                {thread: ThreadActivity(os_, oe, cum_lengths(os_, oe))})

    def compiled_time(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Time within each [a_k, b_k) when some thread was inside torch.compile's machinery: Dynamo's
        cache lookup and the compiled regions (forward and compiled backward), wrapper and graph alike.
        Any thread: the loop thread waiting in backward() while the autograd thread runs a compiled
        backward is waiting on compiled work too."""
        if not hasattr(self, "_compiled"):
            cpu = self.cpu
            rows = ((cpu["kind"] == "op") | (cpu["kind"] == "annotation")).to_numpy() & self.model.cpu_match(COMPILE_MACHINERY)
            cs, ce = merged_intervals(cpu["ts"].to_numpy()[rows], cpu["end"].to_numpy()[rows])
            self._compiled = {"": ThreadActivity(cs, ce, cum_lengths(cs, ce))}
        return _time_in(self._compiled, "", a, b)

    def covered_time(self, thread: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Time inside ops (any op or non-launching annotation) within each [a_k, b_k) on a thread."""
        return _time_in(self.cover, thread, a, b)

    def host_ops_in(self, thread: str, a: float, b: float, limit: int = 5) -> list[tuple[str, float]]:
        """The outermost host ranges (by name) overlapping [a, b) on a thread, longest overlap first."""
        if not hasattr(self, "_host_by_thread"):
            self._host_by_thread = {th: g.sort_values("ts") for th, g in
                                    self.model.thread_frames(self.host_rows, ["ts", "end", "name"]).items()}
        h = self._host_by_thread.get(thread)
        if h is None:
            return []
        # Host ranges are short next to a step: those starting before b and ending after a.
        upto = np.searchsorted(h["ts"].to_numpy(), b, side="left")
        rows = h.iloc[:upto]
        rows = rows[rows["end"].to_numpy() > a]
        if rows.empty:
            return []
        # Only the outermost ranges: collate's stack inside the DataLoader's range is part of its time.
        end = rows["end"].to_numpy()
        before = np.maximum.accumulate(np.concatenate([[-np.inf], end[:-1]]))
        rows = rows[before < end]
        ov = np.minimum(rows["end"], b) - np.maximum(rows["ts"], a)
        agg = ov.groupby(rows["name"]).sum().sort_values(ascending=False)
        return [(n, float(v)) for n, v in agg.head(limit).items()]


def subtract_intervals(s: np.ndarray, e: np.ndarray, os_: np.ndarray, oe: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """[s, e) minus the merged, sorted intervals [os_, oe): the pieces left, sorted."""
    out_s, out_e = [], []
    for a, b in zip(s, e):
        lo, hi = np.searchsorted(oe, a, "right"), np.searchsorted(os_, b, "left")
        cur = a
        for k in range(lo, hi):
            if os_[k] > cur:
                out_s.append(cur)
                out_e.append(min(os_[k], b))
            cur = max(cur, oe[k])
            if cur >= b:
                break
        if cur < b:
            out_s.append(cur)
            out_e.append(b)
    return np.asarray(out_s, dtype=float), np.asarray(out_e, dtype=float)


def _time_in(sets: dict, thread: str, a, b) -> np.ndarray:
    """Overlap of each [a_k, b_k) with one thread's interval set (zero if the thread has none)."""
    a = np.asarray(a, dtype=float)
    b = np.maximum(np.asarray(b, dtype=float), a)
    ta = sets.get(thread)
    if ta is None:
        return np.zeros(len(a))
    return overlap_many(ta.s, ta.e, ta.cum, a, b)
