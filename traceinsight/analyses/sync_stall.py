"""sync_stall: the CPU blocked in a synchronizing call and the GPU queue drained.

Evidence names the op that synced (aten::item, nonzero, index with a boolean mask, unique, ...) and,
when the trace has stacks, the user's file and line; counts per step and the GPU idle each site cost.
"""
from __future__ import annotations

import re

import numpy as np


from ..trace.model import DEVICE_FREE
from ..trace.capture import under_graph_machinery
from ..trace.unasked import not_the_programs
from ..trace.coverage import startup_spans
from ..trace.host import ALLOCATOR_MALLOC
from ..trace.generation import decode_forwards
from ..trace.facts import QUEUE_TOL_US, blocking_calls, in_compiled_region, program_facts, queued_until
from ..trace.steps import STEP_SOURCES
from . import graph_break, split_loop
from .fixes import WARM_AFTER_HOST_US, DropCalls, Unblock
from .sync_advice import (DDP_TIMING_FIX, HARNESS_TIMING_FIX, SMALL_COPY_FIX, TO_DEVICE_FIX, ddp_timing,
                          harness_timing, site_fix, small_read)
from .attribution import per_step_causes
from .reads import read_idle_us, reading_calls, replacement_gpu_us, replacement_launches
from .base import RUNS_AHEAD, Context, Finding, KindSpec, library_frame, op_rows, top_op, top_ops, user_frame

SPEC = KindSpec("sync_stall", "sync-bound", idle_cause=True, color="#8e5cc2", beyond_cost=RUNS_AHEAD)


def analyze(ctx: Context) -> list[Finding]:
    cause = "sync_stall"
    lost = ctx.per_step_median(ctx.per_step[cause])
    cpu = ctx.model.cpu
    gaps = ctx.gaps[(ctx.gaps[cause] > 0) & (ctx.gaps["blocker"] >= 0)]
    # Not the program's syncs: torch.compile's autotuner's while it compiles (recompile's), and under
    # mode="reduce-overhead" those inside compiled code (the CUDA-graph tree's, warming up a new shape: they go
    # once its graphs replay; ro_shapes' plan had put them first).
    theirs = _not_the_programs(ctx, gaps["blocker"].to_numpy())
    if len(gaps) and theirs.all():
        return []
    if theirs.any():     # (their idle is no cost of the program's: the median over full steps of what is left)
        lost = ctx.per_step_median(ctx.per_step[cause] - per_step_causes(ctx.model, gaps[theirs])[cause])
    gaps = gaps[~theirs]
    rows = []
    for blk, grp in gaps.groupby("blocker"):
        rows.append((int(blk), float(grp[cause].sum())))
    # The fix removes the sync from the op, every time it runs: unblock every blocking call made under
    # the ops that stalled the GPU, not only the ones that happened to drain the queue. (A copy whose result
    # host work then read is one of them: attribution gave that idle to the sync, reads.py.)
    site_ops = {top_op(cpu, b) for b, _ in rows}
    blocks = blocking_calls(ctx.model)
    blockers = sorted({int(b) for b in blocks.index if top_op(cpu, int(b)) in site_ops} | {b for b, _ in rows})
    blockers = [b for b, c in zip(blockers, _not_the_programs(ctx, np.asarray(blockers, dtype=np.int64))) if not c]
    if not blockers and lost <= 0:     # (a review: "drains 0 times per step", a healthy MoE's index_put sorts)
        return []
    ev_sites = _sites(ctx, rows, blockers)
    first = ev_sites[0] if ev_sites else {"op": "a synchronizing call", "source": ""}
    # (DDP's own timing syncs: sites the program cannot remove)
    ddp = {top_op(cpu, b) for b in blockers if ddp_timing(cpu, b)}
    harness = {s["op"] for s in ev_sites if harness_timing(s)}
    # (the program's syncs first: a review read the title name the harness's 6 us wait, not transformers' mask check)
    ev_sites = [s for s in ev_sites if s["op"] not in harness] + [s for s in ev_sites if s["op"] in harness]
    first = ev_sites[0] if ev_sites else first
    fixes = []
    for s in ev_sites[:4]:
        f = DDP_TIMING_FIX if s["op"] in ddp else HARNESS_TIMING_FIX if s["op"] in harness else TO_DEVICE_FIX if s.get("copy_direction") == "to the device" else (
            SMALL_COPY_FIX.format(b=s["copy_bytes_per_call"]) if small_read(s) else site_fix(s["op"]))
        if f and f"{s['op']}: {f}" not in fixes:     # (two sites of one op: its advice once)
            fixes.append(f"{s['op']}: {f}")
    mine = not ev_sites or any(s["op"] not in ddp | harness for s in ev_sites)
    # (a harness's timing sync stays where it is: the fix replays without it only the program's own)
    blockers = [b for b in blockers if top_op(cpu, b) not in harness]
    fix = (("Remove the host-device syncs from the hot path. " if mine else "") + "; ".join(fixes) + ".") if fixes else (
        "Remove the host-device syncs from the hot path: avoid .item()/.cpu()/printing CUDA tensors, "
        "data-dependent shapes (nonzero, unique, boolean masks) and explicit synchronize calls.")
    own_sites = [s for s in ev_sites[:4] if s["op"] not in harness]
    lib = [f for f in (library_frame(s.get("source")) for s in own_sites) if f]
    if fixes and lib and len(lib) == len(own_sites):
        # (the forty-fourth set: transformers' generate() syncs in its stopping check and its mask check)
        fix += (" These syncs are in a library's code, not in a line of yours (" + "; ".join(lib[:2])
                + "): what removes them, if anything, is how you call it, not a line" + _calling_advice(lib) + ".")
    where = f" ({first['source']})" if first.get("source") and not first["source"].startswith("(") else ""
    if first.get("waits_for") == "its own copy":
        title = (f"A blocking copy {first.get('copy_direction') or 'to the host'} in {first['op']}{where}, "
                 f"{first['per_step']:g} per step: with "
                 f"nothing else queued, the CPU waits for the copy itself and the GPU idles until it returns")
    else:
        drains = sum(s['stalls_per_step'] for s in (own_sites or ev_sites))
        title = (f"The CPU waits for the GPU in {first['op']}{where}; the GPU queue drains "
                 + ("once per step" if round(drains) == 1 else f"{drains:.0f} times per step"))
    kernels = _data_dependent_kernels(ctx, site_ops)
    ev = {"sync_sites": ev_sites, "idle_ms_per_step": round(lost / 1000, 3)}
    refills = _allocator_refills(ctx, blockers)
    if refills:
        refill_us = float(ctx.model.cpu.loc[list(refills), "dur"].sum()) / max(1, len(ctx.model.steps))
        ev["allocator_refills_per_step"] = round(len(refills) / max(1, len(ctx.model.steps)), 1)
        ev["allocator_refill_ms_per_step"] = round(refill_us / 1000, 3)
        fix += (f" Each step then asks the driver for that memory again ({ev['allocator_refills_per_step']:g} "
                f"cudaMalloc calls, {refill_us / 1000:.2f} ms a step): without the hand-back the allocator "
                "reuses its blocks and those calls go too (counted in the estimate).")
    # The data-dependent ops' kernels go with the sync (torch.where, ignore_index): their GPU time is part
    # of what the fix targets, beyond the idle (a masked loss's stall is short, its index kernels are not).
    kernel_us = 0.0
    if len(kernels):
        g = ctx.gpu_in_full_steps(ctx.model.gpu.loc[kernels])
        kernel_us = float(g["dur"].sum()) / ctx.n_full
        ev["data_dependent_kernels_ms_per_step"] = round(kernel_us / 1000, 3)
        ev["measured_cost_is"] = ("the stalls' GPU idle (median per full step) plus the data-dependent kernels' GPU time "
                                  "(mean per full step): what the fix targets")
        counts = g["name"].str.slice(0, 100).value_counts().head(5) / ctx.n_full
        ev["data_dependent_kernels_per_step"] = counts.round(2).to_dict()
    # The host work that reads a copy these calls made (reads.py) is what keeping the result on the GPU
    # removes with the wait: its idle is part of the sync's cost (a segmentation eval's numpy scoring).
    read_us = read_idle_us(ctx)
    launches = replacement_launches(ctx) if read_us else 0.0
    if launches:
        ev["gpu_kernels_to_replace_the_host_reading_per_copy"] = round(launches, 1)
    if read_us:
        ev["host_reads_the_copy_ms_per_step"] = round(read_us / 1000, 3)
        calls = reading_calls(ctx)
        if calls:
            ev["host_reading_ms_per_step"] = {n[:160]: round(v / 1000, 3) for n, v in calls}
        mostly = f" (mostly {calls[0][0][:120]})" if calls else ""
        if read_us >= 0.5 * lost:
            # The wait is the smaller part: the idle is the host's work on what the copy brought back.
            title = (f"The GPU idles while the host works on a result it copied back: {read_us / 1000:.2f} ms per "
                     f"step{mostly}, after a blocking copy in {first['op']}{where}")
        else:
            title += f"; the host then works on the copied result for {read_us / 1000:.2f} ms per step{mostly}"
        fix += (f" Here the host then works on the copied result for {read_us / 1000:.2f} ms per step: computing "
                "what it needs on the GPU removes that work with the wait (the top of the range); a pinned "
                "copy read a step later only hides the wait (the bottom).")
        if launches:
            fix += (f" That work is torch ops on CPU tensors: on the GPU they launch about {launches:.0f} kernels per "
                    "copy, whose dispatch stays on the CPU (counted in the estimate).")
    # The replacement (torch.where, ignore_index, results kept on the GPU) also drops the data-dependent ops
    # and the host's Python that reads a copied result. The kernels' replacements cost GPU time too: half
    # at the point. A copied result that is only read on the host goes with the advice (what is needed is
    # computed on the GPU): all of its reading at the point, none if it is still read on the host.
    calls, spans = _data_dependent_ops(ctx, kernels)
    plan = (Unblock(tuple(blockers), tuple(int(k) for k in kernels), share=0.5 if len(kernels) else 1.0,
                    bounds=(0.0, 1.0),
                    calls=calls, spans=spans, dispatch_share=_dispatch_share(len(spans), len(calls)),
                    warm=read_us + _staged_us(ctx, blockers) >= WARM_AFTER_HOST_US,
                    replacement_launches=launches, replacement_gpu_us=replacement_gpu_us(ctx, launches)),) \
        if blockers and (len(kernels) or _copies_to_host(ctx, blockers)) else \
        ((Unblock(tuple(blockers)),) if blockers else ())
    plan += (DropCalls(refills),) if refills else ()
    loop = split_loop.turns(ctx, blockers) if plan and mine else None
    if loop:     # (its turns' CPU time is what the fix targets beyond the stalls: attribution gave it to launches)
        said, title, ev = split_loop.advice(loop, f"{first['op']}{where}", ev, kernel_us > 0)
        plan, fix = plan + (loop["fix"],), fix + said
    if not mine:
        plan = ()      # nothing for the program to change: no fix to replay, nothing for a plan to put first
    # A read inside compiled code breaks its graph: kept on the GPU, the regions merge (their wrappers are its cost too).
    more, said, broke = graph_break.merge(ctx, blockers, ev) if plan else ((), "", 0.0)
    plan, fix, apart = plan + more, fix + said, graph_break.graphed_apart(ctx, blockers)
    inner = [s for s in ev_sites if not s["at_step_edge"]]
    needed = "" if len(inner) == len(ev_sites) else _inside(inner)
    # (not a group loop's turns: one batched turn is its fix, not a graph of each)
    repeated = _repeated_between_syncs(ctx, blockers) if (inner and not broke and not loop
                                                         and not ev.get("between_compiled_regions")) else None
    if repeated:
        ev["repeated_between_syncs"] = repeated
        needed = ((needed or title) + "; to graph the whole step, that is: a graph of only the sequence repeated "
                  f"between them ({repeated['launches_each']} launches, {repeated['repeats_per_step']:g} times a "
                  "step, as a generate loop's per-token forward) can leave them in place")
    turns_us = loop["cpu_us_per_step"] if loop else 0.0
    return [Finding(kind=cause, title=title, lost_per_step_us=lost + kernel_us + broke + turns_us,
                    lost_total_us=float(ctx.gaps[cause].sum()) + (kernel_us + broke + turns_us) * ctx.n_full, fix=fix,
                    confidence="high" if ev_sites else "medium", evidence=ev, fixes=plan, beyond_idle_us=kernel_us,
                    # (a generation loop's forwards are graphed with the loop's syncs left in place: launch_overhead)
                    is_prerequisite=(bool(inner) or not ev_sites) and not apart and not decode_forwards(ctx.model),
                    as_prerequisite=needed,
                    label=split_loop.LABEL if loop else "")]     # ("Sync-bound" had read as the waits)


# A step that runs one sequence of launches again and again between its syncs (a generate loop: a forward a
# token, then a read of the token) can graph that sequence alone and keep the syncs between the replays (the
# thirtieth set's review: the whole-step advice read as if the syncs had to go first; the measured fix graphed
# the per-token forward). At least REPEAT_MIN syncs a full step, and REPEAT_SHARE of the stretches between two
# consecutive ones launching the same number of kernels, at least REPEAT_LAUNCHES.
REPEAT_MIN = 4
REPEAT_SHARE = 0.8
REPEAT_LAUNCHES = 10


def _repeated_between_syncs(ctx: Context, blockers: list[int]) -> dict | None:
    cpu = ctx.model.cpu
    # One time per op instance (an .item() makes a copy and a stream sync): its first blocking call.
    rows = np.asarray(blockers, dtype=np.int64)
    ts, thread = cpu["ts"].to_numpy()[rows], cpu["thread"].to_numpy()[rows]
    _, first = np.unique(_op_instances(cpu, rows), return_index=True)
    ts, thread = ts[first], thread[first]
    step = ctx.cpu_step_of(ts)
    launch = ((cpu["kind"] == "runtime") & (cpu["rkind"] == "launch")).to_numpy()
    l_ts, l_thread = cpu["ts"].to_numpy()[launch], cpu["thread"].to_numpy()[launch]
    between: list[int] = []
    per_step: list[int] = []
    for s in ctx.full_steps:
        sel = step == s
        if sel.sum() < REPEAT_MIN:
            return None
        names, n = np.unique(thread[sel], return_counts=True)
        loop = names[n.argmax()]
        t = np.sort(ts[sel & (thread == loop)])
        lt = np.sort(l_ts[l_thread == loop])
        between += np.diff(np.searchsorted(lt, t)).tolist()
        per_step.append(len(t))
    if not between:
        return None
    counts, n = np.unique(between, return_counts=True)
    k = int(counts[n.argmax()])
    if k < REPEAT_LAUNCHES or n.max() < REPEAT_SHARE * len(between):
        return None
    return {"repeats_per_step": float(np.median(per_step)), "launches_each": k}


def _op_instances(cpu, rows: np.ndarray) -> np.ndarray:
    """The op instance each blocking call blocks in; a call outside any op (a harness's cudaEventSynchronize
    under only a step annotation) is its own (-1 - row): counted per call, not as one "no op" for all."""
    ops = op_rows(cpu, rows)
    return np.where(ops >= 0, ops, -1 - rows)


def _allocator_refills(ctx: Context, blockers: list[int]) -> tuple[int, ...]:
    """Where a blocking call is the allocator giving its blocks back (cudaFree), the cudaMalloc calls inside
    steps (cpu rows): the next step fetching them again. empty_cache after each step measured 1.28-1.88x for
    its removal on an H200 (holdout23_empty_cache_step), where the wait alone predicted 1.09-1.15x."""
    cpu = ctx.model.cpu
    names = cpu["name"].to_numpy()
    # (Not start-up calls, paid once: a100_alexnet's 6.5 s first cudaFree had been read as a hand-back, and its
    # four 1.9 s first cudaMallocs as refills a step.)
    once = _in_startup(ctx.model, cpu["ts"].to_numpy())
    if not any(re.match(DEVICE_FREE, str(names[b])) and not once[b] for b in blockers):
        return ()
    m = cpu[(cpu["kind"] == "runtime").to_numpy() & ctx.model.cpu_match(ALLOCATOR_MALLOC) & ~once]
    inside = ctx.cpu_step_of(m["ts"].to_numpy()) >= 0 if len(m) else np.zeros(0, bool)
    return tuple(int(i) for i in m.index[inside])


def _in_startup(model, ts: np.ndarray) -> np.ndarray:
    """Per time: inside a start-up call (trace/coverage.startup_spans)."""
    spans = startup_spans(model)
    out = np.zeros(len(ts), dtype=bool)
    for _n, a, b in spans:
        out |= (ts >= a) & (ts < b)
    return out


def _calling_advice(frames: list[str]) -> str:
    """How to call the library so that its syncs go, where the frames say which library code made them."""
    if any("generation/" in f for f in frames):
        return (" (transformers' generate() with a static cache compiles the model's forward, which drops the mask "
                "check's sync; its check for finished sequences after each token stays)")
    if any("attn_mask_utils" in f for f in frames):
        # (a review of TraceLens' small-BERT trace: `torch.where` advised for transformers' own mask check)
        return (" (transformers checks on each forward whether the attention mask pads anything: pass "
                "attention_mask=None when no sequence is padded, or compile the model, whose trace skips the check)")
    return ""


def _inside(sites: list[dict]) -> str:
    """The syncs inside the step (GPU work launched before and after them), what a CUDA graph needs gone."""
    return "the syncs inside the step: " + "; ".join(
        f"{s['op']}" + (f" ({s['source']})" if s.get("source") and not s["source"].startswith("(") else "")
        + f", {s['per_step']:g} per step" for s in sites[:3])


def _not_the_programs(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Per blocking call (cpu row; -1: none): torch.compile's own, made while it compiled or, in a program whose CUDA-graph
    tree is called, inside compiled code; cuDNN's, timing its search's trials; autograd's anomaly detection's checks."""
    ok, r = np.asarray(rows) >= 0, np.maximum(np.asarray(rows, dtype=np.int64), 0)
    out = not_the_programs(ctx.model, rows)
    if program_facts(ctx.model)["graph_tree_calls"]:
        out |= ok & in_compiled_region(ctx.model)[r]
    # PyTorch's CUDA-graph recording (a graph tree's warm-up, torch.cuda.graph's empty_cache and syncs)
    return out | (ok & under_graph_machinery(ctx.model)[r])


def _sites(ctx: Context, rows: list[tuple[int, float]], blockers: list[int]) -> list[dict]:
    """Per sync site (the outermost op and where user code called it): how often it runs per full step,
    how often it stalled the GPU and the idle that cost, the blocking call that took the time, and what
    the calls waited for: queued GPU work, or their own copy (nothing else was queued, and the copy took
    half the time blocked: a large .cpu(), not an .item()'s round trip)."""
    cpu = ctx.model.cpu
    blocks = blocking_calls(ctx.model).reindex(blockers).dropna(subset=["ts"])
    queued = queued_until(ctx.model, blocks["ts"].to_numpy())
    g = ctx.model.gpu
    own = g[g["launcher"].isin(blocks.index).to_numpy() & (g["kind"] == "memcpy").to_numpy()]
    per_call = own.groupby("launcher")[["dur", "bytes"]].sum()
    copy_us, copy_bytes = per_call["dur"], per_call["bytes"]
    # Which way each call's own copy went: a blocking copy *to the device* (from pageable memory) is
    # pinning's to fix, not keeping a result on the GPU (a100_alexnet: 16 HtoD weight copies in aten::to).
    to_device = own.assign(h2d=(own["copy_dir"] == "HtoD").to_numpy() * own["dur"].to_numpy()) \
        .groupby("launcher")["h2d"].sum()
    step = ctx.cpu_step_of(blocks["ts"].to_numpy())
    full = np.isin(step, ctx.full_steps)
    edge = _at_step_edge(ctx, blocks, step)
    op_row = _op_instances(cpu, blocks.index.to_numpy())
    # A call made inside start-up (cuDNN's first cudaFree creating the context) blocked on start-up, not on
    # queued work: its time is the start-up note's (a review read "cudaFree 6533.7 ms, queued GPU work").
    once = _in_startup(ctx.model, blocks["ts"].to_numpy())
    stalled = dict(rows)
    by_site: dict[tuple, dict] = {}
    for k, (b, r) in enumerate(zip(blocks.index.to_numpy(), blocks.itertuples(index=False))):
        site = (top_op(cpu, int(b)), user_frame(cpu, int(b)))
        d = by_site.setdefault(site, {"idle_us": 0.0, "idle_full": 0.0, "stalls": 0, "ops": set(), "calls": {},
                                      "copy": 0.0, "to_device": 0.0, "any_copy": 0.0, "any_to_device": 0.0,
                                      "blocked": 0.0, "edge": True,
                                      "bytes": []})
        d["edge"] &= bool(edge[k]) or not full[k]
        d["idle_us"] += stalled.get(int(b), 0.0)
        d["idle_full"] += stalled.get(int(b), 0.0) * full[k]     # per step: the full steps' idle only
        d["stalls"] += int(b in stalled and full[k])
        if full[k]:
            d["ops"].add(int(op_row[k]))
        took = 0.0 if once[k] else r.end - r.ts
        d["calls"][r.name] = d["calls"].get(r.name, 0.0) + took * full[k]
        d["blocked"] += took
        # Its own copy's time and direction, when it waited for it; and whatever it waited for (an .item() waits
        # for queued work, then copies to the host: the table had said "n/a").
        own_copy = float(queued[k] <= r.ts + QUEUE_TOL_US)
        for key, v in (("copy", copy_us.get(int(b), 0.0)), ("to_device", to_device.get(int(b), 0.0))):
            d[key] += own_copy * float(v)
            d["any_" + key] += float(v)
        if int(b) in copy_bytes.index:
            d["bytes"].append(float(copy_bytes[int(b)]))
    no_source = ("(no user Python frame above it: autograd's backward thread, or a library's)"
                 if (cpu["kind"] == "python").any() else "(record with with_stack=True to get the source line)")
    out = []
    for (op, src), d in sorted(by_site.items(), key=lambda kv: -kv[1]["idle_us"])[:8]:
        if not d["idle_us"]:
            continue
        call = max(d["calls"], key=d["calls"].get)
        out.append({"op": op, "source": src or no_source,
                    "call": call, "blocked_ms_per_step": round(d["calls"][call] / ctx.n_full / 1000, 3),
                    "waits_for": "its own copy" if d["copy"] >= 0.5 * d["blocked"] else "queued GPU work",
                    "copy_direction": _direction(d, "") or _direction(d, "any_"),
                    "copy_bytes_per_call": int(np.median(d["bytes"])) if d["bytes"] else None,
                    "per_step": round(len(d["ops"]) / ctx.n_full, 2),
                    "stalls_per_step": round(d["stalls"] / ctx.n_full, 2),
                    "idle_ms_per_step": round(d["idle_full"] / ctx.n_full / 1000, 3),
                    "at_step_edge": d["edge"] and bool(d["ops"])})
    return out


def _direction(d: dict, which: str) -> str | None:
    c, h = d[which + "copy"], d[which + "to_device"]
    return None if not c else "to the device" if h > 0.5 * c else "to the host"


def _at_step_edge(ctx: Context, blocks, step: np.ndarray) -> np.ndarray:
    """Per blocking call: whether its step launched no kernel before it, or none after it (a harness's
    torch.cuda.synchronize() before the step, a loss.item() logged after the optimizer): a CUDA graph of
    the work between captures fine, so such a sync is not what a graph needs fixed first. Copies do not
    count (the call's own copy for .item(), the next batch's prefetch), nor kernels of the call's own op;
    without step markers no step has known edges."""
    m = ctx.model
    out = np.zeros(len(blocks), dtype=bool)
    if m.step_source not in STEP_SOURCES:
        return out
    g = m.gpu
    rows = np.unique(g["launcher"].to_numpy()[(g["kind"] == "kernel").to_numpy() & (g["launcher"] >= 0).to_numpy()])
    cts, cend = m.cpu["ts"].to_numpy(), m.cpu["end"].to_numpy()
    order = np.argsort(cts[rows], kind="stable")
    t, op = cts[rows][order], op_rows(m.cpu, rows[order])
    st = m.steps.set_index("step")
    b_rows = blocks.index.to_numpy()
    for k, (s, b, mine) in enumerate(zip(step, b_rows, op_rows(m.cpu, b_rows))):
        if s < 0 or s not in st.index:
            continue
        a, z = np.searchsorted(t, [st.at[s, "cpu_start"], st.at[s, "cpu_end"]], "left")
        other = (op[a:z] != mine) | (mine < 0)
        before = bool(np.any(other & (t[a:z] < cts[b])))
        after = bool(np.any(other & (t[a:z] > cend[b])))
        out[k] = not before or not after
    return out




# Kernels of data-dependent ops, and the backward of boolean-mask indexing (index_put with accumulate).
# (not "indexed": cuDNN's sm80_xmma_fprop_implicit_gemm_indexed convolutions had counted 1.8 ms in a100_alexnet)
DATA_DEPENDENT = r"nonzero|index(?!ed)|scatter|masked|unique|cub::|DeviceSelect|DeviceScan|compact"
MASK_BACKWARD = r"IndexBackward|MaskedSelectBackward|NonzeroBackward|IndexPutBackward"


def _data_dependent_kernels(ctx: Context, site_ops: set) -> list[int]:
    """GPU rows of the data-dependent kernels that the synced ops (and their backward) launch: what
    torch.where / a float mask / ignore_index would also remove."""
    import re
    m = ctx.model
    g = m.gpu[(m.gpu["launcher"] >= 0).to_numpy() & m.gpu_match(DATA_DEPENDENT, re.I)]
    if g.empty:
        return []
    op = top_ops(m.cpu, g["launcher"].to_numpy())
    back = re.compile(MASK_BACKWARD)
    keep = np.array([o in site_ops or bool(back.search(o)) for o in op], dtype=bool)
    return [int(r) for r in g.index.to_numpy()[keep]]


def _copies_to_host(ctx: Context, blockers: list[int]) -> bool:
    """Whether some blocking call copies to the host itself (a .cpu() / .numpy() of a result)."""
    g = ctx.model.gpu
    own = g[g["launcher"].isin(blockers).to_numpy() & (g["copy_dir"] == "DtoH").to_numpy()]
    return bool(len(own))


def _staged_us(ctx: Context, blockers: list[int]) -> float:
    """CPU time per step (median over full steps) the blocking calls' copies into pageable host memory
    cost: the CPU stages them out of the driver's pinned buffers (pageable_memcpy.py), work that goes with
    the copy when the result stays on the GPU, and that evicts the rest of the step from the caches as the
    host's reading of it does."""
    g = ctx.model.gpu
    own = g[g["launcher"].isin(blockers).to_numpy() & (g["copy_dir"] == "DtoH").to_numpy()
            & g["pageable"].to_numpy()]
    if own.empty:
        return 0.0
    return ctx.per_step_median(own.groupby(ctx.step_of(own["ts"].to_numpy()))["dur"].sum())


def _data_dependent_ops(ctx: Context, kernels: list[int]) -> tuple[tuple[int, ...], tuple]:
    """The outermost ops that launched the data-dependent kernels: the runtime calls (cpu rows) made under
    them (the copies, syncs and launches that go with them) and their spans (thread, start, end)."""
    m = ctx.model
    cpu = m.cpu
    launchers = m.gpu.loc[kernels, "launcher"].to_numpy()
    tops = sorted(set(cpu["top_op"].to_numpy()[launchers[launchers >= 0]].tolist()) - {-1})
    if not tops:
        return (), ()
    rt = (cpu["kind"] == "runtime").to_numpy() & np.isin(cpu["top_op"].to_numpy(), tops)
    t = cpu.loc[tops]
    spans = tuple(zip(t["thread"].astype(str), t["ts"].astype(float), t["end"].astype(float)))
    return tuple(int(r) for r in np.flatnonzero(rt)), spans


# What replaces one data-dependent op (torch.where, a float mask, ignore_index): a fixed-size op, about
# this many runtime calls with its backward, where a boolean index makes tens (nonzero, its size copy,
# index, index_put with accumulate's sort and scan).
REPLACEMENT_CALLS = 2


def _dispatch_share(n_ops: int, n_calls: int) -> float:
    """The share of the data-dependent ops' CPU time their replacement removes."""
    return 1.0 - min(0.5, REPLACEMENT_CALLS * n_ops / n_calls) if n_calls else 0.5
