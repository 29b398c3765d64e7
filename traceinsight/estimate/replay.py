"""what-if: change the timeline graph as a fix would, replay it, and read off the new step time.

The graph (estimate/graph.py) is compiled once into flat arrays (estimate/compiled.py); a fix is a change to
those arrays (a node's cost, an edge's host/feed time, a sync edge dropped, an activity moved to a
stream of its own), so a replay costs one pass over the nodes and no graph copy.

The replay is a longest-path walk:
  CPU call start = previous call's end on its thread + the host and feed time between them
  CPU call end   = start + its own cost; a blocking call also waits for the GPU work its sync edges
                   point at (plus the small return latency it had)
  GPU start      = max(its launch call's start + launch latency, previous activity's end on its stream)
                   (+ in a job, how long a collective waited for the other ranks: trace/peer_waits.py)
A step ends when its end marker is reached and the GPU work it issued is done, whichever is later; its
replayed time runs from the previous step's end: whichever side is the bottleneck sets the pace.

Launch calls much slower than usual mean the CPU was held back by a full launch queue; their excess
is not a cost of the program, so every replay (the baseline too) caps them (launch_cap).
"""
from __future__ import annotations

import re

import numpy as np

from ..analyses import fixes
from .compiled import Compiled
from .replay_compiler import compiled_dispatch, fuse_chains
from .replay_drops import no_anomaly, no_compiles, drop_spans, no_search
from .replay_warm import batch_items, graph_warm
from .state import GRAPH_KEEPS_BARE_US, UNBLOCKED_CALL_US, Replay, State

# A graph-replayed step, measured on H100 and H200 (the matrix's whole-step graphs, 17-838 kernels a step):
# un-profiled step - GPU busy = 6-93 us, about 15 us per step plus 0.1 us per kernel node; the profiled
# graphs show a median 0.3-0.4 us between dependent kernels. Measured, not fitted to the speed-ups.
GRAPH_KERNEL_GAP_US = 0.3     # kernel-to-kernel spacing inside a CUDA graph replay
GRAPH_STEP_US = 20.0          # CPU per step: the replay call, the input copies and the Python around them
# torch.compile(mode="reduce-overhead") replays through cudagraph trees: the compiled wrapper's Python
# (guards, runtime wrapper) stays, and the tree's own call (input copies, liveness checks) measured 1.2-2.0x
# that wrapper's CPU time in four compiled workloads' traces on H100 and H200 (the graph launch, 1-3 us per
# node under the profiler, left out: it is costed as any graph replay's, GRAPH_STEP_US).
TREE_CALL_PER_WRAPPER = 1.6
CALL_FLOOR = 0.2              # a de-inflated runtime call keeps at least this share of its profiled time
PINNED_GBPS_DEFAULT = 20.0    # conservative pinned H2D bandwidth when the trace shows none
RETURN_LATENCY_MAX_US = 20.0  # how long after the GPU finishes a blocking call may still take
# ...except a copy to pageable host memory: the driver stages it through pinned buffers and the CPU copies
# the last chunks out after the DMA ends (0.1-1.7 ms after 8-33 MB copies on H100): the call's observed
# tail is the program's, and goes when the copy goes or lands in pinned memory.
# The Python that reads a copy to the host runs right after the copy returns; data kept on the GPU takes
# it along, as long as reading the bytes copied at fixes.RESULT_READ_GBPS takes.
CONSUMER_GBPS = fixes.RESULT_READ_GBPS


def apply(c: Compiled, fixes=(), pinned_gbps: float = PINNED_GBPS_DEFAULT, cuts=None) -> State:
    """The replay state with the fixes applied in order, each on top of the ones before (no fixes:
    the baseline). `cuts` (estimate/deinflate.py) first takes the profiler's own CPU cost out."""
    s = State(c)
    if cuts is not None:
        edge, call = cuts
        # A call keeps CALL_FLOOR of its time; the rest of its recording cost (CUPTI's callbacks and
        # bookkeeping around it) comes out of the stretch before it.
        kept = np.where(call > 0, np.maximum(s.dur - call, CALL_FLOOR * s.dur), s.dur)
        edge = edge + np.maximum(0.0, call - (s.dur - kept))
        s.dur = kept
        f = np.minimum(s.feed, edge)
        s.feed = s.feed - f
        h = np.minimum(s.host, edge - f)
        s.host = s.host - h
        # (the work the program did not ask for is recorded too: a compile's ops cost it, the checks' ...)
        rest = edge - f - h
        for key in s.unasked:
            u = s.unasked[key]
            s.unasked[key] = np.maximum(0.0, u - rest)
            rest = np.maximum(0.0, rest - u)
    # A merge of split compiled regions first: it changes the program a CUDA graph then captures (its wrappers), so
    # the fixes together read as the plan that orders them (the plan puts the sync's merge before the graph).
    for fx in sorted(fixes, key=lambda fx: not isinstance(fx, _MERGES_FIRST)):
        try:
            how = _APPLY[type(fx)]
        except KeyError:
            raise TypeError(f"the replay cannot apply a {type(fx).__name__}") from None
        how(c, s, fx, pinned_gbps)
    warm = min((_warm_factor(fx) for fx in fixes), default=1.0)
    if warm < 1.0:
        # Only the loop's thread ran between rounds of the host work that went; autograd's device thread
        # (a CUDA backward) kept its own core and caches.
        cpu = c.loop_cpu_idx
        s.dur[cpu] = s.dur[cpu] * warm
        s.feed[cpu] = s.feed[cpu] * warm
    return s


def _warm_factor(fx) -> float:
    """What the rest of the step's CPU work costs once host work that evicted it from the caches is gone
    (fixes.WARM_CPU; a result kept on the GPU in `share` of the cases)."""
    if not getattr(fx, "warm", False):
        return 1.0
    return fixes.toward(fixes.WARM_CPU, fx.share if isinstance(fx, fixes.Unblock) else 1.0)


def _cuda_graph(c: Compiled, s: State, fx: fixes.CudaGraph, _bw: float) -> None:
    if fx.forwards:
        _graph_forwards(c, s, fx)
        return
    # A graph replays the captured work without op dispatch or launch calls. Host work that launches
    # nothing (numpy preprocessing, metrics, logging, the input pipeline: trace/host.py's host ranges
    # and long bare Python stretches) stays where it was: a graph cannot remove it. Nor the program's
    # own Python between two launches, outside any op, annotation or PyTorch frame, when it runs
    # GRAPH_KEEPS_BARE_US or more (numpy on a batch's outputs); shorter stretches are the model's
    # Python between its ops, which the capture does remove.
    cpu = c.cpu_idx
    cold = float(s.feed[cpu].sum() + s.dur[cpu].sum())
    if fx.compiled_only:
        # mode="reduce-overhead" of a compiled program graphs only the compiled regions: of each
        # stretch between two calls, the part some thread spent in compiled code goes (the wrapper is
        # added back below) and the rest stays: eager dispatch (the loss, an eager optimizer), the
        # Python around the regions, the loop thread's wait for the eager part of backward.
        share = np.divide(c.compiled_us[cpu], c.feed[cpu], out=np.zeros(len(cpu)), where=c.feed[cpu] > 0)
        s.feed[cpu] = s.feed[cpu] * (1.0 - np.minimum(share, 1.0))
    else:
        keep = np.where(c.bare[cpu] >= GRAPH_KEEPS_BARE_US, c.bare[cpu], 0.0)
        s.feed[cpu] = np.minimum(s.feed[cpu], keep)
    gpu_idx = c.gpu_idx
    if fx.compiled_only:
        lp = c.lpred[gpu_idx]
        gpu_idx = gpu_idx[(lp >= 0) & c.compiled[np.maximum(lp, 0)]]
    _replayed(c, s, gpu_idx)
    s.dur[c.is_launch & (c.compiled if fx.compiled_only else True)] = 0.0
    # Each step still costs the CPU the replay call and the Python around it: the step takes the longer
    # of that and the graph's GPU time.
    if fx.optimizer is not None and not s.optimizer_fused:
        regions, factor = fx.optimizer
        idx = _launched_in(c, regions)
        s.dur[idx] = s.dur[idx] * factor
    warm = graph_warm(cpu, s, cold)
    # (As CPU time before the step's first launch: a launch call's own cost is capped, see launch_cap.)
    tree = max(0.0, fx.wrapper_us - s.wrapper_merged_us) * (1.0 + TREE_CALL_PER_WRAPPER) * fx.python_share * warm
    for i in c.first_gpu_of_step:
        if c.lpred[i] >= 0:
            s.dur[c.lpred[i]] = GRAPH_STEP_US
            s.feed[c.lpred[i]] += tree


def _graph_forwards(c: Compiled, s: State, fx: fixes.CudaGraph) -> None:
    # A generation loop's model forwards replayed as graphs: the CPU inside them (dispatch, launches, the model's
    # Python, its syncs: a compiled forward has none) goes, each replay costs call_us; the loop's own ops and Python
    # between the forwards keep their time.
    cpu = c.cpu_idx
    inside = np.zeros(len(c.nodes), dtype=bool)
    inside[cpu] = c.in_regions(cpu, fx.forwards)
    share = c.span_share([(t, a, b) for a, b, t in fx.forwards])
    s.feed[cpu] = s.feed[cpu] * (1.0 - share[cpu])     # (host work that launches nothing stays, as in any graph)
    s.dur[inside & c.is_launch] = 0.0
    for i in np.flatnonzero(inside & ~c.is_launch):
        if s.syncs[i]:
            s.unblock(int(i))
        s.dur[i] = 0.0
    _replayed(c, s, c.gpu_idx[(c.lpred[c.gpu_idx] >= 0) & inside[np.maximum(c.lpred[c.gpu_idx], 0)]])
    # Each forward's replay call, as CPU time before its first launch.
    first = cpu[inside[cpu] & c.is_launch[cpu]]
    if len(first):
        k = np.searchsorted(np.array([a for a, _b, _t in fx.forwards]), c.ts[first], side="right") - 1
        _, at = np.unique(k, return_index=True)
        s.feed[first[at]] += fx.call_us * fx.python_share


def _replayed(c: Compiled, s: State, gpu_idx: np.ndarray) -> None:
    """GPU work replayed from a graph: the graph's kernel-to-kernel gap, not a launch's latency or eager spacing."""
    s.latency[gpu_idx] = np.where(c.lpred[gpu_idx] >= 0, GRAPH_KERNEL_GAP_US, s.latency[gpu_idx])
    s.min_gap[gpu_idx] = GRAPH_KERNEL_GAP_US


def _remove_host_work(c: Compiled, s: State, fx: fixes.RemoveHostWork, _bw: float) -> None:
    s.host[:] = 0.0


def _unblock(c: Compiled, s: State, fx: fixes.Unblock, _bw: float) -> None:
    for i in c.cpu_positions(fx.rows):
        s.unblock(int(i))
    cpu_share = fx.share if fx.dispatch_share is None else fx.dispatch_share
    if cpu_share:
        # The replacement (torch.where, ignore_index) drops the data-dependent ops themselves: in a step the
        # CPU sets the pace of, every call they make and the CPU time inside them (on autograd's thread
        # too, for the backward of a boolean index).
        calls = set(fx.calls) | {int(c.nodes[c.lpred[i]][1]) for i in (c.gpu_pos.get(r) for r in fx.kernels)
                                 if i is not None and c.lpred[i] >= 0}
        idx = c.cpu_positions(calls)
        s.dur[idx] = s.dur[idx] * (1.0 - cpu_share)
        inside = c.span_share(fx.spans)
        inside[idx] = 1.0
        s.feed = s.feed * (1.0 - cpu_share * inside)
    if fx.share:
        for r in fx.kernels:
            i = c.gpu_pos.get(r)
            if i is not None:
                s.dur[i] = c.dur[i] * (1.0 - fx.share)
                s.min_gap[i] = s.min_gap[i] * (1.0 - fx.share)
        # Kept on the GPU, a copy's result is neither copied whole nor read by the host's Python: the copy
        # and that Python (bare, outside any op, up to the next call) go with `share`, the Python as far as
        # reading the copy's bytes explains it.
        rows = set(fx.rows)
        per_launch = _launch_cost_us(c, s) if fx.replacement_launches else 0.0
        for r in rows:
            i = c.cpu_pos.get(r)
            j = c.own[i] if i is not None else -1
            if j < 0 or c.to_device[j] or c.bytes[j] <= 0:
                continue
            s.dur[j] = c.dur[j] * (1.0 - fx.share)     # only the small result is copied
            s.staged[i] = s.staged[i] * (1.0 - fx.share)   # and nothing is staged out of pageable buffers
            k = _drop_reading(c, s, i, j, lambda k: c.nodes[k][1] in rows, fx.share)
            if k < 0:
                continue
            if fx.warm and c.nodes[k][0] == "step" and c.csucc[k] >= 0:
                # It read to the step's end: the next step's top ran coldest (the feed's warm factor comes later)
                n = c.csucc[k]
                cold = fixes.toward(fixes.COLD_AFTER_READ, fx.share)
                s.host[n] *= cold
                s.feed[n] *= cold / _warm_factor(fx)
            # Torch ops that read the copy on the CPU still dispatch their kernels from it on the GPU.
            s.feed[k] += fx.share * fx.replacement_launches * per_launch


def _drop_reading(c: Compiled, s: State, i: int, j: int, blocking, share: float) -> int:
    """A copy (GPU node j, its call i) whose result stays on the GPU is not read by the host's Python
    after it (bare, outside any op, up to the next call after the copy's own `blocking` calls): `share` of
    that Python goes, as far as reading the copy's bytes explains it. The next call's node, or -1."""
    k = c.csucc[i]
    while k >= 0 and c.nodes[k][0] == "cpu" and blocking(k):
        k = c.csucc[k]
    if k >= 0:
        cut = share * min(c.bytes[j] / (CONSUMER_GBPS * 1e3), c.bare[k] + c.host[k])
        from_feed = min(cut, c.bare[k], s.feed[k])
        s.feed[k] -= from_feed
        s.host[k] = max(0.0, s.host[k] - (cut - from_feed))
    return k


def _launch_cost_us(c: Compiled, s: State) -> float:
    """What one kernel launch costs the CPU in this step as replayed (median over the launch calls of
    the call and the stretch before it: the op's dispatch)."""
    i = c.cpu_idx[c.is_launch[c.cpu_idx]]
    v = s.feed[i] + s.dur[i]
    return float(np.median(v)) if len(v) else UNBLOCKED_CALL_US


def _pin_copies(c: Compiled, s: State, fx: fixes.PinCopies, pinned_gbps: float) -> None:
    # A pinned copy issued non_blocking: it runs at pinned bandwidth on a stream of its own, and the op
    # that issued it no longer waits in the copy call (a copy to the host is read a step later: the
    # advice). A copy to the device also drops the stream sync aten::copy_ issues after a pageable copy.
    # A copy to the host that is a sync, not a copy problem (trace/facts.py), only gets faster.
    gpu_idx = c.gpu_idx
    ops = set()
    for i in gpu_idx[c.pageable[gpu_idx]]:
        # (never longer than a fix before made it: a result kept on the GPU is not copied whole; `kept`)
        pinned = min(s.dur[i], c.bytes[i] / (pinned_gbps * 1e3) if c.bytes[i] > 0 else c.dur[i] / 2)
        s.dur[i] = pinned * (1.0 if c.to_device[i] else 1.0 - fx.kept)
        if fx.kept and not c.to_device[i] and c.lpred[i] >= 0:     # (the op's stream sync is its own)
            call = c.lpred[i]
            _drop_reading(c, s, call, i, lambda k: c.op[call] >= 0 and c.op[k] == c.op[call], fx.kept)
        if c.lpred[i] >= 0:
            s.staged[c.lpred[i]] = 0.0
        if not fx.overlap or (c.lpred[i] >= 0 and c.copy_sync[c.lpred[i]]):
            continue
        s.detach_from_stream(int(i))
        if c.lpred[i] >= 0:
            s.unblock(int(c.lpred[i]))
            if c.to_device[i] and c.op[c.lpred[i]] >= 0:
                ops.add(int(c.op[c.lpred[i]]))
    for i in c.cpu_idx:
        if s.syncs[i] and int(c.op[i]) in ops:
            s.unblock(int(i))
    if fx.dispatch_speedup != 1.0:
        # Dispatch only: the stretches that feed runtime calls and the launch calls themselves. Other
        # runtime calls keep their time (a window with CUDA start-up in it holds seconds of cudaFree and
        # context creation, which no staging slowed: a100_alexnet_memcpy_sync_permute read an 8 s saving).
        cpu = c.cpu_idx
        launch = cpu[c.is_launch[cpu]]
        # Refilling the caches the staging evicted costs at most what streaming the copies through them
        # took: the dispatch saved is never more than the CPU's time in the copy calls.
        calls = np.unique(c.lpred[gpu_idx[c.pageable[gpu_idx]]])
        staged = float(c.dur[calls[calls >= 0]].sum())
        dispatch = float(s.feed[cpu].sum() + s.dur[launch].sum())
        f = fx.dispatch_speedup
        if dispatch > 0 and dispatch * (1 - 1 / f) > staged:
            f = 1 / (1 - staged / dispatch)
        s.dur[launch] = s.dur[launch] / f
        s.feed[cpu] = s.feed[cpu] / f


_MERGES_FIRST = (fixes.MergeRegions,)


def _merge_regions(c: Compiled, s: State, fx: fixes.MergeRegions, _bw: float) -> None:
    s.feed = s.feed * (1.0 - c.span_share(fx.spans))
    calls = c.cpu_positions(fx.calls)
    s.dur[calls] = 0.0
    # What those calls launched goes too: the eager ops between the regions (a finite check's abs, compare and all, its
    # memset and copy back) are gone with the check, or fused into the merged graph at next to no cost.
    gone = np.flatnonzero(np.isin(c.lpred, calls)) if len(calls) else calls
    s.dur[gone] = 0.0
    s.min_gap[gone] = 0.0
    s.wrapper_merged_us += fx.wrapper_us


def _drop_calls(c: Compiled, s: State, fx: fixes.DropCalls, _bw: float) -> None:
    s.dur[c.cpu_positions(fx.rows)] = 0.0


def _drop_kernels(c: Compiled, s: State, fx: fixes.DropKernels, _bw: float) -> None:
    # The launch call goes; the dispatch before it stays: the op that ran the transform (a cuDNN
    # convolution) still sets up its descriptors and plan in the other layout. Measured: channels_last
    # saved nothing in CPU-bound steps (layout_nchw_fp16, holdout8_layout_vgg_fp16: 0.79-1.34x, median
    # 1.0, on both GPUs), whichever thread (forward, or autograd's backward) launched the transforms.
    idx = c.gpu_named(fx.pattern)
    s.dur[idx] = 0.0
    s.min_gap[idx] = 0.0            # a kernel that is gone leaves no queued gap either
    launch = c.lpred[idx]
    launch = launch[launch >= 0]
    s.dur[launch] = 0.0


def _scale_kernels(c: Compiled, s: State, fx: fixes.ScaleKernels, _bw: float) -> None:
    idx = c.gpu_named(fx.pattern, re.I)
    idx = idx[c.is_kernel[idx]]
    s.dur[idx] = c.dur[idx] * fx.factor


def _fused_optimizer(c: Compiled, s: State, fx: fixes.FusedOptimizer, _bw: float) -> None:
    regions = fx.regions + fx.extra
    for k, (t0, t1, th) in enumerate(regions):
        for i in c.cpu_idx:
            if c.is_launch[i] and c.thread[i] == th and t0 <= c.ts[i] < t1:
                s.dur[i] = 0.0
                # (A loop's Python ends with it: the stretch after its last launch belongs to what follows.)
                if c.csucc[i] >= 0 and (k < len(fx.regions) or c.ts[c.csucc[i]] < t1):
                    s.feed[c.csucc[i]] = 0.0
    idx = _launched_in(c, regions)
    s.dur[idx] = c.dur[idx] * fx.gpu_factor
    # Fewer, larger kernels: the queued gaps between them shrink with the kernel count.
    s.min_gap[idx] = s.min_gap[idx] * fx.gpu_factor
    s.optimizer_fused = s.optimizer_fused or bool(fx.regions)


def _launched_in(c: Compiled, regions) -> np.ndarray:
    """The GPU activities whose launch call fell in one of the regions (t0, t1, thread)."""
    gpu = c.gpu_idx[c.lpred[c.gpu_idx] >= 0]
    return gpu[c.in_regions(c.lpred[gpu], regions)]


# How the replay applies each kind of fix (analyses/fixes.py).
_APPLY = {
    fixes.CudaGraph: _cuda_graph,
    fixes.RemoveHostWork: _remove_host_work,
    fixes.Unblock: _unblock,
    fixes.PinCopies: _pin_copies,
    fixes.DropKernels: _drop_kernels,
    fixes.DropCalls: _drop_calls,
    fixes.BatchItems: batch_items,
    fixes.MergeRegions: _merge_regions,
    fixes.ScaleKernels: _scale_kernels,
    fixes.FusedOptimizer: _fused_optimizer,
    fixes.FuseChains: fuse_chains,
    fixes.CompiledDispatch: compiled_dispatch,
    fixes.NoPeerWait: lambda _c, s, _fx, _bw: s.peer.fill(0.0),
    fixes.NoCompiles: no_compiles,
    fixes.NoSearch: no_search,
    fixes.NoAnomaly: no_anomaly,
    fixes.DropSpans: drop_spans,
}


def gpu_work_us(s: State) -> float:
    """The GPU's work per step in this state (us, median over the reported steps): the summed durations of
    the activities each step issued, as the fixes left them (streams that overlap count twice)."""
    c = s.c
    ok = c.gpu_step >= 0
    per = np.bincount(c.gpu_step[ok], weights=s.dur[ok], minlength=len(c.steps))
    keep = [i for i, st in enumerate(c.steps) if c.report_steps is None or st in c.report_steps]
    return float(np.median(per[keep])) if keep else 0.0


def simulate(s: State) -> Replay:
    c = s.c
    n = len(c.nodes)
    start, end = [0.0] * n, [0.0] * n
    is_gpu, dur = c.is_gpu.tolist(), s.dur.tolist()
    # (work the program did not ask for: each kind its own bucket of the edge, taken away by its own fix)
    host, feed, comp = s.host.tolist(), s.feed.tolist(), sum(s.unasked.values()).tolist()
    # A job's collective waits for the other ranks once it could start: on both terms of its start, so on their max.
    lat, sgap, min_gap = (s.latency + s.peer).tolist(), s.sgap.tolist(), (s.min_gap + s.peer).tolist()
    cpred, lpred, spred = c.cpred.tolist(), c.lpred.tolist(), s.spred.tolist()
    ts, orig_end = c.ts.tolist(), c.end.tolist()
    cap, rk, syncs = c.launch_cap, c.rkind, s.syncs
    own = c.own.tolist()
    unblocked = s.unblocked.tolist()
    staged = s.staged.tolist()
    done = [False] * n
    for i in range(n):
        if done[i]:
            continue
        if is_gpu[i]:
            lp, sp = lpred[i], spred[i]
            if lp >= 0:
                t = start[lp] + lat[i]
                if sp >= 0 and end[sp] + min_gap[i] > t:
                    t = end[sp] + min_gap[i]
            elif sp >= 0:
                t = end[sp] + sgap[i]
            else:
                t = ts[i]
            start[i] = t
            end[i] = t + dur[i]
            continue
        cp = cpred[i]
        t = end[cp] + host[i] + feed[i] + comp[i] if cp >= 0 else ts[i]
        d = dur[i]
        if rk[i] == "launch" and d > cap:
            d = cap
        w = syncs[i]
        j = own[i]
        if j >= 0 and not unblocked[i]:
            # A blocking copy: time the copy here (after its stream predecessor), the call returns after it.
            sp = spred[j]
            cs = t + lat[j]
            if sp >= 0 and end[sp] > cs:
                cs = end[sp]
            start[j], end[j], done[j] = cs, cs + dur[j], True
            ret = max(min(max(orig_end[i] - orig_end[j], 0.0), RETURN_LATENCY_MAX_US), staged[i])
            e = max(t + min(d, UNBLOCKED_CALL_US), end[j] + ret)
        elif w:
            wait_end = max(end[u] for u in w)
            orig_w = max(orig_end[u] for u in w)
            ret = min(max(orig_end[i] - orig_w, 0.0), RETURN_LATENCY_MAX_US)
            e = max(t + min(d, UNBLOCKED_CALL_US), wait_end + ret)
        else:
            e = t + d
        start[i] = t
        end[i] = e
    return Replay(step_us=c.step_times(start, end))
