"""Steps and idle gaps: the step windows (ProfilerStep ranges, following the GPU when it lags), the
GPU idle gaps inside them, and each step's GPU busy / idle accounting."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

# A step marker: ProfilerStep#<n>; other names that start so ("ProfilerStep#", "#-3", a 30-digit number)
# are ordinary annotations (they had crashed the step table).
STEP_NAME = re.compile(r"^ProfilerStep#(\d{1,18})$")


def full_step_mask(partial: pd.Series) -> np.ndarray:
    """Which steps medians are taken over: the complete ones, or all when every step is partial."""
    full = ~partial.to_numpy(dtype=bool)
    return full if full.any() else np.ones(len(full), dtype=bool)


def interval_of(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Index of the [start, end) interval (sorted by start, disjoint) each timestamp falls in, -1 if none."""
    if not len(starts):
        return np.full(len(ts), -1)
    k = np.searchsorted(starts, ts, side="right") - 1
    return np.where((k >= 0) & (ts < ends[np.maximum(k, 0)]), k, -1)


def starts_inside(ts: np.ndarray, end: np.ndarray, marked: np.ndarray, groups) -> np.ndarray:
    """Per row: it starts inside one of the marked rows' [ts, end) ranges of its own group (`groups`: the row
    indices of each thread), as nested calls do."""
    out = np.zeros(len(ts), dtype=bool)
    for rows in groups:
        r = rows[marked[rows]]
        if len(r):
            s, e = merged_intervals(ts[r], end[r])
            out[rows] = interval_of(ts[rows], s, e) >= 0
    return out


def step_at(steps: pd.DataFrame, ts: np.ndarray, start_col: str = "start", end_col: str = "end") -> np.ndarray:
    """Step number of each timestamp by the steps' [start_col, end_col) windows (-1 outside all)."""
    if steps.empty:
        return np.full(len(ts), -1)
    k = interval_of(ts, steps[start_col].to_numpy(), steps[end_col].to_numpy())
    return np.where(k >= 0, steps["step"].to_numpy()[np.maximum(k, 0)], -1)


def find_steps(cpu: pd.DataFrame, gpu: pd.DataFrame, ranges: str | None = None) -> tuple[pd.DataFrame, str]:
    """The step windows and where they came from. `ranges` (analyze --step-ranges): a regex the program's own
    ranges' names must match, whose outermost matches are the steps, markers or not."""
    ann = cpu[cpu["is_step"].to_numpy()]
    if ranges and (own := _range_steps(cpu, ranges)) is not None:
        steps, source = own, USER_RANGES
    elif len(ann):
        num = ann["name"].str.extract(STEP_NAME)[0]
        ann = ann[num.notna()]
        steps = pd.DataFrame({"step": num[num.notna()].astype(int).to_numpy(),
                              "start": ann["ts"].to_numpy(), "end": ann["end"].to_numpy()})
        # Some exporters repeat a step (e.g. one per thread); keep the widest range per step number.
        steps = (steps.groupby("step", as_index=False).agg(start=("start", "min"), end=("end", "max"))
                 .sort_values("start").reset_index(drop=True))
        source = "ProfilerStep"
    elif (opt := _optimizer_steps(cpu)) is not None:
        steps, source = opt, OPTIMIZER_STEPS
    else:
        ends = [df["end"].max() for df in (cpu, gpu) if len(df)]
        steps = pd.DataFrame({"step": [0], "start": [0.0], "end": [float(max(ends))]})
        source = "whole trace"
    steps["dur"] = steps["end"] - steps["start"]
    return steps, source


# Without ProfilerStep markers (a profile() with no schedule writes none), a training loop's iterations still
# show: torch.optim records one Optimizer.step#<class>.step range per optimizer step. Step k then runs from the end
# of optimizer step k to the end of step k+1 (as `traceinsight record` cuts its own steps); the stretch before the
# first one ends is step 0, partial (the middle of an iteration, or the program's start: a whole-run profile of a
# conv net on an H200 put 1.1 s of CUDA start-up and first runs in it, and read the GPU-bound loop as launch-bound).
OPTIMIZER_STEPS = "Optimizer.step"
OPTIMIZER_STEP = r"^Optimizer\.step#"
# The program's own ranges (user annotations, record_function), chosen by name with analyze --step-ranges: a
# benchmark that marks its warm-up and its measured iteration (PARAM's "[param|...|measure|forward]") but not
# ProfilerStep had been read as one 43 s window, CUDA start-up and all.
USER_RANGES = "your ranges"
STEP_SOURCES = ("ProfilerStep", OPTIMIZER_STEPS, USER_RANGES)     # sources whose steps are the loop's iterations


def _range_steps(cpu: pd.DataFrame, pattern: str) -> pd.DataFrame | None:
    """The outermost op or annotation ranges whose names match `pattern`, in time order, as steps 1..n (a range
    that overlaps an earlier one is dropped); None where none matches."""
    ranges = cpu[((cpu["kind"] == "op") | (cpu["kind"] == "annotation")).to_numpy() & (cpu["dur"].to_numpy() > 0)]
    codes, names = pd.factorize(ranges["name"])          # (the pattern tried once per distinct name)
    rx = re.compile(pattern)
    hit = np.array([bool(rx.search(str(n))) for n in names] + [False])[codes]
    if not hit.any():
        return None
    r = ranges.loc[hit, ["ts", "end"]].sort_values(["ts", "end"], ascending=[True, False])
    ts, end = r["ts"].to_numpy(dtype=float), r["end"].to_numpy(dtype=float)
    keep, kept_end = np.zeros(len(ts), dtype=bool), -np.inf
    for i in range(len(ts)):         # (inside or across a range already kept: not a step of its own)
        if ts[i] >= kept_end:
            keep[i], kept_end = True, end[i]
    return pd.DataFrame({"step": np.arange(1, int(keep.sum()) + 1), "start": ts[keep], "end": end[keep]})


def _optimizer_steps(cpu: pd.DataFrame) -> pd.DataFrame | None:
    ann = cpu[(cpu["kind"] == "annotation").to_numpy() & cpu["name"].str.match(OPTIMIZER_STEP).to_numpy()]
    if ann.empty:
        return None
    name = ann["name"].value_counts().index[0]          # (two optimizers: the first's steps)
    ends = np.sort(ann.loc[ann["name"] == name, "end"].to_numpy(dtype=float))
    if len(ends) < 3:
        return None
    starts = np.concatenate([[min(0.0, float(cpu["ts"].min()))], ends[:-1]])
    return pd.DataFrame({"step": np.arange(len(ends)), "start": starts, "end": ends,
                         "beyond_data": np.arange(len(ends)) == 0})


# A step that runs on past every other recorded event by more than this share of itself (and
# BEYOND_MIN_US) ends where the data does: the rest is not in the trace (the profiler's window closed
# while the step's annotation stayed open), not idle.
BEYOND_SHARE = 0.5
BEYOND_MIN_US = 1000.0


def clip_to_data(steps: pd.DataFrame, cpu: pd.DataFrame, gpu: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Steps cut at the last recorded event where they run far past it (triton_example: a 13.3 s
    ProfilerStep whose events stop 1.7 ms in); they are partial. Returns the steps and what was cut, in words."""
    other = cpu.loc[~cpu["is_step"].to_numpy(), "end"] if len(cpu) else cpu["end"]
    last = max(float(other.max()) if len(other) else -np.inf, float(gpu["end"].max()) if len(gpu) else -np.inf)
    if not np.isfinite(last):
        return steps, []
    over = steps["end"].to_numpy() - last
    cut = (over > BEYOND_MIN_US) & (over > BEYOND_SHARE * steps["dur"].to_numpy())
    if not cut.any():
        return steps, []
    said = [f"step {int(s)} runs {d / 1000:.1f} ms but the trace's events end {(last - a) / 1000:.2f} ms into it "
            "(the profiler stopped recording first): it is counted to the last event, as a partial step"
            for s, a, d in zip(steps["step"][cut], steps["start"][cut], steps["dur"][cut])]
    steps = steps.copy()
    steps.loc[cut, "end"] = np.maximum(last, steps.loc[cut, "start"])
    steps["dur"] = steps["end"] - steps["start"]
    steps["beyond_data"] = cut | (steps["beyond_data"].to_numpy(dtype=bool) if "beyond_data" in steps else False)
    return steps, said


def mark_partial(steps: pd.DataFrame, source: str) -> pd.DataFrame:
    steps["partial"] = steps["beyond_data"].to_numpy(dtype=bool) if "beyond_data" in steps else False
    steps = steps.drop(columns=["beyond_data"], errors="ignore")
    if source == "ProfilerStep" and len(steps) >= 2:
        # The profiler often cuts the last step short when it stops; it would skew the medians.
        med = steps["dur"].iloc[:-1].median()
        if steps["dur"].iloc[-1] < 0.5 * med:
            steps.loc[steps.index[-1], "partial"] = True
    return steps


def mark_warmup(steps: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    """Leading steps far slower than the rest (cudnn autotuning, allocator growth, lazy init, graph
    capture) are not the steady state: they are marked partial, so medians leave them out."""
    steps["warmup"] = False
    full = steps.index[~steps["partial"].to_numpy()]
    out: list[int] = []
    if len(full) < 3:
        return steps, out
    d = steps.loc[full, "dur"].to_numpy()
    # The CPU side must be slow too: a first window that only takes in GPU work launched before the
    # trace began (a backlog) is long on the GPU side, yet the program's step was not.
    c = (steps.loc[full, "cpu_end"] - steps.loc[full, "cpu_start"]).to_numpy()

    def outlier(x, k):
        rest = x[k + 1:]
        med = float(np.median(rest))
        mad = 1.4826 * float(np.median(np.abs(rest - med)))
        return x[k] > 1.5 * med and x[k] > med + 5 * mad

    for k in range(min(2, len(full) - 2)):  # at most the first two steps, and at least two remain
        if outlier(d, k) and outlier(c, k):
            out.append(int(steps.at[full[k], "step"]))
        else:
            break
    if out:
        sel = steps["step"].isin(out)
        steps.loc[sel, "warmup"] = True
        steps.loc[sel, "partial"] = True
    return steps, out


# A first activity that starts this long after its launch call returned was queued behind other work.
QUEUED_US = 100.0


def drop_leading_idle(gaps: pd.DataFrame, steps: pd.DataFrame, gpu: pd.DataFrame, cpu: pd.DataFrame,
                      source: str) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """Idle before a device's first recorded GPU activity is not known to be idle: work launched before
    the trace began may have been running (CUPTI records activities that start inside the window).
    Drop that gap when the trace has no step markers or the CPU sat in a blocking call across it; the
    step's window then starts at that first activity (the time before it is neither idle nor busy)."""
    if gaps.empty or gpu.empty:
        return gaps, steps, 0.0
    drop = np.zeros(len(gaps), dtype=bool)
    blocking = cpu[(cpu["rkind"] == "sync").to_numpy()] if len(cpu) else cpu
    for dev, g in gpu.groupby("device"):
        first = float(g["ts"].min())
        lead = (gaps["device"].to_numpy() == dev) & (np.abs(gaps["end"].to_numpy() - first) < 1e-6)
        if not lead.any():
            continue
        waiting = len(blocking) and bool(((blocking["ts"].to_numpy() < first) &
                                         (blocking["end"].to_numpy() >= first)).any())
        # Launched inside the trace and started right after: the CPU was getting it ready, so that idle
        # is real. Started long after its launch: it queued behind work the trace did not record.
        lr = int(g.loc[g["ts"].idxmin(), "launcher"]) if "launcher" in g else -1
        queued = lr >= 0 and first - float(cpu["end"].iat[lr]) > QUEUED_US
        if waiting or (source != "ProfilerStep" and (queued or lr < 0)):
            drop |= lead
    excluded = float(gaps.loc[drop, "dur"].sum())
    if drop.any():
        steps = steps.copy()
        for step, t in gaps[drop].groupby("step")["end"].min().items():
            sel = steps["step"] == step
            steps.loc[sel, "start"] = t
            steps.loc[sel, "dur"] = steps.loc[sel, "end"] - t
    return gaps[~drop].reset_index(drop=True), steps, excluded


def gpu_aware_bounds(steps: pd.DataFrame, cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """Move step boundaries to where the GPU finished the previous step's work, when it lags.

    When the GPU is the bottleneck the CPU runs steps ahead: ProfilerStep ranges on the CPU are short
    and say nothing about the real step time. A step's window starts at the later of its CPU start
    and the end of the GPU work the previous step issued, and ends where the next one starts; so a
    step lasts as long as its slower side. The CPU ranges stay in cpu_start / cpu_end.
    """
    steps = steps.copy()
    steps["cpu_start"], steps["cpu_end"] = steps["start"], steps["end"]
    if gpu.empty or len(steps) == 0 or (gpu["launcher"] < 0).all():
        return steps
    g = gpu[gpu["launcher"] >= 0]
    lts = cpu["ts"].to_numpy()[g["launcher"].to_numpy()]
    cs, ce = steps["cpu_start"].to_numpy(), steps["cpu_end"].to_numpy()
    k = np.searchsorted(cs, lts, side="right") - 1
    inside = (k >= 0) & (lts < ce[np.maximum(k, 0)])
    done = pd.Series(g["end"].to_numpy()[inside]).groupby(k[inside]).max()
    gpu_done = np.full(len(steps), -np.inf)
    gpu_done[done.index.to_numpy()] = done.to_numpy()
    start = cs.copy()
    start[1:] = np.maximum(cs[1:], gpu_done[:-1])
    end = np.append(start[1:], max(ce[-1], gpu_done[-1]))
    steps["start"], steps["end"] = start, end
    steps["dur"] = steps["end"] - steps["start"]
    return steps


def merged_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals, as sorted disjoint (starts, ends). Vectorised."""
    if len(starts) == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    out_e = np.append(run_end[idx[1:] - 1], run_end[-1])
    return out_s, out_e


def idle_gaps(gpu: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Idle stretches per device inside each step window, with the activities on either side."""
    cols = ["device", "step", "start", "end", "dur", "next_gpu", "prev_gpu"]
    frames = []
    for dev, g in gpu.groupby("device", sort=True):
        st, en = merged_intervals(g["ts"].to_numpy(), g["end"].to_numpy())
        # Complement of the busy blocks on the whole line: (-inf, st0), (en0, st1), ..., (en_last, inf).
        idle_s = np.concatenate([[-np.inf], en])
        idle_e = np.concatenate([st, [np.inf]])
        for step, w0, w1 in steps[["step", "start", "end"]].itertuples(index=False):
            lo = np.searchsorted(idle_e, w0, side="right")
            hi = np.searchsorted(idle_s, w1, side="left")
            if hi <= lo:
                continue
            s = np.maximum(idle_s[lo:hi], w0)
            e = np.minimum(idle_e[lo:hi], w1)
            keep = e > s
            frames.append((dev, step, s[keep], e[keep]))
    if not frames:
        return pd.DataFrame(columns=cols)
    gaps = pd.DataFrame({
        "device": np.concatenate([np.full(len(f[2]), f[0], dtype=np.int64) for f in frames]),
        "step": np.concatenate([np.full(len(f[2]), f[1], dtype=np.int64) for f in frames]),
        "start": np.concatenate([f[2] for f in frames]),
        "end": np.concatenate([f[3] for f in frames]),
    })
    gaps["dur"] = gaps["end"] - gaps["start"]
    gaps["next_gpu"] = -1
    gaps["prev_gpu"] = -1
    # The activity that ends each gap (first to start at its end) and the last one to end before it.
    for dev, g in gpu.groupby("device", sort=True):
        sel = (gaps["device"] == dev).to_numpy()
        by_start = g.sort_values("ts", kind="stable")
        by_end = g.sort_values("end", kind="stable")
        nxt = np.searchsorted(by_start["ts"].to_numpy(), gaps.loc[sel, "end"].to_numpy() - 1e-6, side="left")
        prv = np.searchsorted(by_end["end"].to_numpy(), gaps.loc[sel, "start"].to_numpy() + 1e-6,
                              side="right") - 1
        gaps.loc[sel, "next_gpu"] = np.where(nxt < len(g), by_start.index.to_numpy()[np.minimum(nxt, len(g) - 1)], -1)
        gaps.loc[sel, "prev_gpu"] = np.where(prv >= 0, by_end.index.to_numpy()[np.maximum(prv, 0)], -1)
    return gaps[cols].reset_index(drop=True)


def step_gpu_accounting(steps: pd.DataFrame, gpu: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """GPU idle per step = sum of gap lengths (summed over devices, so divide by device count)."""
    steps = steps.copy()
    devs = sorted(gpu["device"].unique()) if len(gpu) else []
    steps["n_devices"] = len(devs)
    if not devs:
        steps["gpu_idle"] = steps["dur"]
        steps["gpu_busy"] = 0.0
        return steps
    idle = gaps.groupby("step")["dur"].sum() if len(gaps) else pd.Series(dtype=float)
    steps["gpu_idle"] = steps["step"].map(idle).fillna(0.0).to_numpy() / len(devs)
    steps["gpu_busy"] = steps["dur"] - steps["gpu_idle"]
    return steps


def cum_lengths(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """[0, len0, len0 + len1, ...] of intervals (s, e): what overlap_many takes (infinite or missing ends: 0)."""
    with np.errstate(invalid="ignore"):
        lens = np.nan_to_num(e - s, posinf=0.0, nan=0.0)
    return np.concatenate([[0.0], np.cumsum(lens)])


def overlap_many(s: np.ndarray, e: np.ndarray, cum: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of each [a_k, b_k) covered by the disjoint sorted intervals (s, e). Vectorised.

    Infinite ends (the open stretches before a thread's first op and after its last) are clipped
    to the query, so they count exactly their overlap.
    """
    n = len(s)
    if n == 0:
        return np.zeros(len(a))
    i = np.searchsorted(e, a, side="right")      # first interval ending after a
    j = np.searchsorted(s, b, side="left")       # first interval starting at/after b
    valid = j > i
    ii = np.minimum(i, n - 1)
    jj = np.maximum(j - 1, 0)
    total = np.zeros(len(a))
    single = valid & (i == j - 1)
    many = valid & ~single
    # One interval: its overlap directly (also right for infinite ends).
    total[single] = (np.minimum(e[ii], b) - np.maximum(s[ii], a))[single]
    if many.any():
        first = np.minimum(e[ii], b) - np.maximum(s[ii], a)
        last = np.minimum(e[jj], b) - np.maximum(s[jj], a)
        middle = cum[np.maximum(j - 1, 0)] - cum[np.minimum(i + 1, n)]
        total[many] = (first + last + middle)[many]
    return np.maximum(total, 0.0)
