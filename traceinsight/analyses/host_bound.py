"""host_bound: the GPU idles while the CPU runs work that launches nothing (data loading,
preprocessing, logging). Evidence: the ops (or Python) the CPU was in during those gaps.
"""
from __future__ import annotations

import re

import numpy as np

from .fixes import ADVISED_WORKERS, LOADER_MS_PER_MB_RANGE, WARM_AFTER_HOST_US, RemoveHostWork
from ..trace.compiles import COMPILING
from ..trace.coverage import driver_allocates
from ..trace.facts import DDP_FORWARD, WORKER_WAIT, program_facts, program_kind
from ..trace.dispatch_pace import METADATA_OPS, metadata_op_us
from ..trace.generation import decode_forwards, replayed_loop
from ..trace.host import ALLOCATOR_MALLOC
from .base import RUNS_AHEAD, Context, Finding, KindSpec
from .host_gaps import ENDS, bare_stretch, gil_holders, python_calls, threads_with_ops
from .host_gaps import pieces as pieces_of
from .loading import (HIDDEN_IDLE_SHARE, PLAN_SAYS_WORKERS, WORKERS_ADVICE, WORKERS_UNNAMED, fewer_workers,
                      hidden_loader, loader_batch_mb, unprofiled_loading)

COMPILING_RE = re.compile(COMPILING)
SPEC = KindSpec("host_bound", "host-bound", idle_cause=True, color="#c9443c", estimate="idle_floor",
                beyond_cost=RUNS_AHEAD)


def analyze(ctx: Context) -> list[Finding]:
    # (Host work that reads a result just copied to the host is not here: attribution gave it to the sync,
    # whose fix removes it with the copy, reads.py.)
    gaps = ctx.gaps[ctx.gaps["host_bound"] > 0]
    # Named from the complete steps, the ones the median reads: BERT's 16.6 ms pause in a partial first step had
    # been named as most of the idle of the steps after it (1.4-2.0 ms each, mostly AdamW's step).
    in_full = gaps[gaps["step"].isin(ctx.full_steps)] if "step" in gaps else gaps
    scope = "all steps"
    if len(in_full):
        scope = "all steps" if len(in_full) == len(gaps) else "the complete steps"
        gaps = in_full
    lost = median = ctx.per_step_median(ctx.per_step["host_bound"])
    if lost < HIDDEN_IDLE_SHARE * ctx.median_step_us:
        hidden = hidden_loader(ctx, lost, SPEC.kind)
        if hidden:
            return hidden
    # Where a few steps hold most of the idle (a stall: a pause inside one op), what repeats is named from the
    # other steps, the ones the median (the estimate) reads (a review: BERT's one 20.2 ms pause inside dropout had
    # been named over AdamW's _init_group, 1.4-2.3 ms in every step).
    named, stall = _repeating(ctx, gaps, lost)
    busy_ops: dict[str, float] = {}
    # Each gap's ops and calls count outside its start-up calls and graph recording (their own causes), at the
    # share of the rest that is host_bound's: a100_alexnet's aten::empty_strided had been named for the 29.9 s of
    # context creation inside it, xDiT's compile_fx run() with 29.4 ms where 2.2 ms of its gap was host-bound.
    # (the 50 largest gaps are what the ops, the Python calls and the bare stretches are read from)
    longest = named.nlargest(50, "host_bound")
    pieces = {r.Index: pieces_of(ctx, r) for r in longest.itertuples()}
    for row in longest.itertuples():
        parts, w = pieces[row.Index]
        for a, b in parts:
            for name, us in ctx.host.host_ops_in(row.thread, a, b):
                busy_ops[name] = busy_ops.get(name, 0.0) + us * w
    # torch.compile's compiler is recompile's, whatever gap it overlaps (a compile step's gap holds both).
    busy_ops = {n: v for n, v in busy_ops.items() if not COMPILING_RE.search(n)}
    # With stacks, the gaps' time split by the call the user's code made (numpy's argmax, the Dataset's
    # __getitem__, the profiler's own step) says more than the ops that happened to run; but not more than
    # the DataLoader's range, which a frame around it (the training step) encloses.
    frames = python_calls(ctx, longest, pieces)
    in_loader = sum(v for n, v in busy_ops.items() if _is_loader(n))
    by_call = bool(frames) and in_loader < 0.25 * frames[0][1]
    if by_call:
        busy_ops = dict(frames)
    # The DataLoader's own range is the cause the user acts on; ops inside it (collate's stack, cat)
    # are how it spends the time, so it leads even when a few slow batches make one of them longer.
    top = sorted(busy_ops.items(), key=lambda kv: (not _is_loader(kv[0]), -kv[1]))[:6]
    # Ops that cover a small part of the idle are not its cause: the rest ran outside every recorded op
    # (Python calling numpy, no torch op). Say so, and where in the step it ran.
    bare = bare_stretch(ctx, longest, pieces)
    if bare is not None and bare.total > 2 * sum(v for _, v in top):
        top = []
    loader = any(_is_loader(n) for n, _ in top)
    # Python on another thread of the process (a prefetch thread, a thread pool) holds the GIL while the loop's
    # thread, back from each op, waits for it: the loop's own code is not what to change, and a thread is not
    # where Python work can run beside it. (With stacks only: without them no thread's Python is recorded.)
    holders = [] if loader else gil_holders(ctx, longest, pieces)
    gil_us = sum(h.us for h in holders)
    gil_share = gil_us / max(float(longest["host_bound"].sum()), 1e-9)
    gil = gil_us > 0 and gil_share >= GIL_SHARE
    if gil:
        top = []
    # (the call the user's code made that the idle CPU time ran inside: code in it that launched nothing,
    # not the call as a whole, which may launch all the step's kernels)
    what = f"most of it inside {_programs(top)[0][0]}" if top else "Python code outside any profiled op"
    where = f" between {bare.before[:70]} and {bare.after[:70]}" if not top and bare is not None else ""
    # Bare time between two backward ops is on the autograd engine's thread, not in the user's Python:
    # neither with_stack nor a DataLoader says more about it. The trace cannot tell the engine's own
    # work from a stall of the host (a page fault, another process), so it is named by where it is.
    engine = bool(where) and all(_BACKWARD.search(n) for n in (bare.before, bare.after) if n not in ENDS)
    # Many short stretches between the ops that make a tensor from Python data (torch.tensor per item):
    # a Python loop building the batch item by item.
    per_item = bool(where) and not engine and bare.n >= PER_ITEM_MIN * ctx.n_full and \
        all(_MAKES_TENSOR.search(n) for n in (bare.before, bare.after))
    # Between two detaches the loop walks tensors that exist (state_dict() detaches every parameter and buffer
    # on each call; an expert review read torch.tensor advice on a weight EMA's state_dict() as wrong).
    views = per_item and all(_VIEW.search(n) for n in (bare.before, bare.after))
    if gil:
        what = f"Python on another thread of this process, {_names([holders[0].calls[0][0]])}, holding the GIL"
    elif not top:
        what = f"time on the backward pass's thread that no op covers{where}" if engine else \
            (f"a Python loop over existing tensors (a detach each, as state_dict() makes): {bare.n / ctx.n_full:.0f} "
             f"stretches per step {where.strip()}") if views else \
            (f"a Python loop that builds tensors item by item: {bare.n / ctx.n_full:.0f} stretches per step "
             f"{where.strip()}") if per_item else \
            f"Python outside any recorded op{(', the most' + where) if where else ''}"
    # Idle that a few steps hold is a stall in those steps, not work every step does.
    per_step = ctx.per_step["host_bound"].reindex(ctx.full_steps).fillna(0.0).to_numpy()
    total = float(per_step.sum())
    few = max(1, 2 * len(per_step) // 5)
    held = float(np.sort(per_step)[-few:].sum())
    stalls = len(per_step) >= 4 and total > 0 and held >= 0.7 * total
    # DataLoader workers take turns: the loop waits long in some steps and not at all in others (two
    # workers: every other step). That is the pace, not a stall, and the mean per step is what it costs.
    workers = loader and any(re.search(WORKER_WAIT, n) for n, _ in top)
    batch_mb = loader_batch_mb(ctx) if loader and not workers else 0.0
    # Workers run the loading un-profiled: without what recording its events cost (with_stack records
    # every Python call a tokenizer makes: 8.8 ms of loading read 33 ms).
    loading = unprofiled_loading(ctx, gaps) if loader and not workers else 0.0
    if workers and stalls:
        stalls = False
        lost = total / len(per_step)
    # The optimizer's own Python (zero_grad's loop over parameters): it cannot be skipped or moved.
    framework = bool(top) and all(FRAMEWORK_STEP.search(n) for n, _ in top[:3])
    if gil:
        work = [{"name": f"Python on thread {h.thread}: {n[:160]}", "ms": round(v / 1000, 3)}
                for h in holders[:2] for n, v in h.calls[:3]]
    elif top:
        work = [{"name": n[:160], "ms": round(v / 1000, 3)} for n, v in top]
    else:
        hint = "" if engine else " (record with with_stack=True to see the function)"
        on_thread = "on the backward pass's thread"
        if bare is None:
            work = [{"name": f"no op recorded: {on_thread if engine else 'plain Python'}{hint}",
                     "ms": round(float(named["host_bound"].sum()) / 1000, 3)}]
        else:
            # Each place with its own time (the first had been given the whole bare time), and the recorded
            # range most of it ran in, where one holds it.
            who = on_thread if engine else "plain Python"
            work = [{"name": f"no op recorded: {who} between {p.before[:70]} and {p.after[:70]}"
                             + (f", {p.range_us / 1000:.3f} ms of it inside {p.range[:80]}" if p.range else "")
                             + (hint if k == 0 else ""),
                     "ms": round(p.us / 1000, 3)} for k, p in enumerate(bare.places)]
            rest = bare.total - sum(p.us for p in bare.places)
            if rest > 0.05 * bare.total:
                work.append({"name": "no op recorded: elsewhere in the step", "ms": round(rest / 1000, 3)})
    n_gaps = min(50, len(named))
    ev = {"cpu_work_during_idle": work,
          # The ms above are CPU time summed over these gaps, not per step.
          "cpu_work_scope": f"ms summed over the {n_gaps} longest host-bound GPU gaps (of {len(named)}), "
                            f"profiled, {'the steps without the stall' if stall else scope}; " + ("each instant goes to the call the user's code made "
                                                      "(its callees included)" if by_call else
                                                      "an op's ms include the ops nested in it"),
          "idle_ms_per_step": round(lost / 1000, 3)}
    if loading:
        # What DataLoader workers would take over: the loading without the profiler's cost, and the batch
        # they hand back (the bytes copied to the GPU per step).
        ev["loading_ms_per_batch_unprofiled"] = round(loading / 1000, 3)
        ev["batch_mb"] = round(batch_mb, 3)
    if workers and lost > median:
        ev["idle_per_step_is"] = (f"the mean over {len(per_step)} full steps: the loop waits in "
                                  f"{int((per_step > 0.1 * per_step.max()).sum())} of them (the workers take turns)")
    if gil:
        ev["gil_held_by_other_threads"] = {
            "share_of_idle": round(gil_share, 2),
            "threads": [h.thread for h in holders if h.us >= 0.1 * gil_us]}
    if frames and loader:
        # The loader leads; with stacks, where inside it the time went (the Dataset's __getitem__).
        ev["python_calls_during_idle"] = [{"name": n[:160], "ms": round(v / 1000, 3)} for n, v in frames[:6]]
    ddp = bool(top) and bool(_DDP_BUFFERS.search(_programs(top)[0][0])) and bool(ctx.model.cpu_match(f"^{re.escape(DDP_FORWARD)}$").any())
    # A metadata-only op (a view, a header) that holds the idle did no work there: the host stalled in it.
    stalled_view = bool(top) and bool(re.match(METADATA_OPS, _programs(top)[0][0]))
    # (a generation loop's host work is its own, whether its forwards run eager or replay as graphs already: no
    # DataLoader advice, and no warm-cache multiple, which had read 12.3 ms of a fixed generate()'s 3.4 ms)
    loop = not (loader or workers) and bool(decode_forwards(ctx.model) or replayed_loop(ctx.model))
    generation = bool(top) and loop
    if workers:
        # The batches come from worker processes already: they are too few or too slow, and the
        # trace (main process only) cannot show which transform costs the time.
        fix = ("The training loop waits for batches from the DataLoader's worker processes "
               "(_MultiProcessingDataLoaderIter: num_workers > 0 already): they produce batches slower than "
               f"the step consumes them. {WORKERS_ADVICE}; keep pin_memory=True and persistent_workers=True.")
    elif loader:
        inside = f" (most of it in {frames[0][0]})" if frames else ""
        # Workers run the loader's work in parallel with the step: N of them keep up only when the work
        # per batch, N ways, and the batch's hand-off to the loop fit in the rest of the step
        # (fixes.loader_pace). How many that takes depends on the un-profiled rest: the fix plan says.
        need = (f" ({loading / 1000:.1f} ms of loading per batch, the profiler's own cost in it taken out, and a "
                f"{batch_mb:.1f} MB batch to hand back to the loop each step{PLAN_SAYS_WORKERS})") if loading else ""
        fix = (f"Move the input pipeline off the training loop's critical path: DataLoader({WORKERS_UNNAMED} "
               f"pin_memory=True, persistent_workers=True, prefetch_factor=2){need}, and do augmentation/"
               f"preprocessing on the GPU or in the workers{inside}.")
    elif gil:
        calls = _names(n for h in holders[:2] for n, _ in h.calls[:2])
        pool = _thread_pool(ctx, holders)
        where = ("that ThreadPoolExecutor's work in a concurrent.futures.ProcessPoolExecutor (batch preparation in "
                 "DataLoader workers)") if pool else (
            f"batch preparation in DataLoader workers (DataLoader({WORKERS_UNNAMED} pin_memory=True, "
            "persistent_workers=True) over a Dataset or IterableDataset that makes the batches), post-processing or "
            "logging in a multiprocessing pool (concurrent.futures.ProcessPoolExecutor)")
        fix = (f"Another thread of this process runs Python during these gaps ({calls}; "
               f"{gil_share:.0%} of the idle), and Python runs one "
               "thread at a time (the GIL): the loop's thread, back from each op, waits for that thread before it can "
               f"launch the next, so the GPU starves. Run that work in processes, not threads: {where}. Worker "
               "processes forked from a process that uses CUDA must not touch CUDA (hand them numpy arrays or CPU "
               "tensors, or use the spawn or forkserver start method); what they are handed is pickled. Or do less of "
               "that Python: vectorise it (torch.topk on the GPU before the copy, numpy over the batch) or use a "
               "library that runs it without the GIL (a Rust tokenizer's batch encode). A thread only helps work "
               "that releases the GIL: I/O, and numpy or torch calls on large arrays.")
    elif engine:
        fix = (f"The backward pass's CPU thread spends this time{where} with no op recorded: the autograd "
               "engine's per-op work (inflated by the profiler) or a stall of the host. Engine work "
               "shrinks with fewer, larger ops "
               "(torch.compile of the model, which compiles its backward too) and goes away when the whole "
               "step is captured in a CUDA graph. Check the un-profiled step before acting on it.")
    elif views:
        fix = (f"The CPU runs a Python loop over existing tensors ({where.strip()}, {bare.n / ctx.n_full:.0f} times "
               "per step), detaching each: state_dict() does so for every parameter and buffer on each call. Build "
               "the list of tensors once, outside the step, and reuse it (a weight EMA: keep the two lists and call "
               "torch._foreach_lerp_ on them).")
    elif per_item:
        fix = (f"The CPU runs a Python loop that makes small tensors one item at a time ({where.strip()}, "
               f"{bare.n / ctx.n_full:.0f} times per step): build the batch in one call (torch.tensor or "
               "torch.from_numpy on the whole list or array, one .to(device)), or prepare items in "
               "DataLoader workers (num_workers > 0) so the training loop gets ready batches.")
    elif not top:
        ranged = sorted(((p.range_us, p.range) for p in (bare.places if bare else ()) if p.range), reverse=True)
        in_range = ""
        if ranged:
            said = " and ".join(f"{r_us / ctx.n_full / 1000:.3f} ms per step inside {r[:80]}" for r_us, r in ranged)
            in_range = (f" Of this Python, {said} (recorded ranges with no op in them)"
                        + (": the optimizer's own Python, a loop over its parameter tensors, which fewer, larger "
                           "tensors shrink and a CUDA graph of the whole step removes." if all(
                               _OPTIMIZER.search(r) for _, r in ranged) else "."))
        fix = (f"The CPU runs Python that the trace does not name (no op covers it{where}): record with "
               "with_stack=True to see which function, then make it cheaper, run it every N steps, move it "
               "to DataLoader worker processes if it prepares data, or onto the GPU (a background thread helps only "
               "work that releases the GIL: I/O, large numpy or torch calls)." + in_range + _threads_seen(ctx, longest))
    elif framework:
        names = _names(n for n, _ in _programs(top)[:3])
        said = [n for n, _ in top[:3]]
        lookup = any(_LOOKUP.search(n) for n in said)
        # (a review: Dynamo's guard checks had been told to run every N steps, in a DataLoader worker)
        parts = (["the optimizer's loop over its parameter tensors shrinks with fewer, larger parameter tensors (and, "
                  "for its step, with fused=True)"] if any(_OPTIMIZER.search(n) for n in said) else []) + \
            (["Dynamo's guard checks on each call into compiled code (TorchDynamo Cache Lookup) with fewer compiled "
              "regions (no graph breaks) and fewer guards"] if lookup else [])
        fix = (f"The idle CPU time is PyTorch's own work in the step ({names}): {'; '.join(parts)}; it goes away "
               "when the whole step is captured in a CUDA graph.") if lookup else (
            f"The idle CPU time is the optimizer's own Python ({names}), a loop over its parameter "
            "tensors: it shrinks with fewer, larger parameter tensors (and, for its step, with fused=True), and goes "
            "away when the whole step is captured in a CUDA graph.")
    elif ddp:
        # (a review: DDP's buffer sync, 29 ms of CPU a step in HTA's DDP trace, had been told to "run it every N
        # steps, in a background thread or DataLoader worker")
        fix = (f"The idle CPU time is DistributedDataParallel's buffer broadcast in every forward "
               f"({_programs(top)[0][0]}: rank 0's buffers, such as BatchNorm's running statistics, flattened, "
               "broadcast and copied back into each module). DistributedDataParallel(model, broadcast_buffers=False) "
               "stops it, where the buffers need not match across ranks every step (per-rank BatchNorm statistics, "
               "or SyncBatchNorm, which syncs them in its own forward); otherwise broadcast them yourself every N "
               "steps. No background thread or DataLoader worker can take this work.")
    elif not stalled_view and _ALLOCATION.search(where_in := _programs(top)[0][0]):
        # (a review: 2.9 ms inside aten::empty had been told to "run it every N steps")
        # (a review: a 2.2 ms aten::empty with no driver call under it had been said to call cudaMalloc)
        how = ("the caching allocator asked the driver for more (cudaMalloc) or returned it"
               if driver_allocates(ctx.model, where_in) else
               "no driver call (cudaMalloc, cudaFree) is recorded under it, so the trace cannot show whether "
               "the allocator went to the driver or the host stalled")
        fix = (f"The idle CPU time is inside {where_in[:80]}, allocating memory: {how}. Allocate once and reuse the "
               "buffers (out= arguments, preallocated tensors), keep tensor sizes steady between steps, or let the "
               "allocator grow in place (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)." + (
                   " With one step in the window the trace cannot show whether these allocations repeat or are paid "
                   "once (the caching allocator keeps what it got): record more steps." if ctx.n_full <= 1 else ""))
    elif stalled_view:
        # (sync_mask_loss: aten::select at 661 us in one slow step, where such ops take a few us)
        fix = (f"The idle CPU time is inside {_programs(top)[0][0][:80]}, an op that only makes a view or a tensor "
               "header (no data is touched; this trace's median for such ops is "
               f"{(metadata_op_us(ctx.model) or (0.0, 0))[0]:.1f} us): the host stalled there (another process, "
               "paging, the profiler flushing its buffers), not work to move or make cheaper. Check the un-profiled "
               "step and the host's load before acting on it.")
    elif generation:
        # (a review of the forty-fourth set's generate() traces: DataLoader and every-N-steps advice for generate()'s
        # own Python, and the warm factor taking 8.8 ms of it to a 24 ms saving)
        fix = (f"This is a generation loop: the CPU work that launches nothing is the loop's own, between its model "
               f"forwards ({_names(n for n, _ in _programs(top)[:3])}: a library's generate() spends it in its logits "
               "processors, stopping criteria and cache bookkeeping). No DataLoader change moves it; more sequences "
               "per call (a larger batch) share it, and in a loop of your own it can be trimmed or captured with the "
               "forward.")
    else:
        names = _names(n for n, _ in _programs(top)[:3])
        # (a review: the same words, every N steps or a DataLoader worker, had been given to an inference
        # forward's own Python: say which kind of work each way fits)
        fix = (f"Make the CPU work in the step that launches nothing cheaper, or move it off the critical "
               f"path ({names}): work that prepares data belongs in DataLoader worker processes (a background "
               "thread only for work that releases the GIL: I/O, large numpy or torch calls), work that need not run "
               "each step (logging, metrics, checks) can run every N steps, and work on "
               "tensors can move to the GPU." + _threads_seen(ctx, longest))
    # Work the advice takes off the machine's CPU (onto the GPU, every N steps) rather than into DataLoader
    # workers or a graph: the rest of the step runs warm once it is gone (fixes.WARM_CPU).
    # (Not DDP's buffer sync: torch ops on the GPU's tensors, not the host work that evicts the step's caches.)
    # (Nor in a graph capture: a one-time window whose host work is the recording; xDiT's had read 89 ms saved of 31.)
    warm = not (gil or loader or workers or engine or per_item or framework or stalls or ddp or stalled_view or loop) \
        and lost >= WARM_AFTER_HOST_US \
        and program_kind(program_facts(ctx.model)) != "capture"
    if stall:
        ev["stall_not_named"] = stall
    if stalls:
        ev["idle_in_fewest_steps"] = f"{few} of {len(per_step)} steps hold {held / total:.0%} of this idle"
    if stalls and not stall:
        fix = (f"Most of this idle is in {few} of {len(per_step)} steps: a stall in those steps (a slow "
               "batch, the allocator, the host), not work every step does; check that it repeats before "
               "acting on it. ") + fix
    fix_ = RemoveHostWork(warm=warm, loading_us=loading, batch_mb=batch_mb if loading else 0.0,
                          workers=ADVISED_WORKERS if loading else 0,
                          bounds=LOADER_MS_PER_MB_RANGE if loading and batch_mb else None)
    return [Finding(
        kind=SPEC.kind,
        title=f"The GPU idles while the CPU does work that launches nothing ({_names([what])}"
              f"{', data loading' if loader else ''}"
              f"{f'; mostly in {few} of {len(per_step)} steps' if stalls and not stall else ''}"
              f"{f'; besides, {stall}' if stall else ''})",
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["host_bound"].sum()), fix=fix,
        confidence="high" if loader else "medium", evidence=ev,
        fixes=(fix_,), alternatives=fewer_workers(fix_))]


_BACKWARD = re.compile(r"Backward\d*$")
# The share of the longest gaps' idle that other threads' Python must cover to be named as the cause.
GIL_SHARE = 0.5

# The caching allocator's entry points: time inside them is allocation, whose fix is reuse, not "less often".
_ALLOCATION = re.compile(r"^aten::(empty|empty_strided|empty_like|new_empty)$|" + ALLOCATOR_MALLOC)
# DistributedDataParallel syncing its buffers in each forward (broadcast_buffers=True, the default).
_DDP_BUFFERS = re.compile(r"^aten::(un)?flatten_dense_tensors$|^c10d::broadcast_$")
# Framework work a step cannot skip: the optimizer's zero_grad / step annotations (not the program's own
# host work, so "run it every N steps" would be wrong advice).
# (a frame's label reads "step(), def at torch/optim/adam.py:214"; the pattern had kept an older form, so an optimizer's
# own Python got generic advice and the warm-cache multiple: 12.6 ms claimed of 2.1 ms, a review found)
FRAMEWORK_STEP = re.compile(r"^Optimizer\.(zero_grad|step)#|^\w+\(\), (?:def at )?torch/optim/|^TorchDynamo Cache Lookup$")
_OPTIMIZER = re.compile(r"^Optimizer\.|torch/optim/")
_LOOKUP = re.compile(r"^TorchDynamo Cache Lookup$")


def _thread_pool(ctx: Context, holders) -> bool:
    """Whether the threads named run a ThreadPoolExecutor's work (its _worker frame is on their stacks)."""
    cpu = ctx.model.cpu
    on = cpu["thread"].isin([h.thread for h in holders[:2]]).to_numpy()
    return bool((on & ctx.model.cpu_match(r"concurrent/futures/thread\.py\(\d+\): _worker$")).any())


def _threads_seen(ctx: Context, gaps) -> str:
    """Without stacks: a sentence naming another thread that recorded ops in the gaps (a prefetch thread, a thread
    pool), whose Python, if it runs any, the trace cannot show; "" where there is none or stacks were recorded."""
    if (ctx.model.cpu["kind"] == "python").any():
        return ""
    seen = threads_with_ops(ctx, gaps)
    if not seen:
        return ""
    th, n, names = seen[0]
    return (f" Another thread of this process (thread {th}) recorded {n} calls in these gaps ({', '.join(names)}): "
            "if it runs Python (a prefetch thread, a thread pool), that Python holds the GIL while the loop's thread "
            "waits for it, and processes (DataLoader workers, a process pool) are the fix; with_stack=True shows it.")


def _is_loader(name: str) -> bool:
    return "DataLoader" in name or "__next__" in name




# Ops that turn Python data into a tensor (torch.tensor, .to, detach): the edges of an item-by-item loop.
_MAKES_TENSOR = re.compile(r"^aten::(empty|empty_strided|lift_fresh|lift|detach_?|to|_to_copy|copy_|"
                           r"tensor|scalar_tensor|as_strided|alias)$")
PER_ITEM_MIN = 10      # stretches per step between the same two such ops
_VIEW = re.compile(r"^aten::(detach|alias)$")

def _programs(top: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The entries the program can act on: not the profiler's own Python (absent un-profiled)."""
    return [(n, v) for n, v in top if "(the profiler's own)" not in n] or top


def _repeating(ctx: Context, gaps, lost: float) -> tuple[object, str]:
    """The gaps to name the idle from, and the stall left out ("" if none): where at most 2 in 5 of 4 or more full
    steps hold 70% of the idle, the other steps' gaps, if they hold at least half the median step's idle."""
    per = ctx.per_step["host_bound"].reindex(ctx.full_steps).fillna(0.0)
    few = max(1, 2 * len(per) // 5)
    heavy = per.nlargest(few)
    if len(per) < 4 or lost <= 0 or heavy.sum() < 0.7 * per.sum():
        return gaps, ""
    rest = gaps[~gaps["step"].isin(heavy.index)]
    if rest["host_bound"].sum() < 0.5 * lost * (len(per) - few):
        return gaps, ""
    i = gaps["host_bound"].idxmax()
    big = gaps.loc[i]
    ops = ctx.host.host_ops_in(big["thread"], big["start"], big["end"])
    # (DataLoader workers' turns, the loop waiting long every few steps, are the pace, not a stall: named as before)
    if any(_is_loader(n) for n, _ in ops):
        return gaps, ""
    # Named by the Python call it ran in where stacks show it, else the op (BERT's: dropout's _VF lookup, 19.9 ms)
    one = gaps.loc[[i]]
    calls = python_calls(ctx, one, {i: pieces_of(ctx, next(one.itertuples()))})
    name = (calls or ops or [("", 0.0)])[0][0]
    others = gaps["host_bound"].drop(i)
    alone = not len(others) or others.max() < 0.25 * big["host_bound"]
    return rest, (f"a {big['host_bound'] / 1000:.1f} ms stall in step {int(big['step'])}"
                  + (f" inside {name[:120]}" if name else "")
                  + (", which no other step repeats" if alone else ": check whether it repeats"))


# Until the fix plan has found how many workers keep up (rank._name_workers puts the count in their place).


def _names(names, limit: int = 200) -> str:
    """Call names joined up to `limit` characters, whole names only (a path cut mid-way reads as a path)."""
    out: list[str] = []
    for n in names:
        if out and len(", ".join(out + [n])) > limit:
            return ", ".join(out) + ", ..."
        out.append(n if len(n) <= limit else n[:limit] + "...")
    return ", ".join(out)
