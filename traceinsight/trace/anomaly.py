"""Autograd's anomaly detection inside the window (torch.autograd.set_detect_anomaly(True), or detect_anomaly()).

With it on, autograd checks every backward node's outputs for NaN: `isnan(out)._is_any_true().item()`, called by the
engine itself, so the three ops sit right under its `autograd::engine::evaluate_function: ...` range, with no user
line: a device-to-host read and a sync after every node. And every node made in the forward pass stores the Python
stack that made it (torch.fx.traceback.format_stack, run inside the op that made the node): tens of microseconds of
host time in each such op, which a with_stack trace shows as Python frames under it and a default trace only as the
op's own time. (sample_traces/matrix/h100_clean62*: a 4-layer tagger 41-66 ms a step with it on, 6.7-8.3 off; 296
checks and 229 stored stacks a step, the stack 80 us an op.)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .steps import cum_lengths, merged_intervals, overlap_many, step_at

# (names matched through model.cpu_match: once per distinct name, not per event of a million-event trace)
CHECK_OPS = r"^aten::(isnan|_is_any_true|item)$"
ENGINE_FN = r"^autograd::engine::evaluate_function: "
STEADY_SHARE = 0.5            # of the full steps: checking in this many is what the program does each step
# An op that stored a stack took this much more of its own time than the median op of the forward pass, at least.
STACK_MIN_US = 15.0


def checks(model) -> pd.DataFrame:
    """One row per checked node: thread, start, end (its first check op's start to its last's end), syncs (one per
    output checked: its `item`), step."""
    def compute():
        cpu = model.cpu
        cols = ["thread", "start", "end", "syncs", "step"]
        if cpu.empty or "parent" not in cpu:
            return pd.DataFrame(columns=cols)
        rows = np.flatnonzero(model.cpu_match(CHECK_OPS) & (cpu["kind"] == "op").to_numpy())
        if not len(rows):
            return pd.DataFrame(columns=cols)
        parent = cpu["parent"].to_numpy()[rows]
        engine = (parent >= 0) & model.cpu_match(ENGINE_FN)[np.maximum(parent, 0)]
        rows, parent = rows[engine], parent[engine]
        if not len(rows):
            return pd.DataFrame(columns=cols)
        t = pd.DataFrame({"parent": parent, "thread": cpu["thread"].to_numpy()[rows],
                          "start": cpu["ts"].to_numpy(dtype=float)[rows], "end": cpu["end"].to_numpy(dtype=float)[rows],
                          "item": cpu["name"].to_numpy()[rows] == "aten::item"})
        out = t.groupby("parent").agg(thread=("thread", "first"), start=("start", "min"), end=("end", "max"),
                                      syncs=("item", "sum"))
        out = out.reset_index(drop=True)
        out["step"] = step_at(model.steps, out["start"].to_numpy(), "cpu_start", "cpu_end") if len(model.steps) \
            else -1
        return out.sort_values("start", kind="stable").reset_index(drop=True)
    return model.memo("anomaly_checks", compute)


def steady(model, full_steps) -> bool:
    """Autograd checked for NaN in most of these full steps."""
    c = checks(model)
    full = set(int(x) for x in full_steps)
    return bool(full) and len(set(c["step"].astype(int)) & full) >= STEADY_SHARE * len(full)


def stacks(model) -> dict:
    """The forward passes' stored stacks: per step with checks, the ops of the loop thread before its backward began
    that took the most time of their own (as many as the step's backward had nodes that were not a parameter's
    AccumulateGrad: one stack each). Returns ops (cpu rows), their own time, the forward's other ops' median own time
    (what an op costs without a stack: `floor_us`) and per step how many."""
    def compute():
        cpu = model.cpu
        empty = {"ops": np.zeros(0, dtype=np.int64), "self_us": np.zeros(0), "floor_us": 0.0, "per_step": {}}
        c = checks(model)
        if c.empty or model.steps.empty:
            return empty
        kind = cpu["kind"].to_numpy()
        ts, end, thread = cpu["ts"].to_numpy(dtype=float), cpu["end"].to_numpy(dtype=float), cpu["thread"].to_numpy()
        parent = cpu["parent"].to_numpy()
        # Own time: the op's less its ops' and calls' (a with_stack trace's Python frames under it are the stack's).
        child = np.flatnonzero(np.isin(kind, ("op", "runtime")) & (parent >= 0))
        own = (end - ts) - np.bincount(parent[child], weights=(end - ts)[child], minlength=len(cpu))
        fn = model.cpu_match(ENGINE_FN)
        fn_step = step_at(model.steps, ts[fn], "cpu_start", "cpu_end")
        nodes = pd.Series(~model.cpu_match("AccumulateGrad")[fn]).groupby(fn_step).sum()
        first_bw = pd.Series(ts[fn]).groupby(fn_step).min()
        loop = cpu.loc[cpu["is_step"].to_numpy(), "thread"]
        loop = loop.mode().iloc[0] if len(loop) else None
        cand = np.flatnonzero((kind == "op") & (thread == loop))     # (the loop thread's ops, in row order)
        picked, rest, per_step = [], [], {}
        for st in model.steps.itertuples():
            n = int(nodes.get(st.step, 0))
            if n <= 0 or st.step not in first_bw.index:
                continue
            m = cand[(ts[cand] >= st.cpu_start) & (ts[cand] < first_bw[st.step])]
            order = m[np.argsort(-own[m], kind="stable")]
            picked.append(order[:n])
            rest.append(order[n:])
            per_step[int(st.step)] = int(min(n, len(m)))
        if not picked:
            return empty
        ops, others = np.concatenate(picked), np.concatenate(rest)
        floor = float(np.median(own[others])) if len(others) else 0.0
        keep = own[ops] - floor >= STACK_MIN_US
        return {"ops": ops[keep], "self_us": own[ops[keep]], "floor_us": floor,
                "per_step": per_step}
    return model.memo("anomaly_stacks", compute)


def _spans(model):
    """(checks' merged spans, stored stacks' ops' spans, those ops' child ops' spans, the stacks' share of their ops'
    own time): each as (starts, ends, cum_lengths)."""
    def compute():
        c = checks(model)
        a, b = merged_intervals(c["start"].to_numpy(dtype=float), c["end"].to_numpy(dtype=float))
        st = stacks(model)
        cpu = model.cpu
        ts, end = cpu["ts"].to_numpy(dtype=float), cpu["end"].to_numpy(dtype=float)
        ops = st["ops"]
        oa, ob = merged_intervals(ts[ops], end[ops])
        parent = cpu["parent"].to_numpy()
        kids = np.flatnonzero(np.isin(parent, ops) & (cpu["kind"] == "op").to_numpy() & ~np.isin(np.arange(len(cpu)), ops))
        ka, kb = merged_intervals(ts[kids], end[kids])
        total = float(st["self_us"].sum())
        share = max(0.0, 1.0 - st["floor_us"] * len(ops) / total) if total > 0 else 0.0
        return (a, b, cum_lengths(a, b)), (oa, ob, cum_lengths(oa, ob)), (ka, kb, cum_lengths(ka, kb)), share
    return model.memo("anomaly_spans", compute)


def anomaly_us_in(model, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per [a, b): how much of it is anomaly detection's host time (us): inside a check, or a stored stack (an op's own
    time beyond what the forward's other ops take)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(checks(model)):
        return np.zeros(len(a))
    chk, ops, kids, share = _spans(model)
    stack = np.maximum(0.0, overlap_many(*ops, a, b) - overlap_many(*kids, a, b))
    return overlap_many(*chk, a, b) + share * stack


def while_checking(model, cpu_rows: np.ndarray) -> np.ndarray:
    """Per cpu row (a runtime call): made by a NaN check (its kernels' launches, the copy of the answer, the sync)."""
    cpu_rows = np.asarray(cpu_rows, dtype=np.int64)
    if not len(cpu_rows) or not len(checks(model)):
        return np.zeros(len(cpu_rows), dtype=bool)
    ts = model.cpu["ts"].to_numpy(dtype=float)[cpu_rows]
    return overlap_many(*_spans(model)[0], ts, ts + 1e-3) > 0
