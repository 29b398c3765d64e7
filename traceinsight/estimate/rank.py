"""rank: estimate each finding's savings by replaying the graph with its fix, then sort.

The estimate is replayed-baseline minus replayed-with-fix (median step), so the replay's own
error on the unchanged trace cancels out; that error is reported beside the estimates.
Fixes are also replayed all together: savings of different fixes overlap and do not add up.
"""
from __future__ import annotations

import math

from ..analyses import needs, spec
from ..analyses.base import Context, Finding
from ..analyses.fixes import WARM_CPU, CudaGraph, RemoveHostWork, combine, loader_fix
from . import replay
from ..trace.coverage import startup_calls
from ..trace.facts import erratic_steps, no_complete_step, worker_wait_us
from ..trace.profiler_cost import measured_unprofiled_us
from .baseline import RELIABLE_REPLAY_PCT, baseline
from .confidence import hedge
from .deinflate import unprofiled_method
from .likely import likely
from .plan import busy_floor, fix_plan, name_workers
from .bounds import (CAP_OWN, GPU_FIXES, KERNEL_FIXES, OVERLAP_FIXES, alternative_saving, at_end, changes, cut_range,
                     floor, pinned_bandwidth_gbps, range_note, recoverable_us, state_saving, unprofiled_idle,
                     worker_paced)

# A finding must cost at least this share of the median step to be reported: below it, a fix is
# not worth a ticket, and a healthy trace must come out healthy.
MIN_SHARE = 0.03
MIN_US = 5.0
# How a finding whose fix cannot be replayed is estimated: its measured cost, the most the fix can give.
# What a note says where a fix saves more than the idle by taking GPU work away (the verdict looks for it).
GPU_WORK_AWAY = "of GPU work away"
MEASURED_NOTE = "measured cost in the trace; the fix's effect cannot be replayed, so this is an upper bound"
PROFILER_NOTE = "the profiled step less the un-profiled step: only the profiled run pays it"
HIDDEN_LIKELY = "not given: it saves nothing alone; what it saves is its plan row's, after the fixes before it"
# Why a replayed saving may exceed the finding's own cost, where its kind does not say (KindSpec.beyond_cost).
BEYOND_COST = "the replay counts what the fix changes beyond the cost itself"


def estimate(ctx: Context, G, findings: list[Finding]) -> dict:
    compiled = replay.Compiled(G) if G is not None else None
    # A host disturbed in the profiled window only added time: the estimates read the quiet steps.
    erratic = erratic_steps(ctx.model)
    if compiled is not None and erratic:
        compiled.report_steps = set(erratic["quiet"])
    bw = pinned_bandwidth_gbps(ctx)
    actual = ctx.model.steps.set_index("step")["dur"]
    info = {"baseline_replay_ms": None, "replay_error_pct": None, "combined": None,
            "replayed_steps": [], "pinned_gbps": round(bw, 1), "unprofiled_step_ms": None}
    base = cuts = None
    # The loop's wait for DataLoader workers (outside the profiler): it absorbs what comes off the loop's
    # own work, and the workers take turns, so the pace is the mean step, not the median (a step that
    # found its batch ready).
    wait = worker_wait_us(ctx.model)
    target = measured_unprofiled_us(ctx.model)     # the step `record` timed outside the profiler, if any
    if compiled is not None:
        base, cuts = baseline(ctx, compiled, info, actual, bw, wait, target, erratic)
    if info["unprofiled_step_ms"] is None and target is not None:
        # Nothing to replay (a CPU-only run, no GPU work linked to its launches): the step `record` measured
        # is still the program's step, said as measured.
        info["unprofiled_step_ms"] = round(target / 1000, 3)
        info["unprofiled_step_method"] = unprofiled_method(ctx.model)
    median_step = (info["unprofiled_step_ms"] * 1000) if info["unprofiled_step_ms"] else ctx.median_step_us
    # The profiler's cost a DataLoader-worker wait absorbed (the un-profiled step above the de-inflated
    # replay): a fix that removes the wait saves it too, the loop then running at its own pace.
    absorbed = max(0.0, median_step - base.median_us) if base is not None and base.step_us and wait else 0.0

    def extra(applied) -> float:
        return absorbed if any(isinstance(fx, RemoveHostWork) for fx in applied) else 0.0
    if info["unprofiled_step_ms"]:
        _settle_profiler_note(findings, ctx.median_step_us, median_step, measured_unprofiled_us(ctx.model) is not None,
                              window=ctx.model.step_source == "whole trace")
    gpu_removed: dict[int, float] = {}
    gpu_touched: dict[int, float] = {}      # GPU time per step of the kernels each fix changes
    gpu_removed_ends: dict[int, tuple[float, float]] = {}
    measured: set[int] = set()      # findings whose estimate is their measured (profiled) cost
    own: dict[int, float | None] = {}   # a cap of the finding's own on its every end (None: its point, as measured)
    for f in findings:
        how = spec(f.kind).estimate
        if base is None or not base.step_us or how == "measured" or not f.fixes:
            measured.add(id(f))
            # An analysis may know a tighter bound than its measured cost (overlap cannot hide more
            # communication than there is compute to hide it behind).
            pre = f.estimated_savings_us
            f.estimated_savings_us = f.lost_per_step_us if math.isnan(pre) else min(pre, f.lost_per_step_us)
            f.estimate_note = (PROFILER_NOTE if spec(f.kind).profiler_cost else MEASURED_NOTE)
            f.savings_bound_us = (0.0, f.estimated_savings_us)     # (that bound is the range's top too)
            own[id(f)] = None
            continue
        state = replay.apply(compiled, f.fixes, bw, cuts)
        saved = state_saving(base, state) + extra(f.fixes)
        f.estimated_savings_us = saved
        gpu_removed[id(f)] = f.gpu_removed_us = _gpu_removed(compiled, state)
        gpu_touched[id(f)] = _gpu_removed(compiled, state, touched=True)
        f.estimate_note = "replay of the timeline with the fix applied"
        warm = any(getattr(fx, "warm", False) for fx in f.fixes)
        if warm:
            f.estimate_note += (f"; the rest of the step's CPU work then runs at {WARM_CPU:.2f} of its time "
                                "(no longer evicted from the caches by that host work: measured on five workloads)")
            # Host work that evicted the caches for its own time gives the rest of the step at most that time back
            # (in the five measured it was as long as the rest of the step or longer; a review read 2.1 ms of a
            # launch-bound step's Python as 12.6 ms). (Where the finding's cost is the host work's idle: a sync's is
            # its wait, not the reading of the copied result its fix also removes.)
            if how == "idle_floor" and saved > (most := 2 * f.lost_per_step_us + extra(f.fixes)):
                f.estimated_savings_us = saved = most
                f.estimate_note += ", at most as much again as the host work itself"
        ranged = [fx for fx in f.fixes if getattr(fx, "bounds", None)]
        if ranged:
            ends = []
            for k in (1, 0):
                end_state = replay.apply(compiled, at_end(f.fixes, k), bw, cuts)
                end = state_saving(base, end_state)
                if loader_fix(f.fixes):
                    # (how fast batches come back from DataLoader workers is the range: the replay has no
                    # workers, their pace is the step's floor at each end)
                    end = min(end, max(0.0, median_step - floor(at_end(f.fixes, k), info)))
                ends.append((end, _gpu_removed(compiled, end_state)))
            lo, hi = min(ends), max(ends)
            # A range whose ends agree (the uncertain part is not in this trace) is no range.
            if hi[0] - lo[0] >= 1.0:
                # (The median step of a replay need not move monotonically with the fix's strength: the
                # range holds the point.)
                f.savings_bound_us = (min(lo[0], saved), max(hi[0], saved))
                gpu_removed_ends[id(f)] = (lo[1], hi[1])
                f.estimate_note += "; " + range_note(f.fixes)
        elif how == "idle_floor" and not warm and saved > (floor_us := f.lost_per_step_us + extra(f.fixes)):
            # Removing host work also lets later launches go out sooner, but the replay removes all
            # of it, data loading or not: the idle it caused is the estimate, and the most any end claims
            # (a review read HTA's multi-stream trace's 0.78 ms "likely" to 18.6, the idle its limits call
            # unattributed). (Work that leaves the machine's CPU altogether is all of it, and the rest of the
            # step runs warm after it: the replay is the estimate.)
            # (Not scaled to the un-profiled step's idle as measured costs are: Python and numpy outside
            # any recorded event cost the profiler nothing, and the traced part is the replay's.)
            own[id(f)] = f.estimated_savings_us = floor_us
            f.estimate_note = (f"measured idle during host work, the most its fix recovers (a replay with all of the "
                               f"host work removed gives {saved / 1000:.3f} ms)")
        elif how == "idle_floor" and not warm:
            own[id(f)] = floor_us
        elif how == "upper_bound":
            f.savings_bound_us = (0.0, saved)
            f.estimate_note += "; " + (spec(f.kind).caveat or "what replaces the removed work is not in "
                                                              "the trace: treat as an upper bound")
    idle_u = _physics(ctx, findings, info, median_step, gpu_removed, gpu_removed_ends, measured)
    if worker_paced(ctx, median_step):
        # The loop waits for its DataLoader workers: they set the pace, and a fix of the loop's own work (its
        # launches, syncs, kernels) only lengthens the wait: it saves nothing until they keep up, and the plan
        # weighs it after the loader's fix (a review: a BERT fed by 4 workers, waiting 112 ms a step on average,
        # read a launch fix first at 21.6 ms; measured, the step was the workers' 142 ms).
        for f in findings:
            if id(f) not in measured and not spec(f.kind).note and not changes(f.fixes, (RemoveHostWork,)):
                # (what it saves once they do, the replay's, is the most its plan row adds: plan._own_cap; one
                # below the bar anyway stays a minor finding, where the plan still finds it as a prerequisite)
                f.hidden, f.savings_bound_us = _significant(f, median_step), (0.0, f.estimated_savings_us)
                f.estimated_savings_us, f.evidence = 0.0, dict(f.evidence, paced_by_dataloader_workers=True)
                f.estimate_note += (f"; saves nothing alone: the loop waits {wait / 1000:.2f} ms a step for its "
                                    "DataLoader workers, which set its pace")
    for f in findings:
        # A replayed saving above the finding's own cost is no error, but says why (a review read the sync
        # fix's 0.75 ms beside its 0.24 ms "what the fix targets" as a saving past its idle).
        if id(f) not in measured and f.lost_per_step_us > 0 and f.estimated_savings_us > 1.3 * f.lost_per_step_us:
            f.estimate_note += (f"; more than the finding's own cost ({f.lost_per_step_us / 1000:.3f} ms per step): "
                                + (spec(f.kind).beyond_cost or BEYOND_COST))
        # Above the un-profiled step's whole idle, only by GPU work the fix takes away: say how much (a review read
        # the fused optimizer's 1.99 ms, 17% of the step, beside "about 16% idle" as a saving past the idle).
        gone = gpu_removed.get(id(f), 0.0)
        if (not spec(f.kind).note and gone >= 10.0 and f.estimated_savings_us == f.estimated_savings_us
                and f.estimated_savings_us > idle_u + 10.0):
            f.estimate_note += (f"; more than the un-profiled step's GPU idle ({idle_u / 1000:.3f} ms): the fix also "
                                f"takes about {gone / 1000:.3f} ms {GPU_WORK_AWAY} (kernels fused, dropped or shortened)")
    # No end of a range promises more than the fix can recover at the estimate's un-profiled step: the point's caps
    # (_physics, _one_time_window; its own measured idle where that is its estimate) cut the replay's, the likely
    # and the alternatives' ranges too (a review read a launch fix "likely" to save more than the step less its GPU
    # work). Start-up or no complete step: not steady, as all our measured fixes are.
    steady = not (no_complete_step(ctx.model) or startup_calls(ctx.model))
    bar = max(MIN_US, MIN_SHARE * median_step)      # a ranked fix's least saving (its kind's own share aside)
    idle = unprofiled_idle(ctx, info, median_step)[0]
    once = any(spec(f.kind).headline for f in findings)
    for f in findings:
        def cap_of(fx, touched=None) -> tuple[float, str]:
            return recoverable_us(fx, median_step, info, idle, f.beyond_idle_us, touched, spec(f.kind).idle_cause)

        def alt_cap(fx) -> float:
            # (a fix of the kernels themselves, a compile: at most the idle and the kernels it changes; a review read
            # reduce-overhead's likely top at a step below the GEMMs and the cell it does not change)
            if not changes(fx, KERNEL_FIXES):
                return cap_of(fx)[0]
            return cap_of(fx, _gpu_removed(compiled, replay.apply(compiled, fx, bw, cuts), touched=True))[0]
        if f.alternatives and base is not None and base.step_us and id(f) not in measured:
            caps = [alt_cap(fx) for _k, _w, fx in f.alternatives]
            alts = ((key, what) + alternative_saving(compiled, base, fx, bw, cuts, median_step, info, extra(fx), cap)
                    for (key, what, fx), cap in zip(f.alternatives, caps))
            # (one whose replay saves exactly what the fix's does is no other way: a copy the host reads at
            # once is replayed as a sync, waited for either way)
            # (below the bar for a ranked fix, host noise makes most of a likely range, as for a minor finding: a
            # review read compiling a tiny conv net at "0.0 ms, likely -25.5 to 29.0 ms")
            f.alternative_savings_us = tuple(
                a + (steady and a[2] >= bar and likely(f.kind, a[2], median_step, (cap,) * 2, a[3])[0] or None,)
                for a, cap in zip(alts, caps) if abs(a[2] - f.estimated_savings_us) >= ALTERNATIVE_SAME)
        if spec(f.kind).note or math.isnan(f.estimated_savings_us):
            continue
        cap, why = cap_of(f.fixes, gpu_touched.get(id(f)))
        if once:
            cap = min(cap, f.lost_per_step_us + f.beyond_idle_us + gpu_removed.get(id(f), 0.0))
        if id(f) in own and (mine := f.estimated_savings_us if own[id(f)] is None else own[id(f)]) < cap:
            cap, why = mine, CAP_OWN
        f.savings_bound_us, cut = cut_range(f.savings_bound_us, f.estimated_savings_us, cap)
        if cut:     # (a range cut to nothing loses the note of why it was one)
            note = f.estimate_note if f.savings_bound_us or not range_note(f.fixes) else \
                f.estimate_note.replace("; " + range_note(f.fixes), "")
            f.estimate_note = note + f"; its range cut at {max(cap, f.estimated_savings_us) / 1000:.3f} ms, {why}"
        f.likely_range_us, f.likely_basis = likely(f.kind, f.estimated_savings_us, median_step, (cap, cap),
                                                   f.savings_bound_us, cap_why=why) if steady else (
            None, "not given: the window is not a steady state")
    hedge(ctx, findings, info, steady, bool(erratic))
    # Notes are about the measurement, not the program: they go after every real fix. A speculative
    # fix does not headline over a measured one: savings are weighed by confidence to rank.
    findings.sort(key=_rank_key)
    # (a hidden fix saves nothing alone: the plan decides whether it is reported)
    hidden = [f for f in findings if f.hidden and not _significant(f, median_step)]
    for f in hidden:
        f.likely_range_us, f.likely_basis = None, HIDDEN_LIKELY
    minor = [f for f in findings if not _significant(f, median_step) and f.lost_per_step_us > 0
             and not spec(f.kind).note and not f.hidden]
    for f in minor:     # (below the bar, host noise makes most of a likely range: the replay's range is said)
        f.likely_range_us, f.likely_basis = None, ""
    findings = [f for f in findings if _significant(f, median_step)]
    replayable = [f for f in findings if spec(f.kind).estimate != "measured" and f.fixes]
    if base is not None and base.step_us and len(replayable) > 1:
        plan = combine([f.fixes for f in replayable])
        state = replay.apply(compiled, plan, bw, cuts)
        saved = state_saving(base, state) + extra(plan)
        # (as the plan's rows: a review read "all fixes together, a step of about 0.215 ms" under a plan ending at 1.76)
        busy = busy_floor(plan, replay.gpu_work_us(state),
                          replay.gpu_work_us(replay.apply(compiled, (), bw, cuts)), (info.get("gpu_busy_ms") or 0.0) * 1000)
        after = max(median_step - saved, floor(plan, info), busy, 0.0)
        info["combined"] = {"kinds": [f.kind for f in replayable],
                            "estimated_step_ms": round(after / 1000, 3),
                            "estimated_savings_ms": round((median_step - after) / 1000, 3)}
    if base is not None and base.step_us and replayable:
        def plan_of(ranked):
            return fix_plan(compiled, base, ranked, bw, cuts, step_us=median_step,
                            floor=lambda applied: floor(applied, info), extra=extra, minor=minor, hidden=hidden,
                            bar_us=bar, gpu_busy_us=(info.get("gpu_busy_ms") or 0.0) * 1000)
        info["plan"] = plan_of(findings)
        # A hidden fix the plan found to pay after the fixes before it is reported, ranked by what it adds.
        paying = {r["kind"] for r in info["plan"] if r["pays_after_fixes_above"]}
        ranked = _after_prerequisites(findings + [f for f in hidden if f.kind in paying], info["plan"], minor)
        if ranked != findings:
            findings = ranked
            info["plan"] = plan_of(findings)
            _mark_needs(findings, info["plan"], minor)     # what each adds in the plan as it now stands
    _name_prerequisites(findings, minor)
    # (the workers' pace is the loop's step only where it waits for them: bounds.worker_paced)
    name_workers(findings, info.get("plan") or (), info.get("unprofiled_step_ms")
                 if worker_paced(ctx, median_step) else None)
    return {"findings": findings, "minor": minor, "whatif": info}


def _after_prerequisites(findings: list[Finding], plan: list[dict], minor: list[Finding]) -> list[Finding]:
    """The ranking, with a fix that needs another ranked fix first (a CUDA graph cannot capture a sync)
    weighed by what it adds once that one is done (its row in the plan), not by what it would save
    alone: the user does the other first anyway, and where it already takes most of the time (syncs
    in a launch-bound step) it is the fix that helps most (sync_mask_loss: the syncs saved 1.1 ms, a
    CUDA graph after them 0.2 ms, measured about 0)."""
    _mark_needs(findings, plan, minor)
    return sorted(findings, key=_rank_key)


def _rank_key(f: Finding) -> tuple:
    """Notes after every fix; fixes by saving times confidence, a fix that needs others first by what it
    adds after them (Finding.after_prerequisites, once the plan is known); a hidden fix after every fix that
    pays alone (the fixes it waits for come first, whatever it adds after them)."""
    own = f.estimated_savings_us if f.after_prerequisites is None else f.after_prerequisites[1]
    return spec(f.kind).note, f.hidden, -own * CONFIDENCE_WEIGHT.get(f.confidence, 0.5)


def _mark_needs(findings: list[Finding], plan: list[dict], minor: list[Finding]) -> None:
    """Finding.after_prerequisites: the fixes each needs first, and its plan row's saving. A minor finding the
    plan applies first counts (a sync below the ranking bar still breaks a capture: the verdict had said "needs
    sync_stall fixed first" beside an empty needs_first)."""
    adds = {r["kind"]: r["saves_ms"] * 1000 for r in plan}
    order = [r["kind"] for r in plan]
    planned = findings + [g for g in minor if g.kind in order]
    for f in findings:
        first = tuple(dict.fromkeys(g.kind for g in planned if needs(f, g)))
        before = tuple(order[:order.index(f.kind)]) if f.kind in order else ()
        first = before if f.hidden else first      # (it pays only after all of them)
        f.after_prerequisites = (first, adds[f.kind], before) if first and f.kind in adds else None


def _settle_profiler_note(findings: list[Finding], profiled_us: float, unprofiled_us: float,
                          measured: bool = False, window: bool = False) -> None:
    """The profiler-cost note gives the same un-profiled step as the summary; `window`: the trace is one window
    with no step markers, no step that repeats (a review read vLLM's one-time capture's "48.34 ms to each step"
    as a per-step cost)."""
    how = "measured" if measured else "an estimate"
    for f in findings:
        if spec(f.kind).profiler_cost:
            lost = max(0.0, profiled_us - unprofiled_us)
            # The total stays this per step times the steps the analysis counted (a review found the
            # analysis's own total beside rank's per-step figure).
            steps = f.lost_total_us / f.lost_per_step_us if f.lost_per_step_us > 0 else 0.0
            f.lost_per_step_us, f.lost_total_us = lost, lost * steps
            f.evidence = dict(f.evidence, unprofiled_step_ms_estimate=round(unprofiled_us / 1000, 3),
                              inflation_ms_per_step=round(lost / 1000, 3),
                              inflation_pct_of_unprofiled_step=round(100 * lost / unprofiled_us, 1) if unprofiled_us else None)
            each, what = ("the window (no step markers)", "window") if window else ("each step", "step")
            f.title = (f"Recording ({f.evidence.get('options_seen')}) added about {lost / 1000:.2f} ms to {each}: the "
                       f"un-profiled {what} is about {unprofiled_us / 1000:.2f} ms ({how}); CPU-side figures here are "
                       "profiled")


def _name_prerequisites(findings: list[Finding], minor: list[Finding]) -> None:
    """A fix whose prerequisites are present says so, first thing: e.g. the syncs that would make a
    CUDA-graph capture fail must go before the graph."""
    for f in findings:
        pres = [g for g in findings + minor if needs(f, g)]
        if not pres or not f.fixes:
            continue
        what = [g.as_prerequisite or g.title for g in pres]
        f.evidence = dict(f.evidence, prerequisites=[{"kind": g.kind, "what": w} for g, w in zip(pres, what)])
        f.fix = "First: " + "; ".join(what) + " (fix that before this one: see the plan). " + f.fix


# An alternative whose saving is within this of the fix's own (us) replayed the same: not shown.
ALTERNATIVE_SAME = 1.0
# Ranking weight of an estimate by its confidence.
CONFIDENCE_WEIGHT = {"high": 1.0, "medium": 0.8, "low": 0.5}


def _physics(ctx: Context, findings: list[Finding], info: dict, step_us: float,
             gpu_removed: dict[int, float], gpu_removed_ends: dict[int, tuple[float, float]],
             measured: set[int]) -> float:
    """No saving above what the step can give: a fix saves at most the un-profiled step's idle plus
    the GPU work it removes (a fix of idle time removes none); an unreliable replay falls back to the
    measured cost as the bound. Returns that idle (us)."""
    idle, idle_scale = unprofiled_idle(ctx, info, step_us)
    err = info.get("replay_error_pct")
    unreliable = err is not None and abs(err) > RELIABLE_REPLAY_PCT
    info["replay_reliable"] = not unreliable
    for f in findings:
        sp = spec(f.kind)
        if sp.note or math.isnan(f.estimated_savings_us):
            continue
        if unreliable and f.fixes and sp.estimate != "measured" and f.estimated_savings_us > f.lost_per_step_us:
            f.savings_bound_us = (0.0, f.estimated_savings_us)
            f.estimated_savings_us = f.lost_per_step_us
            measured.add(id(f))
            f.confidence = "low"
            f.estimate_note = (f"the replay of the unchanged trace misses the measured step by {err:+.0f}%, so "
                               "the replayed saving is not trusted: the measured cost is the estimate, the "
                               "replay the top of the range")
        if sp.idle_cause and id(f) in measured and idle_scale < 1.0:
            f.estimated_savings_us = _idle_scaled(f.estimated_savings_us, f.beyond_idle_us, idle_scale)
            if f.savings_bound_us:     # (as the estimate: the part beyond the idle is not scaled)
                f.savings_bound_us = tuple(_idle_scaled(x, f.beyond_idle_us, idle_scale) for x in f.savings_bound_us)
            f.estimate_note += f"; scaled to the un-profiled step's idle ({idle_scale:.0%} of the profiled idle)"
        changes_gpu = changes(f.fixes, GPU_FIXES)
        if sp.idle_cause and not changes_gpu:
            # (less the GPU work the fix adds: a graphed for-loop optimizer made capturable)
            added = sum(fx.optimizer_added_us for fx in f.fixes if isinstance(fx, CudaGraph))
            cap = max(0.0, idle + f.beyond_idle_us - added)
            why = ("capped at the step's GPU idle time (no fix of idle saves more)" if not added else
                   f"capped at the step's GPU idle time less the {added / 1000:.2f} ms of kernels capturable=True adds")
            caps = (cap, cap)
            if loader_fix(f.fixes):
                # Loading moved into DataLoader workers: however many, the step waits for each batch's
                # pass through the main process (fixes.loader_pace).
                caps = tuple(min(cap, max(0.0, step_us - floor(at_end(f.fixes, k), info))) for k in (0, 1))
                paced = max(0.0, step_us - floor(f.fixes, info))
                if paced < cap:
                    cap, why = paced, ("capped where the step waits for the DataLoader workers' batches (their "
                                       "pass through the main process)")
        elif id(f) in gpu_removed and not changes(f.fixes, OVERLAP_FIXES):
            cap = idle + gpu_removed[id(f)] + f.beyond_idle_us
            why = "capped at the step's GPU idle time plus the GPU work the fix removes"
            # Each end of a range is capped by the GPU work it removes itself, not by the point's.
            caps = tuple(idle + r + f.beyond_idle_us for r in gpu_removed_ends.get(id(f), (gpu_removed[id(f)],) * 2))
        elif changes(f.fixes, OVERLAP_FIXES):
            # Copies moved off the critical path still run every step on their copy engine.
            cap = max(0.0, step_us - floor(f.fixes, info))
            why = "capped where the step reaches its kernels' or its pinned copies' time (the copies still run every step)"
            # (each end by its own copies: at the top end of a range, copies to the host may not be made)
            caps = tuple(max(0.0, step_us - floor(at_end(f.fixes, k), info)) for k in (0, 1))
        else:
            continue
        if f.estimated_savings_us > cap:
            f.estimated_savings_us = cap
            f.estimate_note += "; " + why
        if f.savings_bound_us:
            lo, hi = min(f.savings_bound_us[0], caps[0]), min(f.savings_bound_us[1], caps[1])
            # (a range both of whose ends reach the cap is no range: what it was unsure of does not matter)
            f.savings_bound_us = (lo, hi) if hi - lo >= 1.0 else None
            if f.savings_bound_us is None and range_note(f.fixes):
                f.estimate_note = f.estimate_note.replace("; " + range_note(f.fixes), "")
    _one_time_window(findings, gpu_removed)
    return idle


def _one_time_window(findings: list[Finding], gpu_removed: dict[int, float]) -> None:
    """In a window that is CUDA start-up or a graph capture (a headline finding says so), no fix is given more
    than its own measured cost and the GPU work it removes: the replay shrinks the one-time calls with the work
    around them (a100_alexnet's launch, sync and host fixes had each claimed all 1,244 ms of its idle outside
    start-up, the launch fix beside 'under 1% idle')."""
    if not any(spec(f.kind).headline for f in findings):
        return
    for f in findings:
        if spec(f.kind).note or math.isnan(f.estimated_savings_us):
            continue
        own = f.lost_per_step_us + f.beyond_idle_us + gpu_removed.get(id(f), 0.0)
        if f.estimated_savings_us > own:
            f.estimated_savings_us = own
            f.estimate_note += ("; capped at its own measured cost plus the GPU work it removes (the window is "
                                "one-time start-up or graph capture, which the replay cannot tell from the rest)")
        if f.savings_bound_us:
            lo, hi = (min(x, own) for x in f.savings_bound_us)
            f.savings_bound_us = (lo, hi) if hi - lo >= 1.0 else None


def _idle_scaled(us: float, beyond_idle_us: float, scale: float) -> float:
    """A measured saving scaled to the un-profiled idle: the part of it beyond the idle is not idle time."""
    return max(0.0, us - beyond_idle_us) * scale + min(us, beyond_idle_us)


def _gpu_removed(compiled, s: replay.State, touched: bool = False) -> float:
    """GPU time per replayed step a replay state takes away (kernels dropped, shortened or fused; us), or
    with `touched` the whole time of the kernels it changes (the most such a fix could take away)."""
    idx = compiled.gpu_idx[compiled.gpu_step[compiled.gpu_idx] >= 0]
    n = max(1, len(compiled.steps))
    if touched:
        return float(compiled.dur[idx][compiled.dur[idx] != s.dur[idx]].sum()) / n
    return max(0.0, float((compiled.dur[idx] - s.dur[idx]).sum()) / n)


def _significant(f: Finding, median_step: float) -> bool:
    """Worth a ticket: the estimate clears the bar, and for idle causes so does the measured idle."""
    sp = spec(f.kind)
    bar = max(MIN_US, (MIN_SHARE if sp.min_share is None else sp.min_share) * median_step)
    if sp.note:
        return f.lost_per_step_us >= sp.note_share * median_step
    if sp.idle_cause and f.lost_per_step_us < bar:
        return False
    v = f.estimated_savings_us if not math.isnan(f.estimated_savings_us) else f.lost_per_step_us
    return v >= bar
