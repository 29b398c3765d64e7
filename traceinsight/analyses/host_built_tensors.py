"""host_built_tensors: tensors the step builds on the CPU and copies to the GPU every time (a causal mask, rotary
tables, a detection head's grids: torch.full / torch.arange / torch.meshgrid, then `.to(x.device)`); trace/host_built.py
finds them. The ops that build them run on the host, and each blocking copy synchronises the stream, so the CPU can no
longer run ahead of the GPU. Pinning does not help (they are new each step): making them on the device, or once, does.
The estimate replays the steps without the build-and-copy spans (fixes.DropSpans): the buffer's fix, which builds
nothing; `device=` keeps a kernel or two per tensor. Written for the fifty-third held-out set (registered before it was
recorded; sample_traces/matrix/README.md).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..trace.host_built import copies, spans, steady
from .base import RUNS_AHEAD, Context, Finding, KindSpec, top_op, user_frame
from .fixes import DropSpans

SPEC = KindSpec("host_built_tensors", "slowed by tensors built on the host every step",
                cost_basis="the host time that builds the tensors and copies them (profiled)",
                beyond_cost=RUNS_AHEAD)
MAX_SITES = 3


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    full = [int(s) for s in ctx.full_steps]
    if not steady(m, full):
        return []
    c = copies(m)
    c = c[c["step"].isin(full)]
    span_us = (c["end"] - c["start"]).groupby(c["step"]).sum().reindex(full).fillna(0.0)
    lost = float(np.median(span_us))
    if lost <= 0:
        return []
    n = len(full)
    made = Counter(f for fs in c["factories"] for f in fs)
    cpu = m.cpu
    sites = Counter()
    for r in c["copy_row"].to_numpy():
        sites[(top_op(cpu, int(r)), user_frame(cpu, int(r)) or "")] += 1
    ev = {"steps_building": f"{c['step'].nunique()} of {n} full steps",
          "tensors_copied_per_step": round(len(c) / n, 1),
          "kb_copied_per_step": round(float(c["bytes"].sum()) / n / 1e3, 1),
          "host_ms_per_step_profiled": round(lost / 1000, 3),
          "built_by": ", ".join(f"{k} ({v / n:g} a step)" for k, v in made.most_common(4)),
          "copy_sites": [{"op": op, "source": src, "per_step": round(k / n, 1)}
                         for (op, src), k in sites.most_common(MAX_SITES)]}
    where = sites.most_common(1)[0][0]
    title = (f"{ev['tensors_copied_per_step']:g} tensors a step are built on the CPU ({ev['built_by']}) and copied to "
             f"the GPU ({ev['kb_copied_per_step']:g} KB) in {where[0]}" + (f" ({where[1]})" if where[1] else "")
             + f": {ev['host_ms_per_step_profiled']:.2f} ms of host work a step, profiled")
    fix = ("Make these tensors on the GPU, or once: pass device= to the op that creates them (torch.full(..., "
           "device=x.device), torch.arange(..., device=...)) or, where they are the same every step (a mask, "
           "positional or rotary tables, a grid), build them once: register_buffer(name, t, persistent=False) in "
           "__init__ (model.to(device) moves it), or cache them by shape. Either way the host ops that build them go "
           "with the copy, and the blocking .to(), which waits for all the GPU's queued work, no longer stops the CPU "
           "running ahead. Pinning them would not help: they are new each step. The estimate is for building them "
           "once; with device= each still launches a kernel or two.")
    return [Finding(kind=SPEC.kind, title=title, lost_per_step_us=lost, lost_total_us=float(span_us.sum()), fix=fix,
                    confidence="high", evidence=ev, fixes=(DropSpans(spans(m)),),
                    # (A blocking copy synchronises the stream, which a CUDA-graph capture refuses, and a copy from
                    # pageable memory cannot be captured either.)
                    as_prerequisite="tensors built on the host are copied with a blocking .to() every step, whose "
                                    "stream sync a CUDA-graph capture refuses: build them on the device or once first "
                                    "(host_built_tensors)")]
