"""activation_checkpointing: the backward pass runs checkpointed segments' forward again (torch.utils.checkpoint,
checkpoint_sequential, Hugging Face's gradient_checkpointing_enable()): GPU work and dispatch the step does twice, to
keep less in memory (trace/recompute.py finds the forward ops under a backward node). The estimate replays the steps
without the recomputed forwards' calls, kernels and CPU time (fixes.DropSpans). Whether the activations then fit in
memory is not in the trace, and the advice says so. Written for the fifty-second held-out set (registered before it
was recorded; sample_traces/matrix/README.md).
"""
from __future__ import annotations

import numpy as np

from ..trace.recompute import hook_spans, recompute_spans, segments, steady
from .base import Context, Finding, KindSpec
from .fixes import DropSpans

SPEC = KindSpec("activation_checkpointing", "slowed by activation checkpointing's recomputation",
                beyond_cost="the recomputed forward's kernels go: GPU time, not idle")


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    full = [int(s) for s in ctx.full_steps]
    if not steady(m, full):
        return []
    seg = segments(m)
    seg = seg[seg["step"].isin(full)]
    gpu_us, cpu_us = _recomputed_work(ctx, seg)
    lost = float(np.median([gpu_us.get(s, 0.0) for s in full]))
    if lost <= 0:
        return []
    per = seg.groupby("step").agg(n=("ops", "size"), ops=("ops", "sum")).reindex(full).fillna(0)
    nodes = seg["node"].value_counts()
    reentrant = bool(seg["node"].str.startswith("CheckpointFunction").any())
    steps = m.steps[m.steps["step"].isin(full)]
    busy = float(steps["gpu_busy"].median()) if len(steps) else 0.0
    ev = {"steps_recomputing": f"{int((per['n'] > 0).sum())} of {len(full)} full steps",
          "segments_recomputed_per_step": int(np.median(per["n"])),
          "forward_ops_recomputed_per_step": int(np.median(per["ops"])),
          "recomputed_kernel_ms_per_step": round(lost / 1000, 3),
          "recomputed_cpu_ms_per_step_profiled": round(float(np.median([cpu_us.get(s, 0.0) for s in full])) / 1000, 3),
          "checkpoint_style": ("re-entrant (use_reentrant=True: CheckpointFunctionBackward)" if reentrant else
                               "non-re-entrant (use_reentrant=False: recomputed when a saved tensor is unpacked)"),
          "recomputed_under": ", ".join(f"{n} ({k} a window)" for n, k in nodes.head(3).items())}
    if busy:
        ev["pct_of_gpu_busy"] = round(100 * lost / busy, 1)
    hooks = hook_spans(m)
    framed = bool((m.cpu["kind"] == "python").any())
    if hooks:
        in_full = [b - a for th, a, b in hooks if ctx.cpu_step_of(np.array([a]))[0] in full]
        ev["checkpoint_hooks_cpu_ms_per_step_profiled"] = round(sum(in_full) / 1000 / len(full), 3)
    elif not framed:
        ev["checkpoint_hooks"] = ("not in this trace (no Python frames): the forward's pack hooks and the RNG state "
                                  "saved per segment hide in the forward ops' own time and stay in the estimate, which "
                                  "is low by them where the CPU sets the step's pace (record with_stack=True to see them)")
    title = (f"Activation checkpointing runs the forward of {ev['segments_recomputed_per_step']} segments again in "
             f"every backward pass ({ev['forward_ops_recomputed_per_step']} forward ops a step): "
             f"{ev['recomputed_kernel_ms_per_step']:.2f} ms of GPU work a step done twice")
    fix = ("Turn activation checkpointing off where the activations fit in memory: call the layers directly instead of "
           "through torch.utils.checkpoint.checkpoint / checkpoint_sequential (Hugging Face: "
           "model.gradient_checkpointing_disable()), or checkpoint fewer layers (every other one, or only the largest). "
           "The trace cannot show whether they fit: checkpointing trades this recomputation for the memory of the "
           "segments' activations, which comes back; try a step with it off and read "
           "torch.cuda.max_memory_allocated(), and if it does not fit, a smaller batch without checkpointing may "
           "still be faster per sample.")
    return [Finding(kind=SPEC.kind, title=title, lost_per_step_us=lost, lost_total_us=float(sum(gpu_us.values())),
                    fix=fix, confidence="high", evidence=ev, fixes=(DropSpans(recompute_spans(m) + hooks),),
                    # (Checkpointing saves and restores the CUDA RNG state around each segment, which a CUDA-graph
                    # capture refused before PyTorch 2.10: pytorch/pytorch#83148, #162504. The trace does not say
                    # which version ran, so the plan puts the fix that works on any version first.)
                    as_prerequisite="activation checkpointing saves and restores the CUDA RNG state around each "
                                    "segment, which CUDA-graph capture refuses before PyTorch 2.10 (the trace does not "
                                    "say which version ran): turn it off first where memory allows "
                                    "(activation_checkpointing)")]


def _recomputed_work(ctx: Context, seg) -> tuple[dict, dict]:
    """Per full step: the kernel time launched inside the recomputed forwards, and their CPU time (us, profiled)."""
    m = ctx.model
    cpu, gpu = m.cpu, m.gpu
    gpu_us: dict[int, float] = {}
    cpu_us: dict[int, float] = {}
    if seg.empty or gpu.empty:
        return gpu_us, cpu_us
    lr = gpu["launcher"].to_numpy()
    ok = (lr >= 0) & (gpu["kind"] == "kernel").to_numpy()
    ts = cpu["ts"].to_numpy(dtype=float)[lr[ok]]
    th = cpu["thread"].to_numpy()[lr[ok]]
    dur = gpu["dur"].to_numpy(dtype=float)[ok]
    # Per thread, the kernels by their launch's time: each segment's are one slice (a search, not a pass over every
    # kernel per segment: a long trace of a deep model has thousands of segments).
    by_thread = {}
    for name in set(seg["thread"].tolist()):
        k = np.flatnonzero(th == name)
        order = np.argsort(ts[k], kind="stable")
        by_thread[name] = ts[k][order], dur[k][order]
    for s in seg.itertuples(index=False):
        t, d = by_thread[s.thread]
        lo, hi = np.searchsorted(t, [s.start, s.end], "left")
        st = int(s.step)
        gpu_us[st] = gpu_us.get(st, 0.0) + float(d[lo:hi].sum())
        cpu_us[st] = cpu_us.get(st, 0.0) + float(s.end - s.start)
    return gpu_us, cpu_us
