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

from .steps import cum_lengths, merged_intervals, overlap_many, step_at

# (The functions take the TraceModel that model.py builds, which calls mark_compiling: not imported here.)

# The outermost phases of a compile, forward and backward, and autotuning at a kernel's first run (which
# times every config of it on the GPU). Any "(dynamo_timed)" phase counts, so that a torch whose outer
# names differ is still read, except the CUDA-graph tree's (mode="reduce-overhead"): its recording is a capture
# (graph_capture's question) and cudagraphify.get_container runs on every call.
COMPILING = (r"^(dynamo|entire_frame_compile|entire_backward_compile|backend_compile|inductor_compile)$"
             r"|^(?!CUDAGraphNode|cudagraphify).*\(dynamo_timed\)$")
# "Torch-Compiled Region: 0/7": frame 0's eighth compiled version (its seventh recompile).
# A compiled region's id, frame/compile ("1/0"); under compiled autograd its graph's own id leads ("!0/1/0").
REGION = re.compile(r"^Torch-Compiled Region: (?:!\d+/)?(\d+)/(\d+)$")


def compile_spans(model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, cum_lengths), sorted and disjoint: where any thread was inside a compile phase."""
    def compute():
        cpu = model.cpu
        if cpu.empty:
            return np.zeros(0), np.zeros(0), np.zeros(1)
        hit = model.cpu_match(COMPILING)
        s, e = merged_intervals(cpu["ts"].to_numpy()[hit].astype(float), cpu["end"].to_numpy()[hit].astype(float))
        return s, e, cum_lengths(s, e)
    return model.memo("compile_spans", compute)


def compile_us_in(model, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per [a, b): how much of it lies inside compile spans (us)."""
    return overlap_many(*compile_spans(model), np.asarray(a, dtype=float), np.asarray(b, dtype=float))


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
    """(calls into compiled code, those that ran eagerly): Dynamo's cache lookups outside compiled regions, and
    those after which no compiled region ran before the thread's next lookup (no graph for the inputs, and none
    made: past the frame's recompile_limit, or a frame Dynamo skips). sample_traces/compile/h200_compileA/limit:
    2 of 6; cold: none (its two other lookups are inner frames' inside the first run of 0/0)."""
    cpu = model.cpu
    if cpu.empty:
        return 0, 0
    look = cpu[model.cpu_match(LOOKUP)]
    if look.empty:
        return 0, 0
    reg = cpu[model.cpu_match(REGION.pattern)]
    calls = eager = 0
    for th, g in look.groupby("thread", sort=False):
        mine = reg[reg["thread"] == th]
        rs, re_ = merged_intervals(mine["ts"].to_numpy(dtype=float), mine["end"].to_numpy(dtype=float))
        ts = np.sort(g["ts"].to_numpy(dtype=float))
        if not len(rs):             # (no region of a known id on this thread: every lookup ran eagerly)
            calls, eager = calls + len(ts), eager + len(ts)
            continue
        # A lookup inside a region is an inner frame's, made while compiled code ran (a first run's): not a call.
        k = np.searchsorted(rs, ts, side="right") - 1
        ts = ts[~((k >= 0) & (ts < re_[np.maximum(k, 0)]))]
        nxt = np.append(ts[1:], np.inf)
        r = np.sort(mine["ts"].to_numpy(dtype=float))
        calls += len(ts)
        eager += int((np.searchsorted(r, nxt, side="left") == np.searchsorted(r, ts, side="left")).sum())
    return calls, eager


# Compiled kernels launched with other grids in other steps: the inputs' shapes change (a new length every step
# under dynamic=True: 63-67% of the Triton kernels, 100% recompiling under dynamic=False; every fixed-shape
# compiled program of the matrix: 0%). At this share a compiled step's shapes are taken to vary.
SHAPES_VARY = 0.3


def shapes_vary(model) -> str | None:
    """How a compiled step shows that what it is called with changes from step to step, in the report's words,
    or None: among the steps that run the same compiled versions, its Triton kernels launch on other grids in
    other steps (grid_change_share: its input shapes change), or the full steps run 3 or more versions of a
    compiled frame (a graph each: a failed guard each time, a new shape the usual one)."""
    share = grid_change_share(model)
    if share is not None and share >= SHAPES_VARY:
        return f"{share:.0%} of its compiled kernels launch on other grids in other steps: its input shapes change"
    most = max((len(v) for v in _versions_by_step(model)[1].values()), default=0)
    if most >= 3:
        return (f"its steps run {most} compiled versions of one frame, a graph each: what it is called with "
                "changes (a new shape, the usual failed guard)")
    return None


def grid_change_share(model) -> float | None:
    """Of the Triton kernels launched in every full step of the largest group of steps that run the same
    compiled versions (at least 3 steps, 3 kernels), the share whose launch grids (as a sorted list per step)
    differ between those steps; None where that cannot be read. (The same versions: a recompile in the window
    makes a new graph whose kernels, of the same names, launch on other grids for the same shapes.)"""
    def compute():
        g, st = model.gpu, model.steps
        if g.empty or "grid" not in g:
            return None
        groups = _versions_by_step(model)[0]
        same = max(groups.values(), key=len, default=[])
        full = st[st["step"].isin(same).to_numpy()]
        k = g[(g["kind"] == "kernel").to_numpy() & (g["grid"].to_numpy() >= 0) & (g["launcher"].to_numpy() >= 0)
              & g["name"].str.startswith("triton_").to_numpy()]
        if len(full) < 3 or k.empty:
            return None
        step = step_at(full, k["ts"].to_numpy())
        k = k.assign(step=step)[step >= 0]
        per = k.groupby(["name", "step"])["grid"].agg(lambda x: tuple(sorted(x))).unstack().dropna()
        if per.shape[1] < 3 or len(per) < 3:
            return None
        return float(per.apply(lambda r: len(set(r)) > 1, axis=1).mean())
    return model.memo("grid_change_share", compute)


def after_recompile(model) -> dict | None:
    """Where a compile step was left out of the medians (mark_compiling) and the full steps after it run other
    compiled versions than those before it, for every call: the versions, and each side's median step (ms).
    (midshape: one new length under dynamic=None, and the steps after it, at the old length again, run 0/1:
    the new graph is dynamic and serves both, a slower program than 0/0.)"""
    left = [c["step"] for c in model.meta.get("compile_steps") or () if not c["kept"]]
    if not left:
        return None
    groups = _versions_by_step(model)[0]
    of = {s: names for names, steps in groups.items() for s in steps}
    before = [s for s in of if s < left[0]]
    after = [s for s in of if s > left[-1]]
    vb = set().union(*(of[s] for s in before)) if before else set()
    va = set().union(*(of[s] for s in after)) if after else set()
    if not (vb and va) or vb & va:
        return None
    dur = model.steps.set_index("step")["dur"]
    return {"before": sorted(vb), "after": sorted(va),
            "median_before_ms": round(float(dur.reindex(before).median()) / 1000, 3),
            "median_after_ms": round(float(dur.reindex(after).median()) / 1000, 3)}


def _versions_by_step(model) -> tuple[dict, dict]:
    """({versions run: [full steps]}, {frame: versions run in full steps}) from the Torch-Compiled Regions."""
    def compute():
        cpu, st = model.cpu, model.steps
        full = st[~st["partial"].to_numpy(dtype=bool)]
        reg = cpu[model.cpu_match(REGION.pattern)] if len(cpu) else cpu
        at = step_at(full, reg["ts"].to_numpy(), "cpu_start", "cpu_end") if len(reg) else np.zeros(0, dtype=int)
        by_step: dict[int, set] = {int(s): set() for s in full["step"]}
        frames: dict[int, set] = {}
        for name, s in zip(reg["name"], at):
            if s >= 0:
                by_step[int(s)].add(str(name))
                f, v = REGION.match(str(name)).groups()
                frames.setdefault(int(f), set()).add(int(v))
        groups: dict[frozenset, list] = {}
        for s, names in by_step.items():
            groups.setdefault(frozenset(names), []).append(s)
        return groups, frames
    return model.memo("versions_by_step", compute)


def while_compiling(model, cpu_rows: np.ndarray) -> np.ndarray:
    """Per cpu row (a runtime call): made inside a compile span (the autotuner's launches and syncs)."""
    cpu_rows = np.asarray(cpu_rows, dtype=np.int64)
    if not len(cpu_rows) or not len(compile_spans(model)[0]):
        return np.zeros(len(cpu_rows), dtype=bool)
    cpu = model.cpu
    ts = cpu["ts"].to_numpy(dtype=float)[cpu_rows]
    return compile_us_in(model, ts, ts + 1e-3) > 0
