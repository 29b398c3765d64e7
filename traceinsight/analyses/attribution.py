"""Attribute every GPU idle gap to a cause. Vectorised: a launch-bound trace has a gap per kernel.

For each gap we look at the GPU activity that ended it and the runtime call that launched that
activity (the launch edge of the graph):

  * launched before the GPU went idle, started only after `lat` -> the GPU waited on something else:
    a collective (NCCL kernel) -> collective_wait, otherwise a cross-stream dependency -> dependency_wait.
    Launched just in time (within the launch latency) -> launch_overhead.
  * launched after the GPU went idle -> the CPU was late. If the launching thread had just come out of a
    blocking call (stream/device/event sync, device-to-host copy) that returned after the GPU drained, the
    sync edge explains the gap: sync_stall (pageable_memcpy when the blocking call was a pageable copy).
    Otherwise the stretch [gap start, launch] is split by what the thread was doing: host work that
    launches nothing -> host_bound, feeding the GPU (dispatch, Python between launches) -> launch_overhead.
    The launch latency itself (launch call to kernel start) is launch_overhead too.
  * no CPU launch in the trace (CUDA-graph replay, another process) -> unattributed, or collective_wait
    for NCCL kernels.
  * whatever the CPU side of a gap was, the part of it spent inside torch.compile's compiler
    (trace/compiles.py) is recompile's: the compiled code waits for it, not for host work or launches;
    likewise the part inside cuDNN's algorithm search (trace/cudnn_search.py) is cudnn_benchmark's, and
    the part in autograd's anomaly detection (its NaN checks, its stored stacks: trace/anomaly.py) anomaly_detection's;
    and the part inside a start-up call (context creation, lazy module loading, first allocations:
    trace/coverage.startup_spans) is cuda_startup's, paid once per process; and the part inside a CUDA-graph
    capture (trace/capture.capture_spans) is graph_capture's: launches made then run nothing.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from .base import KindSpec
from .reads import copy_reads
from ..trace.capture import capture_spans
from ..trace.unasked import UNASKED
from ..trace.coverage import missing_event_spans, startup_intervals
from ..trace.facts import (BLOCK_TOL_US, QUEUE_TOL_US, blocking_calls, is_collective, launch_latency_us,
                           model_has_cpu_ops, queued_until)
from ..trace.host import HostActivity
from ..trace.model import TraceModel

# Idle causes that are no finding kind of their own (yet): their specs live here.
CAUSE_ONLY = (
    KindSpec("unattributed", "idle for reasons the trace does not show", idle_cause=True, color="#9a9a9a",
             estimate="measured"),
    KindSpec("graph_spacing", "the GPU's own spacing between the kernels of one CUDA-graph replay (no CPU work "
             "shortens it; only fewer kernels do)", idle_cause=True, color="#c7b98f", estimate="measured"),
)
# A blocking call that lasted at least this long (it really waited) also owns the refill after it.
SYNC_REFILL_MIN_US = 20.0
# Blocking calls at most this far apart are one wait (a pageable copy and the stream sync after it).
CHAIN_GAP_US = 20.0
# Every idle cause, in the order reports show them.
CAUSES = ("launch_overhead", "host_bound", "recompile", "cudnn_benchmark", "anomaly_detection", "sync_stall",
          "pageable_memcpy",
          "collective_wait", "dependency_wait", "graph_capture", "cuda_startup", "graph_spacing", "unattributed")
# The CPU-side causes a compile's time is taken from (recompile).
CPU_LATE = ("host_bound", "launch_overhead", "sync_stall", "pageable_memcpy", "unattributed")
def attribute_gaps(model: TraceModel, host: HostActivity) -> pd.DataFrame:
    gaps = model.gaps.copy()
    for c in CAUSES:
        gaps[c] = 0.0
    gaps["blocker"] = -1
    gaps["thread"] = ""
    gaps["launch_ts"] = np.nan
    if gaps.empty:
        return gaps
    cpu, gpu = model.cpu, model.gpu
    lat = launch_latency_us(model)
    s = gaps["start"].to_numpy()
    e = gaps["end"].to_numpy()
    dur = e - s
    nxt = gaps["next_gpu"].to_numpy()
    has_next = nxt >= 0
    nxt_safe = np.where(has_next, nxt, 0)
    launcher = np.where(has_next, gpu["launcher"].to_numpy()[nxt_safe], -1)
    coll = np.zeros(len(gaps), dtype=bool)
    if len(gpu):
        coll = has_next & is_collective(model)[nxt_safe]
    linked = (launcher >= 0) & (len(cpu) > 0)      # (GPU events alone: nothing in the trace launched them)
    lsafe = np.where(linked, launcher, 0)
    lt = np.where(linked, _at(cpu["ts"], lsafe), np.nan)
    thread = np.where(linked, _at(cpu["thread"], lsafe), "").astype(object)
    lt_end = np.where(linked, _at(cpu["end"], lsafe), np.nan)
    # The trace's last step: no GPU work follows its final gap, which ends where the loop thread's step
    # ends. The next step's first launch would come then: the gap is the CPU's, split as a late launch's
    # (the numpy after an eval batch's last copy, not "unattributed").
    trail = _trailing(model, gaps, ~linked & ~coll)
    if trail.any():
        lt[trail] = e[trail]
        lt_end[trail] = e[trail]
        thread[trail] = _loop_thread(model)
    gaps["thread"] = thread
    gaps["launch_ts"] = lt

    res = {c: np.zeros(len(gaps)) for c in CAUSES}
    # 1. No launch in the trace.
    unl = ~linked & ~trail
    res["collective_wait"][unl & coll] = dur[unl & coll]
    res["unattributed"][unl & ~coll] = dur[unl & ~coll]
    # 2. Issued before the GPU went idle. A launch call still running when the GPU went idle, whose
    # kernel started as soon as it returned, was a slow launch (a cold first launch: module load, JIT),
    # not a dependency.
    early = linked & (lt <= s)
    just_in_time = early & (((e - lt) <= lat) | ((lt_end > s) & ((e - lt_end) <= lat)))
    res["launch_overhead"][just_in_time] = dur[just_in_time]
    waited = early & ~just_in_time
    # Inside one graph replay, the spacing between its kernels is the GPU's own per-kernel cost, not a
    # dependency and not the CPU's: both sides of the gap came from the same graph launch call, long returned
    # (a review read a MobileNetV3 replayed from one graph, its GPU 86% busy and 0.7 ms behind the CPU, as
    # launch-bound on its 300 gaps of 0.5 us).
    prv = gaps["prev_gpu"].to_numpy()
    prev_launcher = np.where(prv >= 0, gpu["launcher"].to_numpy()[np.maximum(prv, 0)], -2) if len(gpu) else prv
    same_graph = waited & (prev_launcher == launcher)
    res["graph_spacing"][same_graph] = dur[same_graph]
    waited &= ~same_graph
    res["collective_wait"][waited & coll] = dur[waited & coll]
    res["dependency_wait"][waited & ~coll] = dur[waited & ~coll]
    # 3. Issued after the GPU went idle: the CPU was late. The activity may also have waited after its
    # launch call returned (behind an event or another stream): what exceeds the launch latency is that
    # wait's, not the CPU's, so launch overhead is bounded by how late the launch call itself was.
    late = (linked | trail) & (lt > s)
    cpu_end = np.where(late, np.minimum(lt, e), s)           # the CPU's own part ends at the launch
    call_end = np.where(late, np.minimum(np.maximum(lt_end, cpu_end), e), s)
    waited_after = np.where(late, np.maximum(0.0, (e - call_end) - lat), 0.0)
    waited_after = np.minimum(waited_after, dur)
    res["collective_wait"][late & coll] += waited_after[late & coll]
    res["dependency_wait"][late & ~coll] += waited_after[late & ~coll]
    left = dur - waited_after                               # the CPU-late part, launch latency included
    # The blocking calls the thread sat in during the gap, before the launch: usually one, but a pageable
    # copy is followed by a stream sync in the same aten::copy_, and the copy (its driver staging) is
    # where the time went. The first of them starts the blocked stretch, the last ends it.
    blocker = np.full(len(gaps), -1, dtype=np.int64)
    first = np.full(len(gaps), -1, dtype=np.int64)
    blocked_until = np.zeros(len(gaps))     # when the last of those calls returned
    blocks = blocking_calls(model)
    for th in np.unique(thread[late]):
        sel = np.flatnonzero(late & (thread == th))
        b = blocks[blocks["thread"] == th]
        if b.empty:
            continue
        b_end = b["end"].to_numpy()
        k = np.searchsorted(b_end, lt[sel], side="right") - 1
        k0 = np.searchsorted(b_end, s[sel] - BLOCK_TOL_US, side="left")
        ok = (k >= 0) & (k0 <= k)
        kk = np.maximum(k, 0)
        # Only calls back to back (one op's copy and its sync), not two syncs with host work between.
        kk0 = np.minimum(np.maximum(k0, _chain_start(b["ts"].to_numpy(), b_end)[kk]), kk)
        pageable = (b["block_kind"].to_numpy() == "pageable")
        # The call named as the cause: a pageable copy in the stretch if there is one, else the last.
        cum = np.concatenate([[0], np.cumsum(pageable)])
        has_pg = (cum[kk + 1] - cum[kk0]) > 0
        last_pg = np.searchsorted(cum, cum[kk + 1], side="left") - 1
        named = np.where(has_pg, last_pg, kk)
        blocker[sel[ok]] = b.index.to_numpy()[named[ok]]
        first[sel[ok]] = b.index.to_numpy()[kk0[ok]]
        last = b.index.to_numpy()[kk[ok]]
        blocked_until[sel[ok]] = b["end"].reindex(last).to_numpy()
    gaps["blocker"] = blocker
    # A blocking call owns the stretch it kept the CPU waiting while the GPU was drained: from the later
    # of the gap's start and the call's start to its end. Before the call the thread was doing something
    # else (its own cause). After it returns, the dispatch that refills the queue is the sync's too when
    # the call really waited (without it the CPU would have issued that work while the GPU was busy);
    # host work after it (Python, preprocessing, the DataLoader) is host_bound's.
    pre_end = s.copy()          # end of the CPU's own stretch before the blocking call
    released = s.copy()         # when the blocking call returned
    blocked = late & (blocker >= 0)
    block_cause = np.full(len(gaps), "", dtype=object)
    refill_cap = np.full(len(gaps), np.inf)
    if blocked.any():
        idx = np.flatnonzero(blocked)
        bk = blocks["block_kind"].reindex(blocker[idx]).to_numpy()
        b_start = blocks["ts"].reindex(first[idx]).to_numpy()
        b_end = blocked_until[idx]
        pre_end[idx] = np.clip(b_start, s[idx], cpu_end[idx])
        released[idx] = np.clip(b_end, pre_end[idx], cpu_end[idx])
        owned = np.minimum(released[idx] - pre_end[idx], left[idx])
        cause = np.where(bk == "pageable", "pageable_memcpy", "sync_stall")
        for c in ("pageable_memcpy", "sync_stall"):
            m = cause == c
            res[c][idx[m]] += owned[m]
        # Only a call that really waited makes the refill its own: blocked for a while, the GPU still busy when
        # it began (it drained while the CPU waited). Not a sync that found the GPU already drained, even in a
        # run of calls that together last longer: HTA's DDP trace, eight 2-9 us cudaEventSynchronize of DDP's
        # own timing spread over 61 us, 0.9 ms into a gap that host work had opened, had taken 3.9 ms of refill.
        # (Capping the refill at the GPU work queued when the call began was tried: the replayed savings did
        # not move, but the measured idle of syncs in launch-bound steps fell under the ranking bar, and
        # prerequisites of a graph that the matrix measured at 1.0-1.3x were no longer ranked.)
        block_cause[idx] = np.where((b_end - b_start >= SYNC_REFILL_MIN_US) & (s[idx] >= b_start), cause, "")
        # One that waited only for its own copy, nothing queued before it, owns no more refill than it blocked: made
        # asynchronous, the dispatch after it would have overlapped the copy, no more (an MI250 step's 5x128 copy,
        # 22 us, had owned the 0.25 ms of dispatch after it: a review read 0.42 ms of sync for about 0.03).
        refill_cap[idx] = np.where(queued_until(model, b_start) > b_start + QUEUE_TOL_US, np.inf, b_end - b_start)
        left[idx] -= owned
    # 4. The rest of the CPU-late part: host work vs feeding the GPU, before the blocking call and after
    # it. Without CPU ops in the trace the split cannot be known: that time stays unattributed.
    rest = np.flatnonzero(late & (left > 0))
    if len(rest):
        pre_len = np.minimum(pre_end[rest] - s[rest], left[rest])
        host_pre = np.zeros(len(rest))
        host_post = np.zeros(len(rest))
        if model_has_cpu_ops(model):
            for th in np.unique(thread[rest]):
                m = thread[rest] == th
                rows = rest[m]
                host_pre[m] = host.host_time(th, s[rows], pre_end[rows])
                host_post[m] = host.host_time(th, released[rows], cpu_end[rows])
        else:
            res["unattributed"][rest] += np.maximum(0.0, left[rest] - lat)
            left[rest] = np.minimum(left[rest], lat)
            pre_len = np.minimum(pre_len, left[rest])
        host_pre = np.minimum(host_pre, pre_len)
        post_len = left[rest] - pre_len
        host_post = np.minimum(host_post, post_len)
        res["host_bound"][rest] += host_pre + host_post
        res["launch_overhead"][rest] += pre_len - host_pre
        feed = post_len - host_post
        owned = np.minimum(feed, refill_cap[rest])
        for c in ("pageable_memcpy", "sync_stall"):
            m = block_cause[rest] == c
            res[c][rest[m]] += owned[m]
        m = block_cause[rest] == ""
        res["launch_overhead"][rest] += np.where(m, feed, feed - owned)
    _one_time_work(model, s, e, res, blocker)
    _startup_is_startup(model, s, e, res)
    _capture_is_capture(model, s, e, res)
    _missing_is_unattributed(model, s, e, res)
    for c in CAUSES:
        gaps[c] = res[c]
    # Host work that reads a result just copied to the host is the sync's (reads.py).
    gaps["reads_copy"] = False
    reads = copy_reads(model, gaps[gaps["host_bound"] > 0])
    if len(reads):
        i = reads["gap"].to_numpy()
        gaps.loc[i, "sync_stall"] += gaps.loc[i, "host_bound"]
        gaps.loc[i, "host_bound"] = 0.0
        gaps.loc[i, "blocker"] = reads["call"].to_numpy()
        gaps.loc[i, "reads_copy"] = True
    return gaps


def _at(col: pd.Series, idx: np.ndarray) -> np.ndarray:
    """col[idx], or a column of NaN where the table is empty (the values are masked out then)."""
    return col.to_numpy()[idx] if len(col) else np.full(len(idx), np.nan)


def _one_time_work(model: TraceModel, s: np.ndarray, e: np.ndarray, res: dict, blocker: np.ndarray) -> None:
    """Idle while torch.compile compiles is recompile's, and idle while cuDNN searches its algorithms is
    cudnn_benchmark's (the host time between its trials, building the candidate plans, had read as launch overhead:
    sample_traces/matrix/h100_clean59*), and idle in autograd's anomaly detection is anomaly_detection's (its checks'
    syncs had read as sync_stall, its stored stacks as launch overhead: h100_clean62*), taken from the CPU-side causes
    in CPU_LATE's order; so is a sync's made in it (the autotuner's, the trials', the checks'), refill included."""
    for u in UNASKED:
        over = u.host_us(model, s, e)
        if not over.any():
            continue
        mine = (blocker >= 0) & u.calls(model, np.maximum(blocker, 0))
        for c in ("sync_stall", "pageable_memcpy"):
            res[u.cause][mine] += res[c][mine]
            res[c][mine] = 0.0
        _move(over, res, CPU_LATE, u.cause)


def _startup_is_startup(model: TraceModel, s: np.ndarray, e: np.ndarray, res: dict) -> None:
    """Idle while a start-up call ran is cuda_startup's, taken from the CPU-side causes: HTA's a100_alexnet
    window had put 29.9 s of cudaDeviceGetStreamPriorityRange (context creation) inside aten::empty_strided
    into host_bound and cuDNN's first cudaFree into sync_stall."""
    # (and the work of an op before a kernel's first, lazily loaded launch: a B200 eager trace's 9.5 ms of such
    # gaps had read as launch overhead, with high confidence)
    over = _overlap(zip(*startup_intervals(model)), s, e)
    if over.any():
        _move(over, res, CPU_LATE, "cuda_startup")


def _capture_is_capture(model: TraceModel, s: np.ndarray, e: np.ndarray, res: dict) -> None:
    """Idle while the program records a CUDA graph is graph_capture's, taken from the CPU-side causes: the
    launches made then run nothing, so they are not late (vLLM's capture window had read 54.5 of 59.1 ms
    as launch overhead, beside the note that it is a capture)."""
    a, b = capture_spans(model)
    over = _overlap(zip(a, b), s, e)
    if over.any():
        _move(over, res, CPU_LATE, "graph_capture")


def _missing_is_unattributed(model: TraceModel, s: np.ndarray, e: np.ndarray, res: dict) -> None:
    """Idle inside a stretch whose events the file lacks (trace/coverage.missing_event_spans) is unattributed:
    what the CPU did there was cut out, not untraced Python or a slow launch."""
    over = _overlap(((a, b) for a, b, _k in missing_event_spans(model)), s, e)
    _move(over, res, ("host_bound", "launch_overhead"), "unattributed")


def _overlap(spans, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per gap [s, e): how much of it the (start, end) spans cover (they do not overlap each other)."""
    over = np.zeros(len(s))
    for a, b in spans:
        over += np.clip(np.minimum(e, b) - np.maximum(s, a), 0.0, None)
    return over


def _move(over: np.ndarray, res: dict, causes: tuple, to: str) -> None:
    """Give `to` up to `over` of each gap's time, taken from `causes` in their order."""
    over = over.copy()
    for c in causes:
        move = np.minimum(over, res[c])
        res[c] -= move
        res[to] += move
        over -= move


def _loop_thread(model: TraceModel) -> str:
    """The thread that owns the ProfilerStep ranges (the training loop's)."""
    cpu = model.cpu
    st = cpu[cpu["is_step"].to_numpy()]
    return str(st["thread"].mode().iloc[0]) if len(st) else ""


def _trailing(model: TraceModel, gaps: pd.DataFrame, unlinked: np.ndarray) -> np.ndarray:
    """Gaps with no GPU work after them that end where their ProfilerStep's CPU range ends."""
    out = np.zeros(len(gaps), dtype=bool)
    st = model.steps
    if model.step_source != "ProfilerStep" or not unlinked.any() or "cpu_end" not in st:
        return out
    cpu_end = st.set_index("step")["cpu_end"].reindex(gaps["step"].to_numpy()).to_numpy()
    e = gaps["end"].to_numpy()
    return unlinked & (gaps["next_gpu"].to_numpy() < 0) & (np.abs(e - cpu_end) <= 1.0) & \
        (e > gaps["start"].to_numpy())


def _chain_start(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each blocking call (sorted), the first of the run of calls back to back that ends with it."""
    start = np.arange(len(ts))
    for j in range(1, len(ts)):
        if ts[j] - end[j - 1] <= CHAIN_GAP_US:
            start[j] = start[j - 1]
    return start


def per_step_causes(model: TraceModel, gaps: pd.DataFrame) -> pd.DataFrame:
    """Idle time per step and cause (us), averaged over devices so it adds up to the step's idle."""
    steps = model.steps[["step"]].copy()
    ndev = max(1, int(model.steps["n_devices"].iloc[0])) if len(model.steps) else 1
    if gaps.empty:
        for c in CAUSES:
            steps[c] = 0.0
        return steps.set_index("step")
    sums = gaps.groupby("step")[list(CAUSES)].sum() / ndev
    return steps.set_index("step").join(sums).fillna(0.0)
