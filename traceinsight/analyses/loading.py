"""Loading in the training loop (DataLoader num_workers=0), as host_bound reads it: how long a batch takes
without the profiler, the batch workers would hand back, the worker counts to replay, and the loader that runs
beside longer GPU work (a hidden finding, Finding.hidden)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..trace.facts import WORKER_WAIT
from ..trace.profiler_cost import PY_CALL_FLOOR_US, recorded_in
from .base import Context, Finding
from .fixes import ADVISED_WORKERS, LOADER_MS_PER_MB_RANGE, WORKER_COUNTS, RemoveHostWork

# The loader fix's advice before the plan names the worker count (estimate/rank.py fills it in).
WORKERS_UNNAMED = "num_workers=N,"
PLAN_SAYS_WORKERS = ": the fix plan says how many workers keep up"
# A loop whose workers already feed it: how many more, said once the plan knows the step they must keep up with.
WORKERS_RAISE = "Raise num_workers (towards the CPU cores free for it)"
CHEAPER_WORK = ("make the per-sample transform cheaper (profile a worker, or time the Dataset's __getitem__ alone), or "
                "move augmentation onto the GPU")
WORKERS_ADVICE = f"{WORKERS_RAISE}, {CHEAPER_WORK}"


# Host-bound idle below this share of the step is no finding of its own: the loader (if any) is hidden.
HIDDEN_IDLE_SHARE = 0.02
# A loader in the loop's thread is worth offering to the plan when it takes this share of the step.
HIDDEN_LOADING_SHARE = 0.2


def hidden_loader(ctx: Context, lost: float, kind: str) -> list[Finding]:
    """The training loop loads its batches itself (DataLoader num_workers=0), but the GPU's work is longer
    and the loading runs beside it: no idle now, and no saving alone. Once a fix shortens the GPU's work
    (TF32 in a step of fp32 matmuls) the loading sets the step, and moving it into workers pays (the
    thirty-eighth held-out set: TF32 1.4x, workers alone 1.1x, both 4.9x). A finding the plan may place
    after the ranked fixes (Finding.hidden)."""
    model = ctx.model
    if model.cpu_match(WORKER_WAIT).any() or not len(ctx.full_steps):
        return []
    st = model.steps[model.steps["step"].isin(ctx.full_steps)]
    a, b = st["cpu_start"].to_numpy(), st["cpu_end"].to_numpy()
    best = max(((th, ctx.host.input_time(th, a, b)) for th in ctx.host.input), key=lambda t: t[1].sum(),
               default=None)
    if best is None or float(np.median(best[1])) < HIDDEN_LOADING_SHARE * ctx.median_step_us:
        return []
    th, per_step = best
    act, rows = ctx.host.input[th], model.thread_rows().get(th)
    # Without the profiler's cost (as unprofiled_loading): the loading's intervals in each step, all at once.
    cut = np.zeros(len(a))
    if rows is not None and len(rows):
        pairs = [(k, i) for k in range(len(a)) for i in np.flatnonzero((act.s < b[k]) & (act.e > a[k]))]
        if pairs:
            step, i = np.array(pairs).T
            cut = np.bincount(step, weights=_recorded_cut(model, np.maximum(act.s[i], a[step]),
                                                          np.minimum(act.e[i], b[step]), th), minlength=len(a))
    loading = float(np.median(per_step - np.minimum(cut, MAX_RECORDED_SHARE * per_step)))
    mb = loader_batch_mb(ctx)
    fix_ = RemoveHostWork(loading_us=loading, batch_mb=mb, workers=ADVISED_WORKERS,
                          bounds=LOADER_MS_PER_MB_RANGE if mb else None)
    ev = {"loading_ms_per_batch_unprofiled": round(loading / 1000, 3), "batch_mb": round(mb, 3),
          "loading_ms_per_step_profiled": round(float(np.median(per_step)) / 1000, 3),
          "idle_ms_per_step": round(lost / 1000, 3)}
    fix = (f"Move the input pipeline off the training loop's critical path: DataLoader({WORKERS_UNNAMED} "
           f"pin_memory=True, persistent_workers=True, prefetch_factor=2) ({loading / 1000:.1f} ms of loading per "
           f"batch, the profiler's own cost in it taken out, and a {mb:.1f} MB batch to hand back to the loop "
           f"each step{PLAN_SAYS_WORKERS}). It saves nothing until the fixes before it in the plan shorten the "
           "GPU's work below the loading.")
    return [Finding(
        kind=kind,
        title=(f"The training loop loads each batch itself (DataLoader num_workers=0): about {loading / 1000:.1f} ms "
               "per step, hidden behind the GPU's work until a fix shortens it"),
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["host_bound"].sum()), fix=fix, confidence="medium",
        evidence=ev, fixes=(fix_,), alternatives=fewer_workers(fix_), hidden=True)]


def unprofiled_loading(ctx: Context, gaps) -> float:
    """The loading per step without the profiler: each full step's host-bound idle less the share of its
    gaps' time that recording their events cost the CPU (trace/profiler_cost.py; at most
    MAX_RECORDED_SHARE), the median over full steps. Per step, not one share over the window: a step the
    host disturbed is long without more events, and its low share taken off the median step had left the
    loading above the un-profiled step (11.1 ms a batch in a 10.6 ms step, an expert review)."""
    rows_of = ctx.model.thread_rows()
    spent = pd.Series(0.0, index=ctx.full_steps)
    span = pd.Series(0.0, index=ctx.full_steps)
    for th, g in gaps.groupby("thread"):
        rows = rows_of.get(th)
        if rows is None or not len(rows):
            continue
        length = (g["end"] - g["start"]).to_numpy()
        cut = _recorded_cut(ctx.model, g["start"].to_numpy(), g["end"].to_numpy(), th)
        step = g["step"].to_numpy()
        spent = spent.add(pd.Series(cut).groupby(step).sum(), fill_value=0.0)
        span = span.add(pd.Series(length).groupby(step).sum(), fill_value=0.0)
    share = (spent / span.where(span > 0)).fillna(0.0).clip(upper=MAX_RECORDED_SHARE)
    return ctx.per_step_median(ctx.per_step["host_bound"] * (1.0 - share.reindex(ctx.per_step.index).fillna(0.0)))


# The profiler's cost can be most of a gap, never all of it (the work it recorded ran too).
MAX_RECORDED_SHARE = 0.9


def _recorded_cut(model, starts: np.ndarray, ends: np.ndarray, thread: str) -> np.ndarray:
    """What recording cost the CPU inside each window of one thread, as much of it as comes off: each Python
    call keeps its least un-profiled cost, as the replay's cuts do (PY_CALL_FLOOR_US)."""
    cost, calls = recorded_in(model, starts, ends, thread)
    return np.minimum(cost, np.maximum(0.0, (ends - starts) - PY_CALL_FLOOR_US * calls))


def loader_batch_mb(ctx: Context) -> float:
    """The batch a DataLoader hands the loop, as the bytes it copies to the GPU per step (median over full
    steps): what worker processes would pass back through shared memory."""
    g = ctx.model.gpu
    cp = g[(g["kind"] == "memcpy") & (g["copy_dir"] == "HtoD")]
    return ctx.per_step_median(cp.groupby(ctx.step_of(cp["ts"].to_numpy()))["bytes"].sum()) / 1e6


def fewer_workers(fx: RemoveHostWork) -> tuple:
    """Loading moved into DataLoader workers: the step with fewer of them than advised (fixes.WORKER_COUNTS),
    each a range for the batch's hand-off. (The replay drops those that save what the advice does.)"""
    if not fx.loading_us:
        return ()
    return tuple((f"num_workers={n}", f"DataLoader(num_workers={n})",
                  (replace(fx, workers=n),)) for n in WORKER_COUNTS)
