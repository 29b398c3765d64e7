"""What the document says about the trace itself: its facts (file, GPU, steps, profiler options) and what it
cannot show (its limits), in the report's words. Read from the model only: no analysis needed."""
from __future__ import annotations

import numpy as np

from ..trace.compiles import RECOMPILE_LIMIT, after_recompile, compile_ms_by_step, compiled_versions, eager_calls, shapes_vary
from ..trace.coverage import (after_startup, enclosing_op, gpu_events_cut_off, gpu_work_without_gpu_events,
                               lazy_loads_in_full_steps, missing_event_spans, seconds_or_ms, startup_calls,
                               unwritten_records)
from ..trace.cudnn_search import steady
from ..trace.dispatch_pace import slow_dispatch
from ..trace.facts import (erratic_steps, in_compiled_region, model_has_cpu_ops,
                           no_complete_step, program_facts, program_kind, rising_steps, worker_fed, worker_wait_us)
from ..trace.model import TraceModel
from ..trace.profiler_cost import measured_unprofiled_us
from ..trace.pycalls import BUILTIN_CALL
from ..trace.steps import OPTIMIZER_STEPS, STEP_SOURCES, USER_RANGES, step_at
from .prewindow import launched_before


def trace_facts(model: TraceModel, in_job: bool = False) -> dict:
    meta = model.meta
    rec = meta.get("traceinsight_record") or {}
    return {
        "file": model.path,
        "rank": model.rank,
        "world_size": (meta.get("distributed") or {}).get("world_size"),
        "gpu": model.device_name(),
        # (an AMD GPU's computeMajor/Minor are its gfx architecture's, no CUDA compute capability: trace/gpu_specs)
        "compute_capability" if meta.get("vendor") != "AMD" else "gfx_arch": next(
            (f"{d.compute_capability[0]}.{d.compute_capability[1]}" for d in model.devices.values()
             if d.compute_capability), None),
        "torch_version": rec.get("torch_version"),
        "cuda_runtime_version": meta.get("cuda_runtime_version"),
        "cuda_driver_version": meta.get("cuda_driver_version"),
        "cupti_version": meta.get("cupti_version"),
        # ROCm's tracer or HIP's runtime named: an AMD GPU, also where the trace leaves its name out
        "vendor": meta.get("vendor"),
        "events": model.n_events,
        "steps": int(len(model.steps)),
        "step_source": model.step_source,
        "partial_steps": int(model.steps["partial"].sum()),
        # Steps whose window is not their ProfilerStep range: where the GPU ran behind, a step starts when the
        # GPU finished the previous step's work (trace/steps.gpu_aware_bounds), which the report says.
        "steps_moved_to_gpu": _moved_steps(model),
        "gpu_activities": int(len(model.gpu)),
        # No GPU activity, but the CPU drove GPU work (its names): a GPU job whose GPU side went unrecorded.
        "gpu_work_unrecorded": gpu_work_without_gpu_events(model),
        "gpu_events_cut_off": gpu_events_cut_off(model),
        "devices_with_activity": sorted(int(d) for d in model.gpu["device"].unique()) if model.has_gpu else [],
        "streams": int(model.gpu.groupby(["device", "stream"]).ngroups) if model.has_gpu else 0,
        "profiler": {k: meta.get(k) for k in ("with_stack", "profile_memory", "record_shapes")
                     if meta.get(k) is not None} | ({"record": rec} if rec else {}),
        "warnings": list(model.warnings),
        "recording": _recording_note(rec),
        "profiler_note": profiler_note(model),
        "program_note": program_note(model),
        "limits": limits(model, in_job),
    }


def _moved_steps(model: TraceModel) -> int:
    st = model.steps
    if model.step_source not in STEP_SOURCES or st.empty or "cpu_start" not in st:
        return 0
    # (by where each step starts or ends, not its length: v100 ResNet's last three steps are as long on the GPU as
    # on the CPU, but every boundary sits ~60 ms later; 2 of them had been said to move)
    cpu = (st["cpu_end"] - st["cpu_start"]).to_numpy()
    tol = np.maximum(10.0, 0.01 * cpu)
    return int(((abs(st["start"].to_numpy() - st["cpu_start"].to_numpy()) > tol)
                | (abs(st["end"].to_numpy() - st["cpu_end"].to_numpy()) > tol)).sum())


# A window of at most this many steps on worker-fed batches may end before the prefetched batches do.
WORKER_WINDOW_STEPS = 16


def limits(model: TraceModel, in_job: bool = False) -> list[str]:
    """What this trace cannot show, in the report's words (instead of guessing)."""
    out = []
    meta = model.meta
    steps = model.steps
    if model.has_gpu and not model_has_cpu_ops(model):
        out.append(("No CPU events in this trace (GPU activity only)" if model.cpu.empty else
                    "No CPU op events in this trace (only runtime calls)") + ": what the CPU did between launches "
                   "cannot be known, so host-side causes (data loading, preprocessing, Python) are not "
                   "reported; GPU idle the CPU caused beyond the launch latency is shown as unattributed.")
    # (inside one op, or as a start-up call returns: the driver's and libraries' own calls, coverage.py)
    spans = [(a, b, k, enclosing_op(model, a, b) or ("" if after_startup(model, a) else None))
             for a, b, k in missing_event_spans(model)]
    # Where the profiler's own log accounts for the unwritten ids, it dropped them, not a later filter.
    dropped = unwritten_records(model)
    if dropped is not None and dropped >= sum(x[2] for x in spans if x[3] is None) > 0:
        spans = [x if x[3] is not None else (*x[:3], "log") for x in spans]
    for lib in (False, True):
        these = [x for x in spans if (x[3] is not None) == lib]
        if not these:
            continue
        ms, ids, n = sum(b - a for a, b, _k, _o in these) / 1000, sum(x[2] for x in these), len(these)
        where = f"{ms:.1f} ms in {n} stretch{'' if n == 1 else 'es'}"
        if lib:
            ops = list(dict.fromkeys(x[3] for x in these if x[3] and x[3] != "log"))
            at = " or ".join((["inside " + ", ".join(ops)] if ops else [])
                             + (["as a start-up call returned"] if any(x[3] == "" for x in these) else [])
                             + (["between ops"] if any(x[3] == "log" for x in these) else []))
            log = model.meta.get("kineto_log") or {}
            said = (f" The profiler's log says it read {log['records_processed']:,} CUPTI records and skipped "
                    f"{log.get('blocklisted_runtime', 0):,} runtime calls as noise; the file holds "
                    f"{log['records_processed'] - log.get('blocklisted_runtime', 0) - dropped:,}: it dropped "
                    f"about {dropped:,} itself." if any(x[3] == "log" for x in these) else "")
            out.append(f"Calls the profiler does not write: {where} {at}, across which about {ids} correlation ids "
                       "were used with no runtime call recorded: most likely the driver's and libraries' own calls "
                       f"(such as loading kernels on a first run), not a cut in the file.{said} GPU idle there is "
                       "left unattributed, not blamed on host code.")
        else:
            out.append(f"Events are missing from this file: {where} with nothing recorded, across which about {ids} "
                       "runtime calls' correlation ids were used: the trace was filtered or cut after recording. GPU "
                       "idle there is left unattributed, not blamed on host code; analyze the trace as the profiler "
                       "wrote it.")
    lost = gpu_events_cut_off(model)
    if lost:
        out.append(f"The file is cut off and holds no GPU activity, though its header names {lost}: Kineto writes a "
                   "trace's CPU events first, so the GPU's were most likely in the part lost. This is not a CPU-only "
                   "program; record or copy the trace again.")
    drove = gpu_work_without_gpu_events(model)
    if drove:
        out.append(f"The CPU drove GPU work ({', '.join(drove)}) but no GPU activity was recorded: the profiler "
                   "was not asked for CUDA activities (ProfilerActivity.CUDA), or it started without a warm-up "
                   "step and CUPTI missed the kernels. Record with activities=[CPU, CUDA] and a warm-up step "
                   "(torch.profiler.schedule(wait=1, warmup=1, active=N)); this is not a CPU-only program, and "
                   "ops that wait for the GPU (.item(), copies to the host) show here as CPU time.")
    rec = meta.get("traceinsight_record") or {}
    if model.step_source == OPTIMIZER_STEPS:
        out.append("No ProfilerStep markers: the steps are the training loop's optimizer steps, each from the end of "
                   "one Optimizer.step range to the end of the next; what ran before the first one ended (the "
                   "program's start, or the middle of an iteration) is a partial step, left out of the medians "
                   "(a profiler schedule with prof.step() each iteration marks steps exactly).")
    elif model.step_source == USER_RANGES:
        out.append(f"The steps are your ranges whose names match '{meta.get('step_ranges')}' (--step-ranges): the "
                   "outermost of them, each timed from its start to its end; the time between them is in no step.")
    elif model.step_source != "ProfilerStep":
        how = ("traceinsight record ends a step at each optimizer.step() or outermost nn.Module forward call, "
               "and the script made neither; run the loop through one to get steps"
               if isinstance(rec, dict) and rec.get("window") == "whole_run" else
               "call prof.step() once per iteration to get steps")
        own = _own_ranges(model)
        out.append("No ProfilerStep markers: the whole trace is analysed as one window, so per-step numbers "
                   f"are for that window ({how})." + (
                       f" The program marks ranges of its own ({own}): `traceinsight analyze --step-ranges REGEX` "
                       "takes those whose names match REGEX as the steps (a part of a name will do; escape | [ ] ( ) "
                       "with a backslash)." if own else ""))
    if meta.get("warmup_steps"):
        warm = steps[steps["step"].isin(meta["warmup_steps"])]
        compiled = compile_ms_by_step(model, warm)
        why = (f"torch.compile compiled in them: {', '.join(seconds_or_ms(v * 1000) for v in compiled.values())}"
               if compiled else "autotuning, allocator growth, lazy init or graph capture are the usual causes; "
               "the trace does not say which")
        out.append(f"Step(s) {', '.join(map(str, meta['warmup_steps']))} at the start of the window ran far slower "
                   f"than the rest and are taken as warm-up ({why}): left out of the medians.")
    left = [c for c in meta.get("compile_steps") or () if not c["kept"]]
    if left:
        head = (f"torch.compile compiled in step(s) {', '.join(str(c['step']) for c in left)} "
                f"({', '.join(seconds_or_ms(c['compile_ms'] * 1000) for c in left)}), past the warm-up: a new "
                "input shape or another failed guard recompiled a function (TORCH_LOGS=recompiles says which). "
                "Those steps are left out of the medians")
        switch = after_recompile(model)
        if switch:
            # (an expert review: "each new shape costs a compile" was wrong where the new graph is dynamic)
            out.append(head + f". The steps after it run compiled version {', '.join(v.split(': ')[-1] for v in switch['after'])} "
                       f"for every call, where the steps before ran {', '.join(v.split(': ')[-1] for v in switch['before'])}: "
                       "the new graph serves the earlier inputs too (torch.compile's automatic dynamic shapes), so "
                       "further new lengths should not compile again; it is another program, whose steps ran a median "
                       f"{switch['median_after_ms']:.2f} ms against {switch['median_before_ms']:.2f} ms before (the "
                       "medians here mix both).")
        else:
            out.append(head + "; each new shape the run meets costs a compile like it (pad to a few fixed lengths, "
                       "or compile with dynamic=True).")
    start = startup_calls(model)
    if start:
        total = sum(us for _n, us, _k in start)
        named = ", ".join(f"{n} {seconds_or_ms(us)}" + (f" in {k} calls" if k > 1 else "") for n, us, k in start[:4])
        out.append(f"The window includes start-up: runtime calls ran {seconds_or_ms(total)} while the GPU sat idle "
                   f"({named}{', ...' if len(start) > 4 else ''}): GPU context creation, lazy module loading or "
                   "first allocations, paid once per process. This is not a steady state: the fixes are ranked "
                   "with low confidence, or only listed where start-up is most of the steps; profile after a "
                   "warm-up (torch.profiler.schedule(wait=1, warmup=1, active=N), calling prof.step() each "
                   "iteration).")
    slow = slow_dispatch(model)
    if slow:
        # (a review of HTA's DDP trace: aten::view 22.6 us, aten::narrow ~100 us, nothing had said so)
        out.append(f"The host runs PyTorch's ops slowly: ops that only make a view of a tensor (aten::view, "
                   f"as_strided, t, ...) took a median {slow[0]:.1f} us each ({slow[1]} of them), against 0.3-6 us on "
                   "our H100 and H200 recordings, with or without Python stacks. A contended or throttled CPU (more "
                   "threads than cores, other work on the machine, a low clock) makes every CPU-side figure here, "
                   "and the profiler's cost fitted on normal hosts, say more about the machine than the program: "
                   "check the host before changing the program.")
    lazy = lazy_loads_in_full_steps(model)
    if lazy and not start and not model.steps.empty and steady(
            model, model.steps.loc[~model.steps["partial"].to_numpy(dtype=bool), "step"]):
        # (a review read "record after a warm-up" where the shapes change every step: no warm-up ends it)
        out.append(f"CUDA loaded {lazy} kernel{'' if lazy == 1 else 's'} lazily in the steps analysed: the input "
                   "shapes change every step, so cuDNN meets new shapes and new kernels load for as long as the "
                   "program runs (cudnn_benchmark), not only in a warm-up.")
    elif lazy and not start:
        # (a review of a vLLM prefill on a B200: 8 such events, and single addmm calls of 1.2-2.5 ms beside them
        # against a 58 us median, all read as launch overhead)
        out.append(f"The window is not warm: the profiler recorded {lazy} 'Lazy Function Loading' event"
                   f"{'' if lazy == 1 else 's'} in the steps analysed, CUDA loading a kernel's code at its first launch "
                   "in the process. The op that makes such a launch pays one-time costs before it too (a library "
                   "choosing its kernel for a new shape): the GPU idle from that op's start to the launch is counted "
                   "as start-up (cuda_startup) and left out of the savings. Other first-time costs the trace does not "
                   "mark (allocator growth, a first call's Python) stay in the figures, so the savings may still be "
                   "overstated. Profile after a warm-up step (torch.profiler.schedule(wait=1, warmup=1, active=N)).")
    for cut in meta.get("steps_cut_to_data") or ():
        out.append(cut[0].upper() + cut[1:] + ".")
    full = int((~steps["partial"]).sum()) if len(steps) else 0
    if no_complete_step(model):
        out.append("No complete step in the window: every figure here comes from a cut-off or warm-up step, not "
                   "a steady state, and the fixes are ranked with low confidence; record more active steps.")
    elif model.step_source in STEP_SOURCES and full < 3:
        # ("steady" they are not: a review found the one complete step of a trace was its first, cold.)
        first = int(steps.loc[~steps["partial"], "step"].min()) if full else None
        cold = (f" (ProfilerStep#{first}, among the run's first steps, which often run cold: lazy kernel "
                "loading, allocator warm-up)" if first is not None and first <= 1 and model.step_source != USER_RANGES
                else "")
        more = ("record more iterations, or name more of them with --step-ranges" if model.step_source == USER_RANGES
                else "record more active steps")
        out.append(f"Only {full} complete step{'' if full == 1 else 's'}{cold}: medians over so few steps are "
                   f"not a steady state; {more}.")
    rising = rising_steps(model)
    if rising:
        why = (" (the loop waits for DataLoader workers: their prefetched batches running out)"
               if worker_wait_us(model) else "")
        out.append(f"Step times rise through the trace ({rising}){why}: the program had not reached a "
                   "steady state, so the medians may understate the steady step; record a later window or "
                   "more steps.")
    if model.step_source in STEP_SOURCES and full <= WORKER_WINDOW_STEPS and worker_fed(model) and not rising \
            and measured_unprofiled_us(model) is None:
        # Measured (holdout11_loader_two_workers, seven hosts): 5 profiled steps of 3-6 ms, in which the loop
        # hardly waited, for 7-11 ms un-profiled: two workers could not keep up, and the batches they had
        # prefetched before the window hid it.
        out.append(f"The loop takes its batches from DataLoader worker processes, which the trace does not record, "
                   f"and only {full} complete step{' was' if full == 1 else 's were'} profiled: batches the "
                   "workers prefetched before the window (num_workers x prefetch_factor of them) can hide whether "
                   "they keep up. If the program runs slower without the profiler than the estimate here, the "
                   "workers set its pace: time steps "
                   "outside the profiler (traceinsight record does), or profile more steps than that.")
    pre = launched_before(model, full)
    if pre:
        out.append(pre)
    lag = _gpu_lag(model)
    if lag:
        out.append(lag)
    erratic = erratic_steps(model)
    if erratic:
        out.append(f"Step times vary widely ({erratic['span']}) while the GPU's work per step stays the same: the host was "
                   "disturbed in the profiled window (other processes, paging, the profiler's own buffers), so "
                   "the estimates use the quiet steps (within 25% of the fastest: "
                   f"step{'s' if len(erratic['quiet']) > 1 else ''} {', '.join(map(str, erratic['quiet']))}); "
                   "record again, or more steps.")
    compiled = compiled_under_stack(model)
    if compiled:
        out.append(compiled)
    world = (meta.get("distributed") or {}).get("world_size")
    if isinstance(world, int) and world > 1 and not in_job:
        out.append(f"This is rank {model.rank} of the job's {world} ranks: without the other ranks' traces, which "
                   "rank holds the others back in collectives cannot be told (give them all: "
                   "traceinsight analyze DIR).")
    if meta.get("leading_idle_excluded_us"):
        out.append(f"{meta['leading_idle_excluded_us'] / 1000:.2f} ms before the first recorded GPU activity "
                   "is not counted as idle: work launched before the trace began may have been running.")
    return out


def python_in_steps(model: TraceModel) -> np.ndarray:
    """Mask over the CPU events: recorded Python calls inside a step (frames before the first step and after the
    last are not any step's); every call when the trace has no steps."""
    is_py = (model.cpu["kind"] == "python").to_numpy()
    if not len(model.steps):
        return is_py
    inside = np.zeros(len(is_py), bool)
    inside[is_py] = step_at(model.steps, model.cpu["ts"].to_numpy()[is_py], "cpu_start", "cpu_end") >= 0
    return inside


# Python calls a step inside torch.compile regions from which with_stack's cost is the estimate's weak point.
COMPILED_PY_CALLS = 300
# The most the estimate of such a step was over the measured one: +98% (below).
COMPILED_STACK_OVER = 0.98


def compiled_under_stack(model: TraceModel) -> str | None:
    """Compiled code recorded with with_stack and no measured un-profiled step. Inductor's generated code makes
    hundreds to thousands of recorded Python calls a step, whose profiler cost the fitted model gets least right:
    on the matrix's compiled programs the un-profiled step was estimated -38..+98% off under with_stack, -16..+36%
    with default options (compile_default_vs_ro, holdout2_compile_conv, holdout_compile_infer/_train, and the
    twenty-second set's compiled ViT, 2.1-2.9x its un-profiled step)."""
    if measured_unprofiled_us(model) is not None or not len(model.steps) or model.cpu.empty:
        return None
    py = python_in_steps(model)
    if not py.any():
        return None
    per_step = int((py & in_compiled_region(model)).sum() / len(model.steps))
    if per_step < COMPILED_PY_CALLS:
        return None
    return (f"Compiled code recorded with with_stack ({per_step:,} Python calls a step inside torch.compile "
            "regions): the profiler's cost of those calls is the least certain part of the un-profiled estimate "
            "(on our compiled programs it missed the measured step by -38% to +98% with with_stack, -16% to +36% "
            "with default options), so a CPU-bound verdict here may be the profiler's own. Record compiled "
            "programs with default options, or time the step outside the profiler (traceinsight record does).")


def _recording_note(rec: dict) -> str | None:
    if not rec:
        return None
    where = "CPU and CUDA" if rec.get("cuda") else "CPU only (no GPU was available)"
    detail = rec.get("window_detail") or rec.get("window")
    return (f"traceinsight record of {rec.get('script')}: {rec.get('steps_recorded')} step(s) recorded, "
            f"{where}; window: {detail}")


def program_note(model: TraceModel) -> str | None:
    """What the program already does to its launches, in one sentence (None for an eager program or a capture,
    which graph_capture's note describes): a report of a graphed or compiled step that never says so reads as if
    the tool had not seen it (a review of a DDP step replayed from one CUDA graph, 2026-11-30)."""
    p = program_facts(model)
    kind = program_kind(p)
    if kind == "graphed":
        per = p["graph_launches"] / max(1, len(model.steps))
        launches = f"{per:.0f} graph launch{'' if round(per) == 1 else 'es'}"
        return (f"The step already runs from CUDA-graph replays: {launches} per step, "
                f"{p['graph_kernels'] / max(1, p['graph_launches']):.0f} kernels each, {p['graphed_share']:.0%} of "
                "the kernel time whose launch the trace shows; what is left to the CPU is the work between replays.")
    calls, eager = eager_calls(model)
    # (a call into compiled code that found no graph and made none runs eagerly: said, since the advice for a
    # compiled step assumes its graphs run)
    fell = ""
    if eager and kind != "capture":
        top = max((max(v) for v in compiled_versions(model).values()), default=-1)
        why = (f"the frame's versions reach {top}, so torch._dynamo.config.recompile_limit (8 by default) is the "
               "likely stop" if top >= RECOMPILE_LIMIT - 1 else "past its recompile_limit, or a frame Dynamo skips")
        fell = (f" {eager} of its {calls} calls into compiled code ran eagerly: Dynamo's cache lookup found no "
                f"graph for the inputs and made none ({why}; TORCH_LOGS=recompiles says which guard failed).")
    if kind == "compiled":
        trees = (" It runs under mode=\"reduce-overhead\" (its CUDA-graph tree is called), yet no graph replays in "
                 "the window." if p["graph_tree_calls"] else "")
        vary = shapes_vary(model)
        if vary:
            trees += f" It is called with other inputs from step to step: {vary}."
        return (f"The step is compiled: {p['triton_kernels'] / p['kernels']:.0%} of its kernels are Triton's "
                "(torch.compile)." + trees + fell)
    return fell.strip() or None


def profiler_note(model: TraceModel) -> str:
    """What the profiler's own options did to this trace's CPU times, in one sentence."""
    n = max(1, len(model.steps))
    inside = python_in_steps(model)
    py = int(inside.sum())
    # A C built-in's call costs the profiler less than a frame (trace/profiler_cost.BUILTIN_CALL_SHARE).
    builtin = int((inside & model.cpu_match(BUILTIN_CALL)).sum())
    mem = len(model.memory)
    on = []
    if py:
        on.append(f"with_stack ({py / n:.0f} Python calls recorded per step on average, {builtin / n:.0f} of "
                  "them calls of C built-ins)")
    if mem:
        on.append(f"profile_memory ({mem / n:.0f} allocation events per step)")
    if not on:
        return ("No Python stacks or memory events were recorded; the profiler still costs a microsecond or "
                "two per op and several per runtime call, which the estimates take out (the un-profiled step).")
    return ("Profiled with " + " and ".join(on) + ": CPU-side times in this trace are inflated; the "
            "estimates take the profiler's cost out (the un-profiled step).")


GPU_LAG_SHARE = 1.05    # steps timed on the GPU this much longer than their CPU ranges: said


def _gpu_lag(model: TraceModel) -> str | None:
    """When the GPU runs behind the CPU, the steps are timed from where the GPU finished the previous step's
    work (trace/steps.py), so they differ from the ProfilerStep ranges a trace viewer shows: say which."""
    st = model.steps
    st = st[~st["partial"]] if len(st) else st
    if model.step_source != "ProfilerStep" or st.empty:
        return None
    gpu_ms = float(st["dur"].median()) / 1000
    cpu_ms = float((st["cpu_end"] - st["cpu_start"]).median()) / 1000
    if gpu_ms <= GPU_LAG_SHARE * cpu_ms:
        return None
    return (f"The GPU runs behind the CPU: each step here is timed from where the GPU finished the previous "
            f"step's work (median {gpu_ms:.2f} ms), not by its ProfilerStep range on the CPU (median "
            f"{cpu_ms:.2f} ms), which ends before its GPU work does.")


OWN_RANGE_SHARE = 0.001    # of the window: a range of the program's this short is no candidate step


def _own_ranges(model: TraceModel, most: int = 3) -> str:
    """The program's own named ranges (user annotations) that could be its steps, by their time: "'name' x2
    (36.4-79.7 ms)"; "" where there is none (a review found a benchmark's warm-up and measured ranges unused)."""
    cpu = model.cpu
    if cpu.empty:
        return ""
    span = float(max(cpu["end"].max(), model.gpu["end"].max() if len(model.gpu) else 0.0) - cpu["ts"].min())
    dur = cpu["dur"].to_numpy()
    # (not one around the whole run: no step)
    ann = cpu[(cpu["kind"] == "annotation").to_numpy() & ~cpu["is_step"].to_numpy()
              & (dur >= OWN_RANGE_SHARE * span) & (dur < 0.9 * span)]
    if ann.empty:
        return ""
    # Repeated ones first (an iteration repeats), then by their time.
    by = ann.groupby("name")["dur"].agg(["size", "min", "max", "sum"]).sort_values(
        ["size", "sum"], ascending=False).head(most)
    return "; ".join(f"{str(n)[:80]!r} x{int(r['size'])} ({r['min'] / 1000:.1f}" + (
        f"-{r['max'] / 1000:.1f}" if r["max"] > r["min"] * 1.05 else "") + " ms)" for n, r in by.iterrows())
