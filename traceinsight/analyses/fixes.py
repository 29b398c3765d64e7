"""Typed fixes: what an analysis says its fix would change in the timeline.

An analysis describes its fix as one or more of these small, frozen records; the what-if replay
(estimate/replay.py) knows how to apply each type, in order, each on top of the ones before. A
record that does not make sense (an empty pattern, a factor <= 0) fails when it is made, not as a
silent zero saving later; a type the replay does not know fails there, loudly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

# (The compiler's fixes have a module of their own; the union below holds them too.)
from .compiler_fixes import CompiledDispatch, FuseChains


@dataclass(frozen=True)
class CudaGraph:
    """The step runs as one graph replay: no Python, dispatch or launch cost; the input pipeline stays.

    `wrapper_us`: CPU per step in torch.compile's wrappers (guards, runtime wrapper) that a compiled
    program keeps under mode="reduce-overhead", where the graph replay also goes through cudagraph
    trees' bookkeeping (estimate/replay.py costs it); 0 for a program graphed by hand.
    `optimizer`: a for-loop optimizer's regions (t0, t1, thread) and the factor on their kernels' time
    once it is made capturable=True to be captured: its step count and bias corrections move to the
    GPU as tiny kernels per parameter. Not applied after a FusedOptimizer fix (a fused optimizer's
    capturable step adds nothing).
    `optimizer_added_us`: that added GPU work per step (us), which no step the graph leaves is shorter than
    (estimate/bounds.floor).
    `compiled_only`: only what runs inside torch.compile regions becomes a graph (mode="reduce-overhead"
    of a compiled program); eager work around them keeps its dispatch and launches.
    `python_share` (with `bounds`, a range): of the Python a compiled step keeps (the wrapper, the tree's
    call, the step's own code around the regions), the share of its profiled time it takes un-profiled.
    `forwards` (start, end, thread): a generation loop's model forwards (trace/generation.py), the only work
    the graphs capture; each replay costs `call_us` (the compiled forward's guards, cudagraph trees' call and
    the launch), and the loop's own work around the forwards stays eager.
    """
    wrapper_us: float = 0.0
    compiled_only: bool = False
    optimizer: tuple[tuple[tuple[float, float, str], ...], float] | None = None
    optimizer_added_us: float = 0.0
    python_share: float = 1.0
    bounds: tuple[float, float] | None = None
    forwards: tuple[tuple[float, float, str], ...] = ()
    call_us: float = 0.0
    RANGE_NOTE = ("how much the profiler slowed the compiled step's own Python is not in the trace "
                  "(measured 0.45-0.75 of its profiled time un-profiled), hence the range")

    def __post_init__(self):
        if not self.wrapper_us >= 0 or not self.call_us >= 0:
            raise ValueError(f"CudaGraph: wrapper_us and call_us must be >= 0, got {self.wrapper_us}, {self.call_us}")
        object.__setattr__(self, "forwards", tuple((float(a), float(b), str(t)) for a, b, t in self.forwards))
        for v in (self.python_share, *(self.bounds or ())):
            if not 0 < v <= 1:
                raise ValueError(f"CudaGraph: python_share must be in (0, 1], got {v}")
        if self.optimizer is not None:
            regions, factor = self.optimizer
            if not regions or not factor >= 1:
                raise ValueError(f"CudaGraph: optimizer needs regions and a factor >= 1, got {self.optimizer}")
            object.__setattr__(self, "optimizer", (tuple((float(a), float(b), str(t)) for a, b, t in regions),
                                                   float(factor)))

    def at(self, share: float) -> "CudaGraph":
        """The same fix at one end of its range."""
        return replace(self, python_share=share, bounds=None)


# Host work that leaves the machine's CPU path (moved onto the GPU, or gone: a result kept on the GPU is
# not read by numpy) also stops evicting the step's own CPU work from the caches: the rest of the step
# then runs faster than it did between two rounds of that work. Measured where >= 2 ms of numpy a step went
# (a class-weight bincount over 32 MB, argmax/top-k/confusion-matrix scoring of 8-22 MB of logits, on 2-4
# H100/H200 hosts each): the fixed step was 0.5-0.8 (median 0.6) of the replayed rest. Work moved into
# DataLoader workers still runs beside the loop (and adds their hand-off): no such speed-up was measured.
# It applies to the loop's thread only (estimate/replay.py): autograd's device thread, which runs a CUDA
# backward, kept its own core (F1 scoring after a training step: +25..+106% over-predicted with it on both).
WARM_AFTER_HOST_US = 2000.0
WARM_CPU = 0.65
# ...and the loop's Python at the top of the next step, right after such reading ran to the end of a step,
# ran coldest: once the reading went, the stretch from the step's start to its first op took 0.29-0.71
# (median 0.38) of its time (argmax/top-k/bincount/F1 scoring of 3-22 MB in numpy or CPU torch, six
# eval loops on the fitted H100 and H200 hosts).
COLD_AFTER_READ = 0.4
# A CUDA graph takes dispatch and launch code off the CPU: the CPU work it leaves runs at
# 1 - (1 - WARM_CPU) x (the share of the CPU time it took off). The same Python, measured before and after
# mode="reduce-overhead" in one trace pair (dynamo's cache lookup, the pregraph bytecode, AOT's runtime
# prologue), ran at 0.43-0.96 of its time after: less where more went (compiled inference, median 0.74)
# than where an eager optimizer stayed (compiled training, 0.71-0.97); four workloads on two H100 and two
# H200 hosts (one host's after runs, slower throughout, left out). Applied by replay_warm.graph_warm.


def toward(factor: float, share: float) -> float:
    """A time factor (WARM_CPU, COLD_AFTER_READ) that holds in `share` of the cases: 1 at none, `factor` at all."""
    return 1.0 - (1.0 - factor) * share


# DataLoader worker processes do not take a batch off the loop for free: each batch they make is written
# into shared memory, mapped by the main process and copied again by its pin-memory thread, in series with
# the step (the loop waits for the next batch). A batch paces the loop at loading / N + its bytes at
# LOADER_MS_PER_MB. Fitted on the clean matrix's 35 rows where N workers could not keep up (num_workers 0 ->
# 4 and 8; dataloader_workers0, holdout4 and holdout12, batches of 1.2-7.2 MB; 16-core H100/H200 hosts; both
# profiler settings): (measured step - loading / N) / MB per batch, median 0.39, p10-p90 0.22-1.12 ms per
# MB. (The advice as it stood, enough workers for loading / N to fit the step, over-predicted 31 of those
# 62 pairs by more than 25%; a serial share of the loading instead of its bytes fitted them as well, but
# made a 2.5 MB batch of 41 ms of numpy STFT, which 4 workers ran at 9.6 ms, pace at 17.)
LOADER_MS_PER_MB = 0.4
LOADER_MS_PER_MB_RANGE = (1.1, 0.2)
# The fix as advised: as many workers as keep up, at most ADVISED_WORKERS (a 16-core host's worth: beyond
# what keeps up, the hand-off sets the step). The report also estimates WORKER_COUNTS below it.
ADVISED_WORKERS = 16
WORKER_COUNTS = (2, 4, 8, 12)
MAX_WORKERS = 64


def loader_pace(loading_us: float, batch_mb: float, workers: int = 0, ms_per_mb: float = LOADER_MS_PER_MB) -> float:
    """The step's shortest time (us) once `workers` DataLoader processes make its batches (0: as many as
    it takes): each worker's share of the loading, and the batch's hand-off to the main process."""
    return (loading_us / workers if workers else 0.0) + 1000.0 * ms_per_mb * batch_mb


def workers_to_keep_up(loading_us: float, batch_mb: float, step_us: float) -> int | None:
    """The fewest DataLoader workers whose batches keep up with a step of `step_us`; None past MAX_WORKERS."""
    return next((n for n in range(1, MAX_WORKERS + 1) if loader_pace(loading_us, batch_mb, n) <= step_us), None)


@dataclass(frozen=True)
class RemoveHostWork:
    """CPU work that launches nothing (preprocessing, Python, data loading) leaves the step's path;
    `warm`: it leaves the machine's CPU too (not moved to DataLoader workers), so the rest of the step's
    CPU work runs at WARM_CPU of its time. `loading_us`: the DataLoader work per batch that worker
    processes must take over (num_workers=0), `batch_mb` the batch they hand back: the step is then no
    shorter than their pace (loader_pace with `workers` of them, 0: as many as keep up; `ms_per_mb`, with
    `bounds` a range), and the fix plan says how many keep up with each step."""
    warm: bool = False
    loading_us: float = 0.0
    batch_mb: float = 0.0
    workers: int = 0
    ms_per_mb: float = LOADER_MS_PER_MB
    bounds: tuple[float, float] | None = None
    RANGE_NOTE = ("how fast the host hands each batch from the DataLoader's worker processes to the loop is "
                  "not in the trace (0.2-1.1 ms per MB on our H100/H200 hosts), hence the range")

    def __post_init__(self):
        if min(self.loading_us, self.batch_mb, self.workers) < 0:
            raise ValueError("RemoveHostWork: loading_us, batch_mb and workers must be >= 0")
        for v in (self.ms_per_mb, *(self.bounds or ())):
            if not v >= 0:
                raise ValueError(f"RemoveHostWork: ms_per_mb must be >= 0, got {v}")

    def at(self, ms_per_mb: float) -> "RemoveHostWork":
        """The same fix at one end of its range."""
        return replace(self, ms_per_mb=ms_per_mb, bounds=None)

    def pace_us(self) -> float:
        """The step's shortest time with the loading in workers (0 for host work that is not loading)."""
        return loader_pace(self.loading_us, self.batch_mb, self.workers, self.ms_per_mb) if self.loading_us else 0.0


def loader_fix(plan) -> RemoveHostWork | None:
    """The fix in a plan that moves DataLoader loading into worker processes, if any."""
    return next((fx for fx in plan if isinstance(fx, RemoveHostWork) and fx.loading_us), None)


# The Python that reads a copy to the host (numpy argmax, metrics) runs right after the copy returns: it
# belongs to the copy when reading the bytes copied at this rate would take at least as long. The slowest
# pace we take a reader to have: numpy's argmax over eval_to_numpy_large's 3.3 MB of probabilities ran at
# 5.5 GB/s, a strided argmax over 21 classes and a bincount over 22 MB of segmentation logits at 0.8 GB/s;
# a scalar's .item() before unrelated numpy work owns none of it (4 bytes: 20 ns).
RESULT_READ_GBPS = 0.05


@dataclass(frozen=True)
class Unblock:
    """These blocking calls (cpu rows) no longer wait for the GPU.

    `kernels` (GPU rows) are the data-dependent kernels the synced ops run (nonzero, masked indexing and
    its index_put backward): the replacement (torch.where, a float mask, ignore_index) drops `share` of
    their time, and of their launches and dispatch. A result kept on the GPU instead of copied to the host
    also drops `share` of the host's Python that read the copy (estimate/replay.py). `bounds` (share at the
    low and the high end) make the estimate a range, from the stall alone to the stall plus those ops."""
    rows: tuple[int, ...]
    kernels: tuple[int, ...] = ()
    share: float = 0.0
    bounds: tuple[float, float] | None = None
    # The runtime calls (cpu rows) those data-dependent ops make, and the ops' own spans (thread, start,
    # end): all their CPU time goes, `dispatch_share` of it. The replacement is one fixed-size op per site
    # where they made tens of calls, so the CPU side is no range; None: `share`.
    calls: tuple[int, ...] = ()
    spans: tuple[tuple[str, float, float], ...] = ()
    dispatch_share: float | None = None
    # The host's reading of the copied result ran >= WARM_AFTER_HOST_US a step: once it goes (`share`), the
    # rest of the step's CPU work runs warm (WARM_CPU).
    warm: bool = False
    # When that reading was torch ops on CPU tensors: the kernels per copy the same ops launch once they
    # run on the GPU (reads.replacement_launches), whose dispatch stays on the CPU (`share` of them).
    replacement_launches: float = 0.0
    # ...and the GPU time those kernels add per step (the trace's median kernel each): not replayed, a floor
    # under the step (estimate/rank.py).
    replacement_gpu_us: float = 0.0

    def __post_init__(self):
        if not self.rows:
            raise ValueError("Unblock needs at least one call")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"Unblock share must be in [0, 1], got {self.share}")
        object.__setattr__(self, "rows", tuple(int(r) for r in self.rows))
        object.__setattr__(self, "kernels", tuple(int(r) for r in self.kernels))
        object.__setattr__(self, "calls", tuple(int(r) for r in self.calls))
        object.__setattr__(self, "spans", tuple((str(t), float(a), float(b)) for t, a, b in self.spans))
        if self.dispatch_share is not None and not 0.0 <= self.dispatch_share <= 1.0:
            raise ValueError(f"Unblock dispatch_share must be in [0, 1], got {self.dispatch_share}")

    @property
    def RANGE_NOTE(self) -> str:
        if self.kernels:
            return ("how much of the data-dependent ops the replacement removes is not in the trace, hence the "
                    "range")
        return ("whether the Python that reads the copied result goes too (the result kept on the GPU) or "
                "stays (read later) is not in the trace, hence the range")

    def at(self, share: float) -> "Unblock":
        """The same fix at one end of its range."""
        return replace(self, share=share, bounds=None)


@dataclass(frozen=True)
class DropCalls:
    """These runtime calls (cpu rows) are no longer made; the CPU work around them stays. The caching
    allocator's cudaMalloc calls once torch.cuda.empty_cache() no longer hands its blocks back: it reuses them."""
    rows: tuple[int, ...]

    def __post_init__(self):
        if not self.rows:
            raise ValueError("DropCalls needs at least one call")
        object.__setattr__(self, "rows", tuple(int(r) for r in self.rows))


@dataclass(frozen=True)
class BatchItems:
    """A Python loop over a batch's items done on the whole batch (analyses/item_loop.py): the CPU time inside these
    spans (thread, start, end: the turns past the batched code's own) and these runtime calls go, and so does each
    of these kernels (GPU rows, launched in the spans) but for its work share of what it does past KERNEL_FIXED_US,
    its fixed cost: a batched kernel does their work at once, their launch latency and tail once."""
    spans: tuple[tuple[str, float, float], ...]
    calls: tuple[int, ...] = ()
    kernels: tuple[int, ...] = ()
    # Each kernel's share of its work past the fixed cost that the batched kernel still takes (1: all of it; less
    # where one item's grid leaves most of the GPU's SMs empty, item_loop._work); empty: 1 each.
    work: tuple[float, ...] = ()

    def __post_init__(self):
        if not self.spans:
            raise ValueError("BatchItems needs at least one span")
        object.__setattr__(self, "calls", tuple(int(r) for r in self.calls))
        object.__setattr__(self, "kernels", tuple(int(r) for r in self.kernels))
        object.__setattr__(self, "work", tuple(float(w) for w in self.work) or (1.0,) * len(self.kernels))
        if len(self.work) != len(self.kernels) or not all(0.0 <= w <= 1.0 for w in self.work):
            raise ValueError("BatchItems needs one work share in [0, 1] a kernel")


# A kernel's fixed cost on the GPU (launch latency, ramp and tail): the shortest kernels of H100 and H200 traces
# run 1.2-2 us whatever they do.
KERNEL_FIXED_US = 2.0


@dataclass(frozen=True)
class MergeRegions:
    """A graph break goes (analyses/graph_break.py): the CPU time inside these spans (thread, start, end), the
    extra compiled regions' wrappers and the eager Python between them, and the setup of each forward graph call but
    the first, is no longer spent; the graph calls' launches stay."""
    spans: tuple[tuple[str, float, float], ...]
    # The runtime calls (cpu rows) made in those spans: the eager ops between the regions (the ops that compute the
    # value read, its copy and the sync) launch nothing of their own once they are in the graph or gone.
    calls: tuple[int, ...] = ()
    # torch.compile's wrapper time in the spans per step, un-profiled: a CUDA graph of the merged step (mode=
    # "reduce-overhead", replayed after this fix) keeps one region's wrapper, not the split step's.
    wrapper_us: float = 0.0

    def __post_init__(self):
        if not self.spans:
            raise ValueError("MergeRegions needs at least one span")
        object.__setattr__(self, "spans", tuple((str(t), float(a), float(b)) for t, a, b in self.spans))
        object.__setattr__(self, "calls", tuple(int(r) for r in self.calls))


@dataclass(frozen=True)
class PinCopies:
    """Pageable copies become pinned, asynchronous, and prefetched on a stream of their own.

    `dispatch_speedup`: how much faster the rest of the step's CPU work runs once the CPU no longer stages
    the copies through its caches (1: no change). `kept`: the share of the copies to the host that are not
    made (what the host needs is computed on the GPU and only that copied), and of the host's Python that
    read them (estimate/replay.py). `bounds`, two
    (dispatch_speedup, kept) ends, makes the estimate a range. `overlap=False`: the copies are pinned but
    the host still waits for each where it did (copy_(non_blocking=True) then a wait before the next
    launch): they only get faster."""
    dispatch_speedup: float = 1.0
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None
    kept: float = 0.0
    overlap: bool = True

    @property
    def RANGE_NOTE(self) -> str:
        why, ends = [], self.bounds or ()
        if len({b[0] for b in ends}) > 1:
            why.append("how much faster the step's dispatch runs once the CPU no longer stages the copies "
                       f"(measured 1.0-1.5x; the estimate takes {self.dispatch_speedup:g}x)")
        if len({b[1] for b in ends}) > 1:
            why.append("whether the host needs all it copies to the host, or only what it had time to read "
                       "within the step (the top end: the rest is not copied)")
        return " and ".join(why) + (" are" if len(why) > 1 else " is") + " not in the trace, hence the range"

    def __post_init__(self):
        for v, k in (((self.dispatch_speedup, self.kept),) + tuple(self.bounds or ())):
            if not 1.0 <= v <= 3.0:
                raise ValueError(f"PinCopies: dispatch_speedup must be in [1, 3], got {v}")
            if not 0.0 <= k <= 1.0:
                raise ValueError(f"PinCopies: kept must be in [0, 1], got {k}")

    def at(self, end: tuple[float, float]) -> "PinCopies":
        """The same fix at one end of its range."""
        return replace(self, dispatch_speedup=end[0], kept=end[1], bounds=None)


@dataclass(frozen=True)
class DropKernels:
    """Kernels whose name matches `pattern` (and their launch calls) disappear."""
    pattern: str

    def __post_init__(self):
        if not self.pattern:
            raise ValueError("DropKernels needs a pattern")
        re.compile(self.pattern)


@dataclass(frozen=True)
class ScaleKernels:
    """Kernels whose name matches `pattern` take `factor` times as long.

    `bounds` (factor at the best and at the worst end) makes the estimate a range: the new kernels'
    speed is not in the trace.
    """
    pattern: str
    factor: float
    bounds: tuple[float, float] | None = None

    def __post_init__(self):
        if not self.pattern:
            raise ValueError("ScaleKernels needs a pattern")
        re.compile(self.pattern)
        for f in (self.factor, *(self.bounds or ())):
            if not f > 0:
                raise ValueError(f"ScaleKernels factor must be > 0, got {f}")

    def at(self, factor: float) -> "ScaleKernels":
        """The same fix at one end of its range."""
        return replace(self, factor=factor, bounds=None)


@dataclass(frozen=True)
class NoPeerWait:
    """In a job, the other ranks arrive at each collective no later than this one (their straggler fixed):
    its collectives start as soon as it can start them (trace/peer_waits.py)."""


@dataclass(frozen=True)
class NoCompiles:
    """torch.compile stops compiling in the step: the CPU time inside its compiler leaves the step's path."""


@dataclass(frozen=True)
class NoSearch:
    """cuDNN stops searching its algorithms for each new shape (torch.backends.cudnn.benchmark=False): the trials'
    launches, syncs and kernels go, and of the search's host time `keep` stays (the heuristics build one plan for
    each new shape instead of timing ten). `bounds`: keep at the best and the worst end."""
    keep: float
    bounds: tuple[float, float] | None = None
    RANGE_NOTE = "what building one plan for each new shape costs is not in the trace, hence the range"

    def __post_init__(self):
        for k in (self.keep, *(self.bounds or ())):
            if not 0.0 <= k <= 1.0:
                raise ValueError(f"NoSearch: keep must be in [0, 1], got {k}")

    def at(self, keep: float) -> "NoSearch":
        """The same fix at one end of its range."""
        return replace(self, keep=keep, bounds=None)


@dataclass(frozen=True)
class NoAnomaly:
    """Autograd's anomaly detection off: each backward node's NaN check (its kernels, the copy of its answer to the host,
    the sync) and each forward node's stored Python stack go (trace/anomaly.py)."""


@dataclass(frozen=True)
class DropSpans:
    """Work the step need not do goes: the CPU time inside these spans (thread, start, end), the calls made there and
    the GPU work they launched. Activation checkpointing off (the forward each checkpointed segment ran again in the
    backward pass: trace/recompute.py; the memory its activations take comes back, which the trace cannot weigh), and
    tensors built once or on the device instead of on the host each step (the ops that build them, the copy and its
    stream sync: trace/host_built.py)."""
    spans: tuple[tuple[str, float, float], ...]

    def __post_init__(self):
        if not self.spans:
            raise ValueError("DropSpans needs at least one span")


@dataclass(frozen=True)
class FusedOptimizer:
    """Inside these optimizer regions (t0, t1, thread) launches cost nothing and the kernels take
    `gpu_factor` of their time: one fused multi-tensor kernel per parameter group. `extra`: more such
    regions outside Optimizer.step (a per-tensor weight EMA after it), which a graph's capturable
    optimizer does not concern."""
    regions: tuple[tuple[float, float, str], ...]
    gpu_factor: float
    extra: tuple[tuple[float, float, str], ...] = ()

    def __post_init__(self):
        if not self.regions and not self.extra:
            raise ValueError("FusedOptimizer needs at least one region")
        if not 0 < self.gpu_factor <= 1:
            raise ValueError(f"FusedOptimizer gpu_factor must be in (0, 1], got {self.gpu_factor}")
        for key in ("regions", "extra"):
            object.__setattr__(self, key, tuple((float(a), float(b), str(t)) for a, b, t in getattr(self, key)))


Fix = (CudaGraph | RemoveHostWork | Unblock | PinCopies | DropKernels | ScaleKernels | FusedOptimizer | FuseChains
       | CompiledDispatch | BatchItems)


def combine(plans: list[tuple]) -> tuple:
    """Several findings' fixes as one plan, in order, each fix once."""
    out: list = []
    for plan in plans:
        for fx in plan:
            if fx not in out:
                out.append(fx)
    return tuple(out)
