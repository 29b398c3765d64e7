"""torch.compile compiling inside the window: the ranges its compiler records, and the compiled regions'
versions. Dynamo and Inductor wrap each phase in record_function ("dynamo", "entire_backward_compile",
"<phase> (dynamo_timed)"), so a trace that caught a compile holds seconds of CPU ranges in which the GPU
idles: not the program's steady host work, and not what a DataLoader worker or a CUDA graph would take off.
(sample_traces/compile/: torch 2.11 on an H200, a new sequence length every step under dynamic=False: the
forward's "dynamo" 1.5-2.8 s, the backward's "entire_backward_compile" 1.0-1.3 s, Inductor's autotuning of
the new kernels at their first run 0.02-0.1 s each, in steps of 2.6-4.3 s.)
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .steps import merged_intervals

# (The functions take the TraceModel that model.py builds, which calls mark_compiling: not imported here.)

# The outermost phases of a compile, forward and backward, and autotuning at a kernel's first run (which
# times every config of it on the GPU). Any "(dynamo_timed)" phase counts, so that a torch whose outer
# names differ is still read, except the CUDA-graph tree's (mode="reduce-overhead"): its recording is a capture
# (graph_capture's question) and cudagraphify.get_container runs on every call.
COMPILING = (r"^(dynamo|entire_frame_compile|entire_backward_compile|backend_compile|inductor_compile)$"
             r"|^(?!CUDAGraphNode|cudagraphify).*\(dynamo_timed\)$")
# "Torch-Compiled Region: 0/7": frame 0's eighth compiled version (its seventh recompile).
REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")


def compile_spans(model) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends), sorted and disjoint: where any thread was inside a compile phase."""
    def compute():
        cpu = model.cpu
        if cpu.empty:
            return np.zeros(0), np.zeros(0)
        hit = model.cpu_match(COMPILING)
        return merged_intervals(cpu["ts"].to_numpy()[hit].astype(float), cpu["end"].to_numpy()[hit].astype(float))
    return model.memo("compile_spans", compute)


def compile_us_in(model, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per [a, b): how much of it lies inside compile spans (us)."""
    s, e = compile_spans(model)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if not len(s) or not len(a):
        return np.zeros(len(a))
    # Clipped overlap with every span, summed through cumulative lengths over the spans each [a, b) meets.
    cum = np.concatenate([[0.0], np.cumsum(e - s)])
    i0 = np.searchsorted(e, a, side="right")          # first span ending after a
    i1 = np.searchsorted(s, b, side="left")           # spans starting before b: [i0, i1)
    out = cum[np.maximum(i1, i0)] - cum[i0]
    has = i1 > i0
    first = np.minimum(i0, len(s) - 1)
    last = np.maximum(i1 - 1, 0)
    out = out - np.where(has, np.clip(a - s[first], 0.0, None), 0.0)
    out = out - np.where(has, np.clip(e[last] - b, 0.0, None), 0.0)
    return np.clip(out, 0.0, None)


def compiled_versions(model) -> dict[int, list[int]]:
    """Frame -> the compiled versions its regions ran in the window, sorted ("Torch-Compiled Region: F/V")."""
    cpu = model.cpu
    if cpu.empty:
        return {}
    out: dict[int, set] = {}
    for name in cpu.loc[model.cpu_match(REGION.pattern), "name"].unique():
        m = REGION.match(str(name))
        out.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    return {f: sorted(v) for f, v in sorted(out.items())}


# A step that spends this share of itself compiling is a compile step.
COMPILE_STEP_SHARE = 0.5


def mark_compiling(model) -> list[dict]:
    """Steps that spent most of their time compiling, among the full ones: where they are fewer than half of
    them (a new shape now and then, an eval's first call), they are not the steady state and are marked
    partial, so medians leave them out, as warm-up steps are; where most steps compile, compiling is what
    the program does each step and they stay (recompile's finding). Returns [{step, compile_ms, kept}]."""
    steps = model.steps
    if steps.empty or not len(compile_spans(model)[0]):
        return []
    us = compile_us_in(model, steps["start"].to_numpy(), steps["end"].to_numpy())
    hit = (us >= COMPILE_STEP_SHARE * steps["dur"].to_numpy()) & ~steps["partial"].to_numpy(dtype=bool)
    full = int((~steps["partial"].to_numpy(dtype=bool)).sum())
    drop = bool(hit.any()) and 2 * int(hit.sum()) < full
    if drop:
        steps.loc[hit, "partial"] = True
    return [{"step": int(st), "compile_ms": round(float(u) / 1000, 3), "kept": not drop}
            for st, u in zip(steps["step"].to_numpy()[hit], us[hit])]


def compile_ms_by_step(model, steps: pd.DataFrame) -> dict[int, float]:
    """Step -> ms spent compiling in it, for the steps given (where any)."""
    if steps.empty:
        return {}
    us = compile_us_in(model, steps["start"].to_numpy(), steps["end"].to_numpy())
    return {int(st): round(float(u) / 1000, 3) for st, u in zip(steps["step"].to_numpy(), us) if u > 0}


LOOKUP = r"^TorchDynamo Cache Lookup$"
RECOMPILE_LIMIT = 8      # torch._dynamo.config.recompile_limit's default (torch 2.11)


def eager_calls(model) -> tuple[int, int]:
    """(calls into compiled code, those that ran eagerly): Dynamo's cache lookups, and those after which no
    compiled region ran before the thread's next lookup (no graph for the inputs, and none made: past the
    frame's recompile_limit, or a frame Dynamo skips). sample_traces/compile/h200_compileA/limit: 2 of 6."""
    cpu = model.cpu
    if cpu.empty:
        return 0, 0
    look = cpu[model.cpu_match(LOOKUP)]
    if look.empty:
        return 0, 0
    reg = cpu[model.cpu_match(REGION.pattern)]
    eager = 0
    for th, g in look.groupby("thread", sort=False):
        ts = np.sort(g["ts"].to_numpy(dtype=float))
        nxt = np.append(ts[1:], np.inf)
        r = np.sort(reg.loc[reg["thread"] == th, "ts"].to_numpy(dtype=float))
        eager += int((np.searchsorted(r, nxt, side="left") == np.searchsorted(r, ts, side="left")).sum())
    return int(len(look)), eager
