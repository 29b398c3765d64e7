"""The fix plan: the ranked fixes in the order to apply them, each replayed on top of the ones before,
with the step time after each. Fixes aimed at the same idle time are never summed: the second one in
the plan saves only what the first left. A kind's prerequisites (KindSpec.prerequisites: syncs break a
CUDA-graph capture) go before it, whatever their own saving; even syncs at the step's edges, which a graph
of the work between them captures fine, as a graph saves more once they are gone too (item_logging: the
loss.item() after the optimizer alone saves 0.01 ms, and lets the graphed step overlap the next). Only
those inside the step are marked as needed first (analyses.needs); the others as helping (`helps`).
"""
from __future__ import annotations

from ..analyses import collective_speed, needs, spec
from ..analyses.base import Finding
from ..analyses.fixes import CudaGraph, combine, loader_fix, loader_pace, workers_to_keep_up
from ..analyses.loading import CHEAPER_WORK, PLAN_SAYS_WORKERS, WORKERS_ADVICE, WORKERS_UNNAMED
from . import replay
from .bounds import KERNEL_FIXES, OVERLAP_FIXES, changes


# A step whose GPU work is this share of it is GPU-bound; below CPU_BOUND after a fix, the CPU sets it.
GPU_BOUND, CPU_BOUND = 0.9, 0.8
# Collectives this share of the step a fix leaves may set it: said on the first row that makes them so.
COMM_SHARE = 0.2


def _collectives_ms(findings: list[Finding]) -> tuple[float, float, bool] | None:
    """The step's collectives as exposed_communication measured them: (GPU ms a step, ms of it beside no compute,
    whether they move so slowly that most of that time is a wait for another rank or a slow transport)."""
    ev = next((f.evidence for f in findings if f.kind == "exposed_communication"), None)
    if not ev or not ev.get("communication_ms_per_step"):
        return None
    return (ev["communication_ms_per_step"], ev.get("exposed_communication_ms_per_step") or 0.0,
            collective_speed.slow(ev.get("collective_bandwidth") or []))


def _replayable(f: Finding) -> bool:
    return bool(f.fixes) and spec(f.kind).estimate != "measured" and not spec(f.kind).note


def _takes_prerequisites(f: Finding) -> bool:
    # A generation loop's graphs capture its model's forwards only (CudaGraph.forwards): the loop's syncs,
    # outside them, neither block the capture nor make it save more (set 44: placed first, the graph then
    # saved 0.2 ms less), so they are not pulled in front of it.
    return not any(isinstance(x, CudaGraph) and x.forwards for x in f.fixes)


def busy_floor(fixes, gpu_us: float, gpu_start_us: float, gpu_busy_us: float) -> float:
    """The least step a fix of the kernels leaves (us): the trace's GPU busy time scaled by the replay's GPU work
    after the fixes (`gpu_us`) over before (`gpu_start_us`); 0 for other fixes. Only for a fix of the kernels: copies
    moved beside them (pinned) overlap, which the sum counts twice, and floor() has their own floor (pageable
    feature caches graphed after pinning: 7 rows fell out of 25%)."""
    if gpu_start_us <= 0 or not changes(fixes, KERNEL_FIXES) or changes(fixes, OVERLAP_FIXES):
        return 0.0
    return gpu_busy_us * gpu_us / gpu_start_us


def plan_order(findings: list[Finding], minor: list[Finding] = ()) -> list[Finding]:
    """Replayable fixes in rank order, each preceded by its prerequisites that are present, a minor
    finding too (a sync inside the step costs little by itself but still breaks a CUDA-graph capture; one at
    the step's edge does not, but a graph saves more once the step's end no longer waits for the GPU)."""
    todo = [f for f in findings if _replayable(f)]
    # (a hidden fix pays only once the others shorten the GPU's work: after all of them)
    todo = [f for f in todo if not f.hidden] + [f for f in todo if f.hidden]
    pool = todo + [f for f in minor if _replayable(f)]
    out: list[Finding] = []

    def place(f: Finding, seen: tuple = ()) -> None:
        if f in out or f.kind in seen:
            return
        for pre in spec(f.kind).prerequisites if _takes_prerequisites(f) else ():
            for g in pool:
                if g.kind == pre:
                    place(g, seen + (f.kind,))
        out.append(f)

    for f in todo:
        place(f)
    return out


def fix_plan(compiled: replay.Compiled, base: replay.Replay, findings: list[Finding], bw: float,
             cuts=None, step_us: float | None = None, floor=lambda applied: 0.0, extra=lambda applied: 0.0,
             minor: list[Finding] = (), hidden: list[Finding] = (), bar_us: float = 0.0,
             gpu_busy_us: float = 0.0) -> list[dict]:
    """Rows of the plan. Step times are of the un-profiled step (`step_us`): it less the replayed saving
    and `extra(fixes applied so far)` (what they save that the replay's baseline does not hold), and never
    below `floor(fixes applied so far)` (the GPU work those fixes leave, in us). `hidden` findings
    (Finding.hidden) come last, each only where it then saves at least `bar_us`. Nor below the trace's GPU busy time
    (`gpu_busy_us`, median per step) scaled by the GPU work the fixes leave in the replay over the work it had."""
    rows: list[dict] = []
    applied: tuple = ()
    step = base.median_us if step_us is None else step_us
    prev = step
    everything = list(findings) + list(minor)
    saved_before, kinds = 0.0, set()
    need_before = None
    order = plan_order(findings, minor)
    order += [f for f in hidden if f not in order]
    gpu_before = gpu_start = replay.gpu_work_us(replay.apply(compiled, (), bw, cuts))
    comm = _collectives_ms(everything)
    for f in order:
        trying = combine([applied, f.fixes])
        state = replay.apply(compiled, trying, bw, cuts)
        saved = max(0.0, base.median_us - replay.simulate(state).median_us)
        saved += extra(trying)
        cap = _own_cap(f, applied, kinds, gpu_start - gpu_before)
        if cap is not None:
            saved = min(saved, saved_before + cap)
        # A later fix never takes back what the ones before it saved (a pinned copy after the result was
        # kept on the GPU): the plan's cumulative saving only grows.
        saved = max(saved, saved_before)
        gpu = replay.gpu_work_us(state)
        # (floor() has no GPU floor for a fix of the kernels, and the replay's median can fall below the GPU work it
        # runs: a DDP rank's all-reduces, held 5-6 ms by their peer in the window's first steps, back up the later
        # steps' once a graph packs the compute, and the replayed steps read 0.2 ms apart; the plan had put the fused
        # optimizer's step at 0.212 ms, its own kernels 1.8 ms by the replay. Scaled, as what each step issued is not
        # what its GPU ran where the CPU runs ahead: fusion_arith's issued 3.88 ms a step, ran 3.14 in 3.25 ms steps.)
        busy = busy_floor(trying, gpu, gpu_start, gpu_busy_us)
        t = max(step - saved, floor(trying), busy, 0.0)
        if f.hidden and prev - t < bar_us:
            continue
        applied, saved_before, kinds = trying, saved, kinds | {f.kind}
        # Loading moved into DataLoader workers keeps up only with enough of them for the step it feeds
        # (and each batch is handed back to the loop: fixes.loader_pace).
        loader = loader_fix(applied)
        need = workers_to_keep_up(loader.loading_us, loader.batch_mb, t) if loader and t > 0 else None
        # Said where the count is first needed and where a later fix raises it; where the advised count's
        # pace is the step itself, what sets it is each batch's hand-off (fixes.loader_pace).
        bound = loader is not None and loader.pace_us() >= t - 1.0
        said, need_before = (need if need != need_before else None), need if need else need_before
        # A fix that leaves the GPU idle most of a step it used to fill hands the step to the CPU: said, as the
        # next fix is then on the host's side (TF32 in an fp32 step that was GPU-bound; an expert review).
        cpu_now = gpu_before >= GPU_BOUND * prev and gpu < CPU_BOUND * t
        gpu_was, gpu_before = gpu_before, gpu
        # Collectives that hid in a step the CPU held may bound the shorter step a fix leaves. Said from what the
        # trace measured, not replayed: where they fall once the compute packs depends on the other ranks, which
        # one rank's trace does not hold (an expert review read HTA's A100 DDP rank's 49.7 ms step after the launch
        # fix as holding 12.3 ms of collectives, 10.4 ms of them beside no compute today; the plan had not said so).
        comm_now = (comm is not None and t > 0 and comm[0] * 1000 >= COMM_SHARE * t
                    and comm[0] * 1000 < COMM_SHARE * prev)
        rows.append({"kind": f.kind, "estimated_step_ms": round(t / 1000, 3),
                     # (summed over streams a copy beside the kernels would count twice: never above the
                     # step it works in, which a review read as the step shorter than its GPU work)
                     "gpu_work_after_ms": round(min(gpu, t) / 1000, 3), "cpu_bound_after": bool(cpu_now),
                     "collectives_ms": comm[0] if comm_now else None,
                     "collectives_exposed_ms": comm[1] if comm_now else None,
                     # (a review: HTA's A100 all-reduces take 2.4-3.3 ms whatever their size, 2.5-13 GB/s: waiting)
                     "collectives_slow": comm[2] if comm_now else None,
                     # (a later fix that changes the kernels leaves the step shorter than the trace's GPU work: said,
                     # as a review read a plan's last step below the GPU busy time as breaking physics; the first
                     # fix's own point, TF32 or a fused kernel, is its saving)
                     "gpu_work_before_ms": round(min(gpu_was, prev) / 1000, 3) if rows else None,
                     "saves_ms": round(max(0.0, prev - t) / 1000, 3),
                     "cumulative_saves_ms": round(max(0.0, step - t) / 1000, 3),
                     "prerequisite_for": [g.kind for g in everything if needs(g, f)],
                     # placed before them as their kind's prerequisite, though they do not need it
                     "helps": [g.kind for g in order if f.kind in spec(g.kind).prerequisites and not needs(g, f)
                               and _takes_prerequisites(g)],
                     "loader_workers_needed": said,
                     # (a hidden fix: alone it saves nothing, its work running beside the GPU's)
                     "pays_after_fixes_above": f.hidden,
                     # (hidden as the loop waits for its DataLoader workers, not as its work runs beside the GPU's)
                     "paced_by_dataloader_workers": bool(f.evidence.get("paced_by_dataloader_workers")),
                     "loader_handoff_ms": round(loader_pace(0.0, loader.batch_mb) / 1000, 3) if said and bound else None})
        prev = min(prev, t)
    return rows


def _own_cap(f: Finding, applied: tuple, kinds: set, gpu_cut_us: float) -> float | None:
    """The most a fix adds on top of the fixes before it (None: the replay alone says). Its own estimate's upper
    end (its physics caps, the idle a host-work fix measured): the plan and the findings tell one story. A
    hidden loader fix saves nothing alone: no more than the loading it takes off the loop. Not capped: a CUDA graph
    after the syncs that broke it (its prerequisites), and a fix of the kernels after another fix (its own
    upper end was replayed on the step as it was: TF32 in an fp32 step bound by its loader saves 15 ms alone,
    44 ms once the loading is in workers). A host-work fix after fixes that shortened the GPU's work
    (`gpu_cut_us`) may add that much more: the loader that hid behind fp32 matmuls is exposed once TF32 runs
    them (holdout38_patch_loader_gpu with stacks: TF32 ranked first, the loader's 15.5 ms idle had capped the
    two fixes at 35 ms of a 76 ms replayed saving; measured 4.8x)."""
    if f.hidden and loader_fix(f.fixes):
        return loader_fix(f.fixes).loading_us
    if applied and all(isinstance(fx, KERNEL_FIXES) for fx in f.fixes):
        return None
    if kinds & set(spec(f.kind).prerequisites):
        return None
    own = f.savings_bound_us[1] if f.savings_bound_us else f.estimated_savings_us
    return own + max(0.0, gpu_cut_us)


# A loop fed by DataLoader workers already needs more of them for a shorter step only where the count is worth saying.
MORE_WORKERS = 1.2


def name_workers(findings: list[Finding], plan, step_ms: float | None) -> None:
    """The loader fix's advice names the worker count its plan row found to keep up (a review found the
    number in the plan only, the advice saying num_workers=N): the most any row needs, as the rows after the
    loader fix's raise it where they shorten the step it feeds (a review read "num_workers=1" beside a plan
    whose next row said ">= 2"). A loop its workers pace (`step_ms`: its un-profiled step, None where it does not
    wait for them long enough to be their pace): how many times more workers the step this fix leaves takes (a review of a tokenizer-fed BERT: 4 workers at 141.7 ms a step, 22.3 ms after the fix, "raise num_workers" with
    no number)."""
    counts = [(r["kind"], r["loader_workers_needed"]) for r in plan if r.get("loader_workers_needed")]
    need = {counts[0][0]: max(n for _, n in counts)} if counts else {}
    for f in findings:
        if need.get(f.kind) and WORKERS_UNNAMED in f.fix:
            f.fix = f.fix.replace(WORKERS_UNNAMED, f"num_workers={need[f.kind]} (the fewest that keep up with the "
                                  "step, by the fix plan; no more than the machine's free cores),").replace(
                PLAN_SAYS_WORKERS, "")
        at = next((i for i, r in enumerate(plan) if r["kind"] == f.kind), None)
        if WORKERS_ADVICE not in f.fix or at is None or not step_ms:
            continue
        t = plan[at]["estimated_step_ms"]
        if not (t > 0 and step_ms >= MORE_WORKERS * t):
            continue
        k = step_ms / t
        pace = (f"they supply a batch about every {step_ms:.1f} ms now, the loop's un-profiled step, and the step this "
                f"fix leaves takes {t:.1f} ms")
        # (workers seldom scale linearly: the forty-fourth set's BERT went 393.3 -> 141.7 ms from 0 to 4 of them, 2.8x;
        # a review read "about 7x" as 28 workers on a 16-core host: past the cores, the per-sample work is the fix)
        f.fix = f.fix.replace(WORKERS_ADVICE, (
            f"Raise num_workers to about {k:.1f}x what it is now, as far as the CPU cores free for them allow ({pace}; "
            f"if they scaled linearly, which they seldom do); where that is more workers than cores, {CHEAPER_WORK} "
            "first"))
