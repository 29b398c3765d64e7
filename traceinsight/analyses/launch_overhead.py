"""launch_overhead: the GPU waits while the CPU issues work: many short kernels, launch calls and
dispatcher/Python time back to back, and the queue never builds up.

Cost = idle time attribution.py gave to feeding the GPU (plus launch latency), median per step.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace.steps import OPTIMIZER_STEP
from ..trace.compiles import shapes_vary
from ..trace.generation import decode_forwards, replayed_loop
from ..trace.facts import (COMPILE_REGION, PAGEABLE_MIN_BYTES, compiled_wrapper_us, program_facts, program_kind,
                           waiting_calls)
from .compiler_fixes import CompiledDispatch
from .fixes import CudaGraph
from .fusion_candidates import compiler_fix
from . import item_loop
from .graph_break import one_function, regions_per_step
from .unfused_optimizer import for_loop_steps
from .base import Context, Finding, KindSpec

SPEC = KindSpec("launch_overhead", "launch-bound", idle_cause=True, color="#e8833a",
                prerequisites=("sync_stall", "cudnn_benchmark", "anomaly_detection", "activation_checkpointing",
                               "host_built_tensors"))


# A for-loop optimizer made capturable=True (needed to capture it) keeps its step count and bias
# corrections on the GPU: Adam(foreach=False, capturable=True) measured 2.7 more kernels per kernel of
# the eager step, each about as long as the trace's shortest kernels (the matrix's unfused_optimizer
# graph variant on H100 and H200: +500 kernels, +0.6 ms per step over 26 parameter tensors).
CAPTURABLE_KERNELS_PER_KERNEL = 2.7
# A compiled step's own Python (Dynamo's guards, AOTAutograd's wrapper, cudagraph trees' call) ran at
# 0.45-0.75 of its profiled time un-profiled (four reduce-overhead programs on H100 and H200: the
# measured step against the profiled one, the graph launch's per-node profiling cost left out); the
# per-event cost model does not see it, so the graph estimate of a compiled step is a range.
COMPILED_PYTHON_SHARE = 0.6
COMPILED_PYTHON_BOUNDS = (0.45, 0.75)
# A generation loop's forward replayed as a CUDA graph by torch.compile(mode="reduce-overhead") still pays, per call,
# Dynamo's guards, the runtime wrapper and cudagraph trees' call (input copies, checks): in the forty-fourth set's
# compiled generate() traces (transformers 5.17's static cache, a Llama at batch 1 and a Qwen2 at batch 16, H200) the
# compiled calls less the profiler's modelled cost took 140-1,400 us a call, median 460 over the 16 traces. Read from
# the traces of the fix, so fitted on that set (no longer held out), not on the speed-ups.
FORWARD_CALL_US = 450.0
# The graph estimate of a step whose shapes vary replays graphs at the window's shapes (a review read its saving
# beside pad-first advice as a promise).
PADDED_SAID = (" The estimate replays graphs at the window's own shapes: padding adds GPU work it does not count, "
               "hence low confidence.")
# DistributedDataParallel's forward range: the step's gradients are all-reduced by DDP.
DDP_FORWARD = r"^DistributedDataParallel\.forward$"
# The optimizers whose capturable=True step keeps a step count on the GPU (torch.optim's Adam family).
CAPTURABLE = re.compile(r"#(Adam|AdamW|Adamax|NAdam|RAdam)\.step")


def _advice(p: dict, ctx: Context) -> tuple[str, str, tuple]:
    """(program, fix, typed fixes) for what the program already does: eager -> compile / graphs;
    compiled -> reduce-overhead; already graphed -> what a graph cannot remove. The advice names only
    what the trace shows (an optimizer in the step, graph breaks, copies from the host)."""
    kind = program_kind(p)
    if kind == "graphed":
        between = _ops_between(ctx)
        # (a compiled call's range holds its replay: its CPU is the call's own, guards and cudagraph trees')
        said = ", ".join(f"{n} ({ms:.3f} ms" + (", the compiled call's own: guards, cudagraph trees" if
                                                re.match(COMPILE_REGION, n) else "") + ")"
                         for n, ms in between) or "no op"
        loop = replayed_loop(ctx.model)
        if loop:
            # (a review of the forty-fourth set's fixed generate(): bigger replays and pinned copies into static
            # buffers are not a generate() caller's to make; what is left is the library's own per-token loop)
            return ("graphed", f"{p['graphed_share']:.0%} of the GPU time already runs from CUDA-graph replays, "
                    f"{loop:.0f} a step: a generation or sampling loop whose model forwards are graphs already. What "
                    f"is left to the CPU is the loop's own work between the replays, per step: {said}. No further "
                    "graph of the model removes it: more sequences per call (a larger batch) share it; with "
                    "transformers' generate() it is the library's own loop (logits processors, stopping checks, the "
                    "cache's bookkeeping); a loop of your own can capture its per-token work with the forward.", ())
        fix = (f"{p['graphed_share']:.0%} of the GPU time already runs from CUDA-graph replays: what is left "
               f"is the CPU between replays, per step: {said}. Give each replay more work (bigger batches, "
               "more tokens or steps per launch) or trim that CPU work.")
        if _host_copies(ctx):
            fix += (" Copy host inputs into the graph's static buffers from pinned memory with "
                    "non_blocking=True.")
        return ("graphed", fix, ())
    vary = shapes_vary(ctx.model) if kind == "compiled" else None
    if kind == "compiled" and p["graph_tree_calls"]:
        # (sample_traces/compile/h200_compileB/ro_shapes: a new length every step, the tree warmed up each
        # shape and replayed nothing; the advice had been to use the mode it runs under)
        why = (f"{vary}, and the tree runs a warm-up of each new shape before it records a graph for it, so with "
               "shapes that keep changing none replays" if vary else "the tree warms up and records a graph for "
               "each new input shape before one replays, or it skipped graphs for this function "
               "(TORCH_LOGS=perf_hints says why)")
        fix = ("The step already runs under torch.compile(mode=\"reduce-overhead\") (its CUDA-graph tree is "
               f"called), yet no graph replays in the window: {why}. While shapes change, drop "
               "mode=\"reduce-overhead\" (a new length every step ran 13.6 ms a step under it against 5.4 ms in the "
               "default mode at the same lengths on an H200), or pad inputs to a few fixed shapes so each one's "
               f"graph replays.{PADDED_SAID}")
    elif vary:
        # (sample_traces/compile: dynamic=True with a new length every step had been told to use reduce-overhead,
        # which measured 2.5x slower on such a program)
        fix = (f"The step is already compiled (Triton kernels), and {vary}. Under mode=\"reduce-overhead\" each new "
               "shape gets a warm-up run and a CUDA graph of its own, replayed only when the shape comes back (a new "
               "length every step ran 13.6 ms a step under it against 5.4 ms in the default mode on an H200). Pad "
               "inputs to a few fixed shapes (buckets) first, then compile with mode=\"reduce-overhead\" so each "
               "shape's graphs replay" + ("; or, where each shape compiles a graph of its own, compile with "
                                          "dynamic=True so one serves them all" if "versions" in vary else "")
               + f".{PADDED_SAID}")
    elif kind == "compiled":
        fix = ("The step is already compiled (Triton kernels): compile it with "
               "torch.compile(model, mode=\"reduce-overhead\") so the compiled regions replay as CUDA graphs.")
    if kind == "compiled":
        regions, one = regions_per_step(ctx), one_function(ctx)
        if regions > 1 and one:
            fix = (f"The step is already compiled (Triton kernels), as {regions:.0f} regions, all of Dynamo's first "
                   f"frame (compile ids {one}): one compiled function called {regions:.0f} times a step (as regional "
                   "compilation calls each block, a generation loop its forward, or a loop over micro-batches), not "
                   "graph breaks. Compile that "
                   "function with mode=\"reduce-overhead\" (torch.compile(block, mode=\"reduce-overhead\"), or "
                   "block.compile(mode=\"reduce-overhead\") on each block) so each call replays as its own CUDA graph.")
        elif regions > 1:
            fix += (f" The step runs {regions:.0f} compiled regions: remove the graph breaks between them "
                    "(torch._dynamo.explain) so one graph covers more of it.")
        return ("compiled", fix,
                (CudaGraph(wrapper_us=compiled_wrapper_us(ctx.model, ctx.full_steps) or 0.0, compiled_only=True,
                           python_share=COMPILED_PYTHON_SHARE, bounds=COMPILED_PYTHON_BOUNDS),))
    forwards = decode_forwards(ctx.model)
    if forwards:
        n = len(forwards) / ctx.n_full
        fix = (f"This is a generation loop, {n:.0f} model forwards a step after the prompt's: capture the model's "
               "forward in CUDA graphs. With transformers, generate(..., cache_implementation=\"static\") compiles it "
               "so (mode=\"reduce-overhead\"); in a loop of your own, a static KV cache and torch.compile(model, "
               "mode=\"reduce-overhead\"). The loop's own work between the forwards (sampling, logits processors, "
               "stopping checks, the cache's bookkeeping) and the prompt's prefill stay eager, and the estimate keeps "
               "them; a loop of your own can capture them too.")
        return ("eager", fix, (CudaGraph(forwards=forwards, call_us=FORWARD_CALL_US),))
    if ctx.model.cpu_match(OPTIMIZER_STEP).any():
        # torch.compile(model) graphs the model; the optimizer's launches stay eager unless the whole
        # step is captured (what the replay of this fix assumes).
        fix = ("Cut the per-kernel CPU cost: capture the whole training step (forward, backward and "
               "optimizer.step) in one CUDA graph with torch.cuda.graph; torch.compile(model, "
               "mode=\"reduce-overhead\") graphs the model only and leaves the optimizer's launches eager. "
               "Or fuse small ops with torch.compile, or give each kernel more work (bigger batch, fewer, "
               "larger layers).")
    else:
        # (the estimate is of the graph of the kernels as they are; a review read it beside reduce-overhead's own,
        # larger estimate under "Done another way" as two savings for one call)
        fix = ("Cut the per-kernel CPU cost: capture the step in a CUDA graph (torch.cuda.graph / "
               "make_graphed_callables: the estimate is of this, the kernels kept as they are), or "
               "torch.compile(model, mode=\"reduce-overhead\"), which graphs it and also fuses small ops (its own "
               "estimate is given as another way where the trace allows one); or give each kernel more work "
               "(bigger batch, fewer, larger layers).")
    if _autocast_casts(ctx):
        # torch.autocast's weight-cast cache must be off inside a capture (PyTorch's CUDA-graph notes; the
        # DDP graph of held-out set 33 needed it).
        fix += (" The step runs under torch.autocast (casts inside its matmuls): capture it with "
                "torch.autocast(..., cache_enabled=False).")
    if ctx.model.cpu_match(DDP_FORWARD).any():
        # Measured (held-out set 33, two H200s): a launch-bound DDP step captured whole, its all-reduces
        # included, ran 5.1-5.6x faster; the capture needs PyTorch's three DDP set-up steps.
        fix += (" The capture can hold DDP's all-reduces too (NCCL 2.9.6 or later) after three set-up steps: "
                "TORCH_NCCL_ASYNC_ERROR_HANDLING=0 before init_process_group, DistributedDataParallel constructed "
                "inside a side stream (with torch.cuda.stream(s)), and at least 11 eager DDP steps before the "
                "capture.")
    mb = _host_copy_mb(ctx)
    if mb:
        # A capture records kernels, not copies to or from host memory (holdout16_*: the graphed forward or
        # training step, its 12 MiB copy kept outside: 1.3-3.2x measured).
        fix += (f" Each step copies {mb:.1f} MB between host and GPU memory, which a graph does not "
                "capture: keep those copies outside it, into the graph's static input tensors before each "
                "replay (from pinned memory, non_blocking=True) and out of its static outputs after it (into a "
                "buffer of their own if a copy on another stream still reads them when the next replay runs).")
    return ("eager", fix, (CudaGraph(),))


GRAPH_WHAT = "the step captured in one CUDA graph (torch.cuda.graph), the loop's kernels kept as they are"


# torch.compile (default mode) of an eager model, the other way to cut its launches: Inductor fuses the pointwise
# chains (fusion_candidates' model, BatchNorm's normalising pass counted) and launches what is left from generated
# code, each kernel for about what the eager step spent per kernel, COMPILED_RATIO of it (the cheap elementwise ops go,
# so do the GEMMs' heavy eager dispatch; Inductor emits more kernels than one per fused chain in a backward, and its
# launcher costs about what a mean eager op did), plus COMPILED_WRAPPER_US a step (Dynamo's guards, AOTAutograd's
# wrappers). The optimizer's step stays eager. Fitted on the eager -> torch.compile pairs of the matrix (a Llama, GPT-2,
# a BERT tagger, ConvNeXt-Atto training, ResNet-18 serving, an MLP with a per-step .item(); H100 and H200): the ratio
# each pair's measured step implies spreads 0.6-2.2 (Inductor's kernel count is not in the eager trace: a BERT kept
# 331 of its 365 kernels, a Llama 368 of 945), 1.3 with 200 us fits most, hence the range, over that whole spread (it
# had stopped at 1.0: a review read a small BERT's "saves next to nothing, range 0.0-0.028 ms" beside transformers'
# models measured at up to 1.8x compiled, much of their Python gone).
COMPILED_RATIO = 1.3
COMPILED_WRAPPER_US = 200.0
COMPILED_BOUNDS = ((0.6, 0.0), (2.2, 400.0))
COMPILE_WHAT = "torch.compile(model) in its default mode (fused Triton kernels, no CUDA graphs)"


# torch.compile(model, mode="reduce-overhead") of an eager step without an optimizer (inference, a sampling loop): the
# same fusion, each compiled call replayed as a CUDA graph. Its estimate is the whole step graphed with the chains
# fused; the graph's own estimate keeps the eager kernels (torch.cuda.graph records them as they are), which read the
# forty-fifth set's compiled UNet and DiT samplers at 2.9-3.6x against 6.8-8.2x measured (H200): Inductor had halved
# their GPU work. A training step's optimizer stays eager under it (the advice says so), which this does not model.
COMPILE_RO_WHAT = ("torch.compile(model, mode=\"reduce-overhead\") (fused Triton kernels, each compiled call replayed "
                   "as a CUDA graph)")


def _compile_option(ctx: Context, graph: tuple) -> tuple:
    """The compile alternatives of an eager step's launch fix, (key, what, plan) each: default mode, and where the
    step has no optimizer and the graph is of the whole step, mode="reduce-overhead"."""
    opt = ctx.model.cpu[ctx.model.cpu_match(OPTIMIZER_STEP)]
    eager = tuple((float(r.ts), float(r.end), str(r.thread)) for r in opt.itertuples())
    fuse = compiler_fix(ctx)
    dispatch = CompiledDispatch(eager, COMPILED_RATIO, COMPILED_WRAPPER_US, bounds=COMPILED_BOUNDS)
    out = (("torch_compile", COMPILE_WHAT, (dispatch,) + ((fuse,) if fuse else ())),)
    fuse = compiler_fix(ctx, norms=True) if not len(opt) and graph == (CudaGraph(),) else None
    if fuse:
        out += (("torch_compile_reduce_overhead", COMPILE_RO_WHAT, (fuse,) + graph),)
    return out


# An autocast cast: a copy to another dtype made inside a matmul or convolution op, not by the program itself.
AUTOCAST_CAST = r"^aten::(to|_to_copy)$"
# (Forward ops only: a convolution's backward casts for its own reasons, launch_tiny_conv's fp32 one.)
CAST_PARENT = r"^aten::(linear|matmul|mm|addmm|bmm|baddbmm|addbmm|einsum|conv[123]d|conv_transpose[123]d)$"


def _autocast_casts(ctx: Context) -> bool:
    """The step's matmuls or convolutions cast their inputs themselves: torch.autocast is on."""
    cpu = ctx.model.cpu
    casts = ctx.model.cpu_match(AUTOCAST_CAST) & (cpu["kind"] == "op").to_numpy()
    if not casts.any():
        return False
    parent = cpu["parent"].to_numpy()[casts]
    pos = cpu.index.get_indexer(parent[parent >= 0])
    return bool(ctx.model.cpu_match(CAST_PARENT)[pos[pos >= 0]].any())


def _ops_between(ctx: Context, limit: int = 3) -> list[tuple[str, float]]:
    """The outermost ops on the CPU per full step in a graph-replayed program, longest first (ms): their
    CPU work, without the time they spent blocked in a sync or a copy (a wait for the GPU, which trimming
    CPU work does not shorten: a decode step's 463 ms copy that waited on a stream)."""
    cpu = ctx.model.cpu
    top = cpu["top_op"].to_numpy()
    ops = cpu[(cpu["kind"] == "op").to_numpy() & (top == cpu.index.to_numpy())]
    ops = ops[np.isin(ctx.cpu_step_of(ops["ts"].to_numpy()), ctx.full_steps)]
    waits = waiting_calls(ctx.model) & (top >= 0)
    blocked = pd.Series(cpu["dur"].to_numpy()[waits]).groupby(top[waits]).sum()
    work = (ops["dur"] - blocked.reindex(ops.index, fill_value=0.0)).clip(lower=0.0)
    per = work.groupby(ops["name"]).sum().sort_values(ascending=False) / ctx.n_full / 1000
    return [(str(n), float(v)) for n, v in per.head(limit).items()]


def _host_copies(ctx: Context) -> bool:
    g = ctx.gpu_in_full_steps(ctx.model.gpu)
    return bool(((g["kind"] == "memcpy") & (g["copy_dir"] == "HtoD")).any())


def _host_copy_mb(ctx: Context) -> float:
    """MB per full step copied between host and GPU memory in copies of PAGEABLE_MIN_BYTES or more (a
    scalar read for .item() is a sync, which the plan already puts before the graph)."""
    g = ctx.gpu_in_full_steps(ctx.model.gpu)
    big = g[(g["kind"] == "memcpy") & g["copy_dir"].isin(("HtoD", "DtoH")) & (g["bytes"] >= PAGEABLE_MIN_BYTES)]
    return float(big["bytes"].sum()) / max(1, ctx.n_full) / 1e6


def _capturable(ctx: Context, ev: dict):
    """(regions, factor on their kernels' time) for a for-loop optimizer captured in a graph, or None."""
    got = for_loop_steps(ctx)
    if got is None:
        return None
    regions, rows = got
    if not CAPTURABLE.search(str(regions["name"].iloc[0])):
        return None     # no step count to keep on the GPU (SGD): captured as it is
    k = ctx.gpu_in_full_steps(ctx.model.gpu)
    k = k[k["kind"] == "kernel"]
    gpu_us = float(np.median([r[3] for r in rows]))
    if not len(k) or gpu_us <= 0:
        return None
    extra = CAPTURABLE_KERNELS_PER_KERNEL * float(np.median([r[2] for r in rows])) * float(k["dur"].quantile(0.1))
    ev["capturable_optimizer_extra_gpu_ms_per_step"] = round(extra / 1000, 3)
    return (tuple((float(r.ts), float(r.end), r.thread) for r in regions.itertuples()), 1.0 + extra / gpu_us)


# A vLLM engine's own ops and frames.
VLLM = r"^vllm::|vllm/v1/|vllm/worker/"


def analyze(ctx: Context) -> list[Finding]:
    prog = program_facts(ctx.model)
    if program_kind(prog) == "capture":
        return []  # a capture is not a steady-state step: graph_capture says so
    per_step = ctx.per_step["launch_overhead"]
    lost = ctx.per_step_median(per_step)
    g = ctx.gpu_in_full_steps(ctx.model.gpu)
    k = g[g["kind"] == "kernel"]
    cpu = ctx.model.cpu
    launch_dur = cpu["dur"][(cpu["rkind"] == "launch").to_numpy()]
    per_step_k = len(k) / ctx.n_full
    med_kernel = float(k["dur"].median()) if len(k) else 0.0
    small = float((k["dur"] < 10).mean() * 100) if len(k) else 0.0
    ev = {
        "kernels_per_step": round(per_step_k, 1),
        "median_kernel_us": round(med_kernel, 2),
        "pct_kernels_under_10us": round(small, 1),
        "median_launch_call_us": round(float(launch_dur.median()), 2) if len(launch_dur) else None,
        # The step's CPU time per kernel, host work that launches nothing (a DataLoader's wait), the waits
        # for the GPU (with the host's work on a copied result, sync_stall's) and start-up calls left out.
        "cpu_us_per_kernel": round(max(0.0, ctx.median_step_us - sum(ctx.per_step_median(ctx.per_step[c]) for c in
                                                                     ("host_bound", "sync_stall", "cuda_startup",
                                                                      "graph_capture")))
                                   / per_step_k, 2)
                             if per_step_k else None,
        "idle_ms_per_step": round(lost / 1000, 3),
        "top_kernels_by_count": k["name"].str.slice(0, 120).value_counts().head(5).to_dict(),
        # (beside per-step figures, a count over the window must say so: a review read 160 launches as one step's)
        "top_kernels_by_count_is": f"launches summed over the {ctx.n_full} full steps analysed, not per step",
    }
    share = lost / ctx.median_step_us if ctx.median_step_us else 0
    conf = "high" if share > 0.3 and med_kernel < 30 else ("medium" if share > 0.1 else "low")
    program, fix, plan = _advice(prog, ctx)
    if program == "eager" and plan and not plan[0].forwards:
        opt = _capturable(ctx, ev)
        plan = (CudaGraph(optimizer=opt, optimizer_added_us=1000.0 * ev["capturable_optimizer_extra_gpu_ms_per_step"]
                          if opt else 0.0),)
    opt = ctx.model.cpu["name"][ctx.model.cpu_match(OPTIMIZER_STEP)]
    if program == "eager" and len(opt) and CAPTURABLE.search(str(opt.iloc[0])):
        # An Adam-family optimizer keeps its step count on the CPU: a capture fails on it.
        fix += (" An optimizer stepped inside a torch.cuda.graph capture must keep its state on the GPU: "
                "construct it with capturable=True (e.g. torch.optim.Adam(params, fused=True, "
                "capturable=True)).")
    vllm = program == "eager" and bool(ctx.model.cpu_match(VLLM).any())
    if vllm:
        # (a review: a vLLM prefill run eager had been told to wrap the model in torch.compile)
        fix += (" This is a vLLM engine, which captures the CUDA graphs itself: check that enforce_eager is off and "
                "that its CUDA-graph capture sizes (compilation_config) cover this batch; larger batches than the "
                "largest captured size run eager.")
    alts = _compile_option(ctx, plan) if program == "eager" and plan and not vllm else ()
    loop = item_loop.find(ctx) if program == "eager" and plan and not plan[0].forwards and not vllm else None
    if loop:
        # A loop over a batch's items: batched, its kernels' fixed cost goes too, and a graph of it would freeze what
        # it draws on the host; the graph stays another way (the forty-seventh set: per-sample augmentation and a
        # per-image decode, measured batched at 2.1-2.7x and 5.3-6.1x).
        fix = item_loop.advice(loop, fix)
        alts = (("cuda_graph", GRAPH_WHAT, plan),) + alts
        plan = (loop["fix"],)
        ev["item_loop"] = dict(loop["evidence"], where=loop["where"])
    ev["program"] = program
    ev["graphed_share_pct"] = round(100 * prog["graphed_share"], 1)
    if program == "graphed":
        conf = "low"
    elif program == "compiled" and shapes_vary(ctx.model):
        conf = "low"        # graphs at the window's shapes, which the advice changes first (PADDED_SAID)
    elif program == "compiled" and conf == "high":
        conf = "medium"     # the compiled step's own Python un-profiled is a range, not a measurement
    return [Finding(
        kind=SPEC.kind,
        title=(f"Launches keep up with the GPU: {per_step_k:.0f} kernels per step, median {med_kernel:.1f} us each, "
               "under 1% of each step idle between them" if share < 0.005 and round(per_step_k) != 1 else
               f"The GPU waits on the CPU to launch work: {per_step_k:.0f} kernels per step, median "
               f"{med_kernel:.1f} us each, {share:.0%} of each step idle waiting for their launches"
               if round(per_step_k) != 1 else
               f"The GPU waits on the CPU to launch work: 1 kernel per step ({med_kernel:.1f} us), idle {share:.0%} "
               "of the step around it"),
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["launch_overhead"].sum()),
        fix=fix, confidence=conf, evidence=ev, fixes=plan,
        alternatives=alts)]
