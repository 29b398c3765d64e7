"""What a fix's replay may claim: the replayed saving, the shortest step a plan can reach (its floor, and
what it is made of: the kernels' busy time, the copies at pinned bandwidth), the ends of a ranged fix, and
the estimates of a fix's other ways (Finding.alternatives), and the un-profiled step's recoverable idle."""
from __future__ import annotations

import numpy as np

from ..analyses.base import Context
from ..analyses.fixes import (BatchItems, CudaGraph, DropKernels, FuseChains, FusedOptimizer, NoAnomaly, NoCompiles, DropSpans,
                              NoSearch, PinCopies, RemoveHostWork, ScaleKernels, Unblock)
from ..trace.facts import worker_wait_us
from ..trace.steps import merged_intervals
from . import replay


# Fixes that change GPU work itself (the others only remove idle time). Unblock can: a result kept on the
# GPU is not copied whole, the data-dependent kernels of a boolean index go. NoCompiles: Inductor's autotuning
# runs each new kernel's configs on the GPU while it compiles. BatchItems: a loop's kernels done at once. NoSearch:
# cuDNN's trials run on the GPU. NoAnomaly: the NaN checks' kernels. DropSpans: the forward run again, a host-built tensor's copy.
GPU_FIXES = (ScaleKernels, DropKernels, FusedOptimizer, PinCopies, FuseChains, Unblock, NoCompiles, BatchItems, NoSearch,
             NoAnomaly, DropSpans)
# Fixes that also move GPU work off the compute stream (a pinned copy overlaps compute): they save
# more than the idle and the work they remove, so the cap on both does not apply.
OVERLAP_FIXES = (PinCopies,)
# Fixes that change the kernels themselves (neither copies moved off the critical path nor results kept on the
# GPU): the GPU's busy time is no floor for them.
KERNEL_FIXES = tuple(c for c in GPU_FIXES if c not in OVERLAP_FIXES + (Unblock,))


def changes(plan, kinds: tuple) -> bool:
    """Whether any fix of the plan is one of these kinds (GPU_FIXES, OVERLAP_FIXES, fix classes)."""
    return any(isinstance(fx, kinds) for fx in plan)


def saving(compiled, base, plan, bw, cuts) -> float:
    """Replayed (de-inflated) baseline minus the replayed plan, median step (us), never below 0."""
    return state_saving(base, replay.apply(compiled, plan, bw, cuts))


def state_saving(base, state: replay.State) -> float:
    """Replayed baseline minus a replay state with fixes applied, median step (us), never below 0."""
    return max(0.0, base.median_us - replay.simulate(state).median_us)


def alternative_saving(compiled, base, plan, bw, cuts, step_us: float, info: dict,
                       extra_us: float = 0.0, cap_us: float = np.inf) -> tuple[float, tuple[float, float] | None]:
    """What another way to apply a fix saves (us) and its range where its fixes have one: replayed like
    the fix, each end never past the step's floor at that end nor past `cap_us` (recoverable_us)."""
    def one(p) -> float:
        return min(min(saving(compiled, base, p, bw, cuts), max(0.0, step_us - floor(p, info))) + extra_us, cap_us)
    saved = one(plan)
    if not any(getattr(fx, "bounds", None) for fx in plan):
        return saved, None
    lo, hi = sorted(one(at_end(plan, k)) for k in (0, 1))
    return saved, ((min(lo, saved), max(hi, saved)) if hi - lo >= 1.0 else None)


def floor(plan, info: dict, paced: bool = True, modelled: bool = True) -> float:
    """The shortest step a plan can reach (us): its GPU busy time, or only the kernels' once a fix moves
    the copies off the critical path; no floor from the GPU once a fix changes the kernels themselves.
    Loading moved into DataLoader workers: the step also waits for their batches (fixes.loader_pace), unless
    `paced` is off. `modelled` off: the GPU work the trace shows alone (the kernels a copy fix leaves), not the work
    the fix's model adds or re-times (the replacement kernels, the copies at pinned bandwidth: holdout2_d2h_features'
    fixed step beat its copies at the 50 GB/s assumed, below)."""
    pace = max([0.0] + [fx.pace_us() for fx in plan if isinstance(fx, RemoveHostWork)]) if paced else 0.0
    if changes(plan, KERNEL_FIXES):
        # (no fix of ours changes the collectives: the step is no shorter than them. A DDP rank's fused optimizer had
        # left a 0.212 ms step beside 0.215 ms of all-reduces.)
        return max(pace, (info.get("collective_busy_ms") or 0.0) * 1000)
    # Copies may go (moved off the critical path, or not made once results stay on the GPU); kernels stay.
    key = "kernel_busy_ms" if changes(plan, OVERLAP_FIXES + (Unblock,)) else "gpu_busy_ms"
    # Work moved from the host onto the GPU adds its kernels.
    added = sum(fx.share * fx.replacement_gpu_us for fx in plan if isinstance(fx, Unblock)) if modelled else 0.0
    # A graph of a for-loop optimizer made capturable adds its step counts' kernels (the same DDP rank's graph had
    # been put at a 2.6 ms step, its GPU busy time, under the 1.86 ms of kernels capturable=True adds to it).
    added += sum(fx.optimizer_added_us for fx in plan if isinstance(fx, CudaGraph)) if modelled else 0.0
    floor = (info.get(key) or 0.0) * 1000 + added
    # A pinned copy off the critical path still runs every step on its copy engine: the step is no shorter
    # than its copies at pinned bandwidth (holdout2_d2h_features: 33.5 MB a step, 0.67 ms at the 50 GB/s
    # assumed for an H200, 0.61 ms in the fixed trace; the fixed step 0.99 ms, its kernels 0.2, as the
    # measured fix waits for each copy). Unless the result stays on the GPU.
    if modelled and changes(plan, (PinCopies,)) and not changes(plan, (Unblock,)):
        kept = max(fx.kept for fx in plan if isinstance(fx, PinCopies))
        by_dir = info.get("pinned_copy_ms_by_direction") or {}
        copies = (max(by_dir.get("HtoD", 0.0), by_dir.get("DtoH", 0.0) * (1.0 - kept)) if kept else
                  info.get("pinned_copy_ms") or 0.0)
        # Copies still waited for (overlap=False: pinned, but the host blocks in each) run between the
        # kernels, not beside them: the step is no shorter than both.
        waited = not any(fx.overlap for fx in plan if isinstance(fx, PinCopies))
        floor = floor + copies * 1000 if waited else max(floor, copies * 1000)
    return max(floor, pace)


def physical_cap(plan, step_us: float, info: dict, kernels_cap: float | None = None) -> float:
    """The most a plan can save by physics alone: down to the GPU work it leaves (floor() without what it models:
    the DataLoader workers' pace, the new copies' or kernels' time, estimates our measured fixes beat); for a fix of
    the GPU's work, at most `kernels_cap` (the idle and the kernels or copies it changes). A range's top stops
    there (recoverable_us); the point also stops at the finding's own caps (rank._physics)."""
    if not plan:
        return 0.0
    cap = max(0.0, step_us - floor(plan, info, paced=False, modelled=False))
    if kernels_cap is not None and changes(plan, GPU_FIXES):
        cap = min(cap, kernels_cap)
    return cap


# Why a range's top stops where it does (recoverable_us), in the report's words.
CAP_IDLE = "what a fix of idle time can recover, the un-profiled step's GPU idle"
CAP_GPU = "what the fix can recover, down to the GPU work it leaves (the idle and the kernels or copies it changes)"
CAP_OWN = "the idle the finding measured, the most its fix recovers"


def recoverable_us(plan, step_us: float, info: dict, idle_us: float, beyond_idle_us: float = 0.0,
                   touched_us: float | None = None, idle_fix: bool = False) -> tuple[float, str]:
    """The most a fix can save at the estimate's un-profiled step (us), and why in words: the caps rank._physics
    puts on the point, for the ends of every range (the replay's, the likely one, an alternative's). A fix of an
    idle cause that leaves the GPU's work as it is (`idle_fix`): the step's recoverable idle (unprofiled_idle)
    and its cost beyond the idle; any other: down to the GPU work it leaves (physical_cap), for a fix of the
    kernels at most the idle and the kernels it changes (`touched_us`)."""
    if idle_fix and not changes(plan, GPU_FIXES):
        return idle_us + beyond_idle_us, CAP_IDLE
    kernels = None if touched_us is None else idle_us + touched_us + beyond_idle_us
    return physical_cap(plan, step_us, info, kernels), CAP_GPU


def cut_range(rng: tuple[float, float] | None, point_us: float,
              cap_us: float) -> tuple[tuple[float, float] | None, bool]:
    """A range with its top no higher than cap_us (never below the point, which the range holds): (the range, or
    None where its ends then agree, and whether the cap cut it)."""
    top = max(cap_us, point_us)
    if not rng or rng[1] <= top + 0.5:
        return rng, False
    lo = min(rng[0], top)
    return ((lo, top) if top - lo >= 1.0 else None), True


def range_note(plan) -> str:
    """Why a ranged fix's estimate is a range, in the report's words."""
    return "; ".join(dict.fromkeys(
        getattr(fx, "RANGE_NOTE", "the new kernels' speed is not in the trace, hence the range")
        for fx in plan if getattr(fx, "bounds", None)))


def at_end(plan, k: int) -> tuple:
    """The plan with each ranged fix at end k of its range (0: the low end)."""
    return tuple(fx.at(fx.bounds[k]) if getattr(fx, "bounds", None) else fx for fx in plan)


# Pinned host-to-device bandwidth by GPU generation (compute capability major) when the trace has no
# large pinned copy to measure it from: PCIe 5 (Hopper, Blackwell), PCIe 4 (Ampere, Ada), PCIe 3.
PINNED_GBPS_BY_CC = {10: 50.0, 9: 50.0, 8: 24.0}
PINNED_GBPS_OLD = 12.0


def pinned_bandwidth_gbps(ctx: Context) -> float:
    """Host-to-device bandwidth of a pinned copy: measured from the trace's large pinned copies, else the
    GPU generation's bus."""
    g = ctx.model.gpu
    pinned = g[(g["kind"] == "memcpy") & (g["copy_dir"] == "HtoD") & ~g["pageable"] & (g["bytes"] >= 1e6)]
    if len(pinned) and pinned["dur"].sum() > 0:
        return float(pinned["bytes"].sum() / (pinned["dur"].sum() * 1e-6) / 1e9)
    cc = next((d.compute_capability for d in ctx.model.devices.values() if d.compute_capability), None)
    if cc is None or ctx.model.meta.get("vendor") == "AMD":     # (AMD's is a gfx architecture: gpu_specs)
        return replay.PINNED_GBPS_DEFAULT
    return PINNED_GBPS_BY_CC.get(int(cc[0]), PINNED_GBPS_OLD if int(cc[0]) < 8 else 50.0)


def pinned_copy_us(ctx: Context, steps, pinned_gbps: float, dirs=("HtoD", "DtoH")) -> float:
    """Median over the replayed steps of the busiest host-device direction's copy time with every copy
    pinned (a pageable copy at `pinned_gbps`, a pinned one as it ran), per device averaged over devices as
    the kernels' busy time is (us). The two directions use their own copy engines and overlap."""
    g = ctx.model.gpu
    c = g[((g["kind"] == "memcpy") & g["copy_dir"].isin(["HtoD", "DtoH"])).to_numpy()]
    if c.empty or not len(steps) or pinned_gbps <= 0:
        return 0.0
    dur = c["dur"].to_numpy(dtype=float)
    nbytes = c["bytes"].to_numpy(dtype=float)
    page = c["pageable"].to_numpy(dtype=bool) & (nbytes > 0)
    dur = np.where(page, np.minimum(dur, nbytes / (pinned_gbps * 1e3)), dur)
    of = ctx.step_of(c["ts"].to_numpy())
    kinds = c["copy_dir"].astype(str).to_numpy()
    n_dev = max(1, len(np.unique(g["device"].to_numpy())))
    per = [max(float(dur[(of == st) & (kinds == d)].sum()) for d in dirs) / n_dev for st in steps]
    return float(np.median(per))


def kernel_busy_us(ctx: Context, steps, only=None) -> float:
    """Median over the replayed steps of the time the GPU ran anything but a copy to or from the host (kernels,
    memsets, device-to-device copies: the work no copy fix moves; HTA's DDP trace, 320 device-to-device copies a
    step, had a plan step 0.8 ms below its GPU busy time), per device averaged over devices as the step's GPU
    busy time is. `only`: a mask over the GPU rows, of the work to count (the collectives)."""
    g = ctx.model.gpu
    k = g[~g["copy_dir"].isin(["HtoD", "DtoH"]).to_numpy() | (g["kind"] != "memcpy").to_numpy()] if only is None \
        else g[only]
    if k.empty or not len(steps):
        return 0.0
    ts, end, dev = k["ts"].to_numpy(), k["end"].to_numpy(), k["device"].to_numpy()
    of = ctx.step_of(ts)
    devices = np.unique(dev)
    per = []
    for st in steps:
        busy = 0.0
        for d in devices:
            m = (of == st) & (dev == d)
            s, e = merged_intervals(ts[m], end[m])
            busy += float((e - s).sum())
        per.append(busy / len(devices))
    return float(np.median(per))


# A loop waiting at least this share of its un-profiled step for DataLoader workers runs at their pace.
WORKER_PACED = 0.2


def worker_paced(ctx: Context, step_us: float) -> bool:
    """The loop waits for its DataLoader workers for at least WORKER_PACED of its un-profiled step (a mean)."""
    return worker_wait_us(ctx.model) >= WORKER_PACED * step_us > 0


def unprofiled_idle(ctx: Context, info: dict, step_us: float) -> tuple[float, float]:
    """The un-profiled step's GPU idle (us; what no fix of idle time can exceed) and its share of the
    profiled idle: a measured idle cost is profiled idle, and shrinks by that share without the profiler."""
    st = ctx.model.steps
    full = st[st["step"].isin(ctx.full_steps)] if len(ctx.full_steps) else st
    # (a loop at its DataLoader workers' pace runs at the mean step (baseline), and idles the mean idle: the steps
    # that found a batch ready are not its steady state)
    how = "mean" if worker_paced(ctx, step_us) else "median"
    profiled_idle = idle = float(getattr(full["gpu_idle"], how)()) if len(full) else 0.0
    if info.get("gpu_busy_ms") is not None:
        idle = min(idle, max(0.0, step_us - info["gpu_busy_ms"] * 1000))
    # (less the idle during start-up calls: paid once per process, no steady-state fix recovers it; a100_alexnet's
    # host and sync fixes had claimed 14.5 and 8.6 s of it)
    scale = idle / profiled_idle if profiled_idle > 0 else 1.0
    # (and the idle while a CUDA graph is recorded, one-time too: vLLM's capture window had a sync fix at 44x its
    # idle. Recording is Python, inflated like the rest of the step: its idle shrinks by the same share; start-up
    # calls are the driver's, which the profiler does not slow)
    once = ctx.per_step_median(ctx.per_step["cuda_startup"]) + scale * ctx.per_step_median(ctx.per_step["graph_capture"])
    return max(0.0, idle - once), scale
