"""The verdict: one sentence that says what a trace shows and what to change first, read from its Analysis
(the top fix and what it saves, the idle the picture shows, what the trace cannot show). `a` is a
report.analyze.Analysis, which this module does not import (the pipeline imports it)."""
from __future__ import annotations

from ..analyses import CAUSES, spec
from ..analyses.dependency_wait import UNSEEN
from ..estimate.rank import GPU_WORK_AWAY, MEASURED_NOTE, MIN_SHARE
from ..trace.coverage import gpu_events_cut_off, gpu_work_without_gpu_events, seconds_or_ms, startup_calls
from ..trace.steps import STEP_SOURCES
from ..trace.facts import WORKER_WAIT, no_complete_step
from .breakdown import breakdown, unprofiled_measured, unprofiled_ms_read
from .cpu_time import cpu_time
from .facts import COMPILED_STACK_OVER, compiled_under_stack


def _sentence(label: str) -> str:
    """A label opening a sentence: its first letter up, the rest as written (str.capitalize() would make
    "CUDA-graph" "cuda-graph")."""
    return label[:1].upper() + label[1:]


CLOSE_SHARE = 0.85   # a second fix's estimate at least this share of the top one's: about tied
# At most this share of the (un-profiled) step idle, and a top fix saving no more, an idle cause is not what
# bounds the step: the GPU is.
NEARLY_BUSY_IDLE = 0.10


def verdict(a) -> str:
    m = a.model
    head = next((f for f in a.findings if spec(f.kind).headline), None)
    if head is not None:
        return f"{_sentence(spec(head.kind).label)}: {head.title}"
    if not m.has_gpu:
        lost = gpu_events_cut_off(m)
        if lost:
            return (f"No GPU activity in the part of the file that could be read: the file is cut off and its header "
                    f"names {lost}, so its GPU events were most likely in the lost part. GPU idle cannot be told "
                    f"from it; what it shows is the CPU side ({_steps(len(m.steps))}, median "
                    f"{a.median_step_us / 1000:.2f} ms). Record or copy the trace again.")
        drove = gpu_work_without_gpu_events(m)
        if drove:
            return ("No GPU activity was recorded, though the CPU drove GPU work (" + ", ".join(drove) + "): "
                    "GPU idle cannot be told from this trace; what it shows is the CPU side "
                    f"({_steps(len(m.steps))}, median {a.median_step_us / 1000:.2f} ms; see the limits).")
        return ("CPU-only trace: no GPU activity was recorded, so there is no GPU idle time to explain "
                f"({_steps(len(m.steps))}, median {a.median_step_us / 1000:.2f} ms)." + _loading(a))
    b = breakdown(a)
    idle_pct = 100 * b["idle_share"] if b["step"] else 0.0     # (the steps' median share: breakdown)
    real = a.fixes
    if a.healthy:
        return (f"Healthy: the GPU is busy {100 - idle_pct:.0f}% of each step (median of the steps' shares; "
                f"median step {b['step'] / 1000:.2f} ms{_unprofiled_idle(a, b, busy=True)}) and no fix we can see "
                f"would save more than {MIN_SHARE:.0%} of it{_above_bar_minor(a)}.")
    if not real:
        causes = sorted(((b[c], c) for c in CAUSES if b[c] > 0), reverse=True)[:3]
        said = ", ".join(f"{c} {v / 1000:.2f} ms" for v, c in causes)
        return (f"The GPU is idle {_share(idle_pct)} of each step (median {b['step'] / 1000:.2f} ms"
                f"{_unprofiled_idle(a, b)}), but no fix we can model would save more than {MIN_SHARE:.0%} of a step"
                f"{_above_bar_minor(a)}; idle by cause: {said or 'none'}.")
    top = real[0]
    which = "un-profiled" if a.whatif.get("unprofiled_step_ms") else "profiled"
    label = top.label or spec(top.kind).label
    small = a.reference_step_us and top.estimated_savings_us <= NEARLY_BUSY_IDLE * a.reference_step_us
    # (and an optimizer's: GPT-2's per-tensor AdamW, 95% busy without the profiler, read "Optimizer-bound" for 8%)
    if label.endswith("-bound") and small and _unprofiled_idle_share(a, b) <= NEARLY_BUSY_IDLE:
        # (a held-out ResNet-50, GPU-busy 95% without the profiler, opened "Launch-bound" for a 3% fix; not where
        # the fix shortens GPU work itself: pageable copies are busy time, and pinning them saved 43%)
        label = f"mostly GPU-bound, a little {label}"
    elif label.endswith("-bound") and compiled_under_stack(m) and _may_be_busy(a):
        # (the forty-fifth set's compiled DiT, 6% idle measured without the profiler, opened "Launch-bound: the GPU
        # is idle 62%" on its with_stack trace, whose un-profiled step the limits already call least certain)
        label = f"{label} as profiled, perhaps not without the profiler"
    out = (f"{_sentence(label)}: the GPU is idle {_share(idle_pct)} of "
           f"each step (median step {b['step'] / 1000:.2f} ms{_unprofiled_idle(a, b)}); the top fix ({top.kind}) ")
    # A fix that needs others first (a CUDA graph cannot capture a sync) cannot be applied alone: what it
    # would save alone is not promised; the plan says what it gives with those before it.
    plan = a.whatif.get("plan") or []
    at = next((i for i, r in enumerate(plan) if r["kind"] == top.kind), None)
    pre = [r["kind"] for r in plan[:at or 0] if top.kind in (r.get("prerequisite_for") or ())]
    if pre:
        both, own = plan[at]["cumulative_saves_ms"] * 1000, plan[at]["saves_ms"] * 1000
        share = "nearly all" if own >= 0.95 * both else f"about {own / 1000:.2f} ms"
        # (Syncs between repeats of one sequence, a generate loop's per-token forward, block a graph of the whole
        # step, not one of that sequence: sync_stall's repeated_between_syncs.)
        whole = any(g.kind in pre and g.evidence.get("repeated_between_syncs")
                    for g in a.findings + a.minor_findings)
        out += (f"needs {', '.join(pre)} fixed first" + (" to be captured whole" if whole else "")
                + " (see the plan" + ("; a graph of the sequence repeated between the syncs need not)" if whole else ")")
                + ": "
                f"{'the two' if len(pre) == 1 else 'together they'} save about {both / 1000:.2f} ms per step "
                f"({_pct(both, a)}% of the {which} step), {top.kind} {share} of it.")
    elif top.estimate_note.startswith(MEASURED_NOTE):
        # (its effect could not be replayed: the measured cost is the most it can give, not what it will)
        # (a wait on something no GPU work in the trace shows: SGLang's decode, 463 ms beside 9.8 ms of GPU work)
        bound = ("an upper bound, see how it was estimated" if not top.evidence.get(UNSEEN) else
                 "an upper bound: the GPU waited on something the trace does not show, so what would recover it "
                 f"cannot be told from here; the GPU's own work is {b['gpu_busy'] / 1000:.2f} ms per step")
        out += (f"would save at most {top.estimated_savings_us / 1000:.2f} ms per step "
                f"({_pct(top.estimated_savings_us, a)}% of the {which} step; {bound}).")
    elif compiled_under_stack(m) and a.reference_step_us and top.estimated_savings_us < a.reference_step_us:
        # No saving from an un-profiled step this trace cannot pin down: the step the fix leaves, and the GPU work that
        # bounds it (a review: GPT-2 compiled, with stacks, "would save about 17.43 ms" of a step measured at 8.49 ms).
        left = (a.reference_step_us - top.estimated_savings_us) / 1000
        out += (f"would leave a step of about {left:.3g} ms ({b['gpu_busy'] / 1000:.2f} ms of it GPU work); what that "
                "saves is not given, as the un-profiled step it would be taken from is this trace's least certain "
                "figure (see the limits).")
    else:
        # More than the whole idle only by taking GPU work away: said (a review read GPT-2's fused AdamW, 3.02 ms,
        # beside "about 5% idle" and found no word of the 2.2 ms of kernels it removes).
        # (Only where the label names a bound, which reads as idle: "slowed by FP32 matmuls" says it already.)
        past = (label.endswith("-bound") and a.reference_step_us
                and top.estimated_savings_us > 1.05 * _unprofiled_idle_share(a, b)
                * a.reference_step_us and GPU_WORK_AWAY in top.estimate_note)
        out += (f"would save about {top.estimated_savings_us / 1000:.2f} ms per step "
                f"({_pct(top.estimated_savings_us, a)}% of the {which} step"
                f"{_speedup(top.estimated_savings_us, a, top.likely_range_us)})"
                + ("; more than the GPU's idle, as the fix also takes GPU work away (see its estimate)" if past else "")
                + ".")
    # Two fixes whose estimates are this close are ranked within the estimates' own error (the matrix's
    # median absolute error is about 10%): say so, rather than let the order look measured.
    second = next((f for f in real[1:] if f.kind != top.kind), None)
    # (not one the plan puts after the top fix, which it needs first: its saving alone cannot be had, a review read
    # "launch_overhead may save as much or more" beside a plan that graphs the step only once its syncs are gone)
    after_top = second is not None and bool(second.after_prerequisites) and top.kind in second.after_prerequisites[0]
    close = (not pre and second is not None and not after_top
             and second.estimated_savings_us >= CLOSE_SHARE * top.estimated_savings_us)
    if close:
        alone = f"about {second.estimated_savings_us / 1000:.2f} ms per step on its own"
        out += (f" {second.kind} comes close ({alone}): the two are within the estimates' error, so measure both."
                if second.estimated_savings_us < top.estimated_savings_us else
                f" {second.kind} may save as much or more ({alone}) but with {second.confidence} confidence against "
                f"{top.confidence}, so it ranks second: measure both.")
    start = startup_calls(m)
    if start:
        # The numbers are the window's as recorded: say first that it is not a steady state.
        total = seconds_or_ms(sum(us for _n, us, _k in start))
        out = (f"Not a steady state: the window includes CUDA start-up ({total} of runtime calls while the GPU "
               "idled; see the limits). As recorded: " + out)
    elif no_complete_step(m):
        # (a review: a 1.3x speed-up promised from one 1.8 us kernel in a cut-off first call)
        out = "Not a steady state: the window holds no complete step (see the limits). As recorded: " + out
    elif m.step_source in STEP_SOURCES and len(a.full_steps) == 1:
        # (a review: "about 17.3x faster" from one aten::empty stall in the only step, which may not repeat)
        # (not "not a steady state": HTA's is ProfilerStep#100, far from the first; one step just cannot show it)
        out = "Too few steps to judge: the window holds one complete step (see the limits). As recorded: " + out
    elif lazy := a.whatif.get("lazy_loads"):
        # (a review: a B200 vLLM prefill promised 2.3x from a window loading its kernels lazily)
        # (the expert check asked how large: the B200's 8 loads sat in 8.7 ms of idle per step left out as start-up)
        held = (f", and {b['cuda_startup'] / 1000:.2f} ms of idle per step (profiled) around those first launches is counted as "
                "start-up, outside the savings" if b.get("cuda_startup", 0.0) >= 10.0 else "")
        out = (f"The window is not warm: CUDA loaded {lazy} kernel{'s' if lazy > 1 else ''} lazily in it{held} (see "
               "the limits). As recorded: " + out)
    # The verdict must agree with the picture: say so when the largest idle cause is another one.
    big_v, big_c = max(((b[c], c) for c in CAUSES), default=(0.0, None))
    if big_c and big_c != top.kind and big_v > max(top.lost_per_step_us, top.estimated_savings_us) and not (
            close and big_c == second.kind):
        out += f" The largest idle cause is {big_c} ({big_v / 1000:.2f} ms per step, profiled)"
        # Its idle is not what fixing it saves: say what the plan gives it, after the fixes before it.
        row = next((r for r in (a.whatif.get("plan") or []) if r["kind"] == big_c), None)
        if row is not None:
            out += f"; fixing it saves about {row['saves_ms']:.2f} ms per step after the fixes before it in the plan"
        else:
            # Not in the plan: below the bar, most often because the profiler made that idle (a review read
            # 3.02 ms of launch overhead beside its fix's "about 0.0 ms").
            f = next((f for f in a.minor_findings if f.kind == big_c), None)
            if f is not None and f.estimated_savings_us == f.estimated_savings_us:
                v = f.estimated_savings_us
                out += ("; fixing it would save " + (f"only about {v / 1000:.2f} ms per step" if v >= 10 else
                                                    "next to nothing")
                        + ((", as most of that idle is the profiler's" if unprofiled_measured(a) else
                            ", as by the un-profiled estimate (see its likely band) most of that idle is the "
                            "profiler's")
                           if a.whatif.get("unprofiled_step_ms") and f.estimated_savings_us < 0.5 * big_v else ""))
        out += "."
    return out


# From this share of a CPU-only step, fetching batches is what the verdict names.
LOADING_SHARE = 50.0


def _loading(a) -> str:
    """' The loop spends 89% of each step fetching batches ...' where the DataLoader's __next__ holds most of
    a CPU-only step: the one cause such a trace shows."""
    c = cpu_time(a)
    if not c or (c.get("loading_pct") or 0) < LOADING_SHARE:
        return ""
    workers = a.model.cpu_match(WORKER_WAIT).any()
    return (f" The loop spends {c['loading_pct']:.0f}% of each step fetching batches from its DataLoader ("
            + ("waiting for its worker processes: more workers, or less work per sample)" if workers else
               "num_workers=0: it loads every batch itself; DataLoader(num_workers=N) loads them in N worker "
               "processes while the loop runs)") + ".")


def _speedup(us: float, a, likely: tuple[float, float] | None = None) -> str:
    """": a step of about 1.85 ms, about 2.3x faster": the step the estimate leaves, in time and as a speed-up
    (none for a small one). The time first: where the fix leaves the step to its GPU work, it holds even when the
    un-profiled step it is taken from does not (held-out set 33: 1.85 ms predicted, 1.86 measured, from an
    un-profiled step read 37% short, so 6.7x against 10.5x)."""
    u = a.reference_step_us
    if not u or us >= u or us < 0.1 * u:
        return ""
    out = f": a step of about {(u - us) / 1000:.3g} ms, about {u / (u - us):.1f}x faster"
    if likely and likely[1] < u:
        # The multiple over the finding's likely band too, where that is wide (a review read a cold B200 window's
        # "about 2.3x" as a measured figure): the band held 8 in 10 of our measured fixes of that kind and size.
        lo, hi = u / (u - likely[0]), u / (u - likely[1])
        if hi >= LIKELY_SPREAD * lo:
            out += f", likely {lo:.1f}-{hi:.1f}x"
    return out


# A likely band of multiples this wide (its top over its bottom) is said beside the point.
LIKELY_SPREAD = 1.1


def _share(pct: float) -> str:
    """'12%', or 'under 1%' for a share that rounds to 0 but is not (a review: 'idle 0%' beside 0.3%)."""
    return "under 1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


def _steps(n: int) -> str:
    return f"{n} step" + ("" if n == 1 else "s")


def _above_bar_minor(a) -> str:
    """', except fusion_candidates (about 5%, under its kind's 15% bar …)' where a minor finding saves more
    than the general 3% bar but less than its kind's own (a review read "no fix would save more than 3%"
    beside a minor fusion saving 4.8%)."""
    out = []
    for f in a.minor_findings:
        v = f.estimated_savings_us if f.estimated_savings_us == f.estimated_savings_us else f.lost_per_step_us
        bar = spec(f.kind).min_share
        if bar and a.reference_step_us and MIN_SHARE * a.reference_step_us < v < bar * a.reference_step_us:
            out.append(f"{f.kind} (about {100 * v / a.reference_step_us:.1f}%, under its kind's {100 * bar:.0f}% bar "
                       "for a ranked fix)")
    if not out:
        return ""
    return ", except " + (out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1])


def _may_be_busy(a) -> bool:
    """The un-profiled step, were its estimate as far over as compiled steps' with stacks have been
    (COMPILED_STACK_OVER), would keep the GPU nearly busy (idle at most NEARLY_BUSY_IDLE). (The estimate's band is no
    test: truly launch-bound compiled steps' reach their GPU work too.)"""
    u, gpu = a.whatif.get("unprofiled_step_ms"), a.whatif.get("gpu_busy_ms")
    return bool(u and gpu and u / (1 + COMPILED_STACK_OVER) * (1 - NEARLY_BUSY_IDLE) <= gpu)


def _pct(us: float, a) -> str:
    return f"{100 * us / a.reference_step_us:.0f}" if a.reference_step_us else "0"


def _unprofiled_idle_share(a, b: dict) -> float:
    """The GPU's idle share of the un-profiled step where the report has one (measured or estimated), else of
    the profiled step."""
    gpu, u = a.whatif.get("gpu_busy_ms"), a.whatif.get("unprofiled_step_ms")
    if u and gpu is not None:
        return max(0.0, u - gpu) / u
    return b["idle_share"] if b["step"] else 1.0


def _unprofiled_idle(a, b: dict, busy: bool = False) -> str:
    """", profiled; about N% without the profiler (estimated)" when the profiler made a real share of the
    idle: a step the profiler slowed by a tenth or more. `busy`: the GPU's busy share, from the figure the
    healthy verdict read, whenever the profiler slowed the step at all."""
    gpu = a.whatif.get("gpu_busy_ms")
    u = unprofiled_ms_read(a) if busy else a.whatif.get("unprofiled_step_ms")
    # (nor from an un-profiled step the limits call least certain: GPT-2's "about 94%" was 84%, measured)
    if not u or gpu is None or not b["step"] or (not busy and u * 1000 > 0.9 * b["step"]) or compiled_under_stack(a.model):
        return ", profiled" if a.model.has_gpu else ""    # (every figure says what it is)
    idle = max(0.0, u - gpu) / u
    if busy:
        if unprofiled_measured(a):
            return f", profiled; {100 * (1 - idle):.0f}% without the profiler, measured"
        return f", profiled; at least {100 * (1 - idle):.0f}% without the profiler, by the top of the estimate's band"
    return f", profiled; about {100 * idle:.0f}% without the profiler, {'measured' if unprofiled_measured(a) else 'an estimate'}"
