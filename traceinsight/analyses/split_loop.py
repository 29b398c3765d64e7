"""A loop that splits a batch by a data-dependent group, one sync per group: the mixture-of-experts dispatch
written `for e in experts: tok = (idx == e).nonzero()`, a per-class loss loop. Each turn sizes its selection on the
host (nonzero, masked_select, unique), then runs the same ops on it.

What removes those syncs is no torch.where in place of the nonzero: it is one batched turn for all the groups (a
fixed-capacity dispatch, a sort by group with one grouped matmul, a segment reduction). The batched turn runs the
same GPU work in fewer, larger kernels, and the CPU work (dispatch, launches) of one turn instead of one a group;
so does its backward. The forty-sixth set's measured dispatch fixes ran 1.8-2.9x where the syncs' idle alone
read 1.2x.

Found from the trace alone: the sync's op instances on the loop's thread at least LOOP_MIN times in a row, the same
op sequence between each two (its period); on autograd's thread, the backward's matching run, the same sequence
of backward functions repeated as many times (LOOP_MIN - 1 to one more, a period of at most BACKWARD_PERIOD times
the forward's). What the fix takes off the CPU is the turns after the first two, both ways (a batched turn makes
about two turns' ops), replayed as the sync's fix does the data-dependent ops' (fixes.Unblock, its spans and calls
all gone, the kernels kept).
"""
from __future__ import annotations

import re

import numpy as np

from .base import Context, calls_in, op_rows, outermost_ops
from .fixes import Unblock

# The ops that size a result from its data (the syncs a group split makes); .item() and a bool() of a tensor
# (aten::is_nonzero: a decode loop's end-of-sequence check, a per-block finite check) are no split.
SPLIT_OP = re.compile(r"aten::nonzero|masked_select|aten::unique|argwhere")
LOOP_MIN = 3
BACKWARD_PERIOD = 3
# The batched turn's CPU work, in the loop's turns: a fixed-capacity dispatch made about 30 ops a layer where a
# turn of the loop made 14 (the slot arithmetic, the scatter and the gather around its two batched matmuls).
KEPT = 2
# The verdict's words: the loop's CPU work, not the waits, is what costs.
LABEL = "CPU-bound in a loop over groups, a sync in each turn"


def turns(ctx: Context, blockers: list[int]) -> dict | None:
    """The fix that batches each split loop's turns (its spans: the turns past the first two, (thread, start,
    end)), their CPU time a step and what the report says of them; None where the syncs are no such loop."""
    cpu = ctx.model.cpu
    rows = np.asarray(blockers, dtype=np.int64)
    if not len(rows):
        return None
    ops = op_rows(cpu, rows)
    names = cpu["name"].to_numpy()
    ops = np.unique(ops[(ops >= 0) & np.array([bool(SPLIT_OP.search(str(names[o]))) for o in np.maximum(ops, 0)])])
    if not len(ops):
        return None
    ts, end, thread = cpu["ts"].to_numpy(), cpu["end"].to_numpy(), cpu["thread"].to_numpy()
    top, step_of = outermost_ops(ctx)
    spans, loops, periods, reps, back = [], 0, [], [], 0
    for s in ctx.full_steps:
        mine = ops[step_of[ops] == s]
        if len(mine) < LOOP_MIN:
            continue
        loop_thread = thread[mine[0]]
        here = top[step_of[top] == s]
        seq = here[thread[here] == loop_thread]
        found = _forward_runs(_codes(names[seq]), np.flatnonzero(np.isin(seq, mine)))
        for q, p, r in found:
            spans.append((str(loop_thread), float(ts[seq[q + KEPT * p]]), float(end[seq[q + r * p - 1]])))
            loops, periods, reps = loops + 1, periods + [p], reps + [r]
        if not found:
            continue
        # Autograd's thread(s) in this step: the backward's matching runs.
        for th in set(thread[here]) - {loop_thread}:
            bseq = here[thread[here] == th]
            for q, p, r in _periodic_runs(_codes(names[bseq]), min(periods), BACKWARD_PERIOD * max(periods),
                                          min(reps) - 1, max(reps) + 1):
                spans.append((str(th), float(ts[bseq[q + KEPT * p]]), float(end[bseq[q + r * p - 1]])))
                back += 1
    if not loops:
        return None
    n = max(1, len(ctx.full_steps))
    return {"fix": Unblock(tuple(int(b) for b in blockers), calls=calls_in(cpu, spans), spans=tuple(spans),
                           dispatch_share=1.0),
            "cpu_us_per_step": sum(b - a for _t, a, b in spans) / n,
            "evidence": {"loops_per_step": round(loops / n, 1), "groups_each": int(np.median(reps)),
                         "ops_each_turn": int(np.median(periods)), "backward_loops_per_step": round(back / n, 1)}}


def _codes(names: np.ndarray) -> np.ndarray:
    return np.unique(names.astype(str), return_inverse=True)[1]


def _forward_runs(codes: np.ndarray, at: np.ndarray) -> list[tuple[int, int, int]]:
    """(first position, period, turns) of each run of >= LOOP_MIN sync ops at one spacing p with the ops
    repeating at period p from the first turn's start (the ops before its sync) to the last turn's end."""
    out = []
    i = 0
    while i < len(at) - 1:
        p = int(at[i + 1] - at[i])
        j = i
        while j + 1 < len(at) and at[j + 1] - at[j] == p:
            j += 1
        a = int(at[i])
        r = j - i + 1
        if r >= LOOP_MIN and p >= 2:
            lo = a
            while lo > a - p + 1 and lo > 0 and codes[lo - 1] == codes[lo - 1 + p]:
                lo -= 1          # (a turn's ops before its sync: the mask it sizes)
            end = lo + r * p
            if end <= len(codes) and np.array_equal(codes[lo:end - p], codes[lo + p:end]):
                out.append((lo, p, r))
        i = j + 1 if j > i else i + 1
    return out


def _periodic_runs(codes: np.ndarray, p_min: int, p_max: int, r_min: int, r_max: int) -> list[tuple[int, int, int]]:
    """(first position, period, turns) of the stretches that repeat one sequence r_min..r_max times, the
    shortest such period first, no two overlapping."""
    taken = np.zeros(len(codes), dtype=bool)
    out = []
    for p in range(max(2, p_min // 2), min(p_max, len(codes) // 2) + 1):
        same = np.r_[codes[:-p] == codes[p:], False]
        # runs of `same` from a to b (exclusive): positions a..b+p-1 repeat with period p
        d = np.diff(np.r_[0, same.astype(np.int8), 0])
        for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
            r = (b - a) // p + 1
            if r_min <= r <= r_max and r >= 2 and not taken[a:a + r * p].any():
                taken[a:a + r * p] = True
                out.append((int(a), p, int(r)))
    return out


def advice(loop: dict, op_where: str, ev: dict, kernels: bool) -> tuple[str, str, dict]:
    """The fix's words, the finding's title and its evidence `ev` with the loop's, for a group loop (`op_where`: the
    sync's op and where it is called; `kernels`: the cost counts the data-dependent kernels' GPU time too)."""
    e, turns_us = loop["evidence"], loop["cpu_us_per_step"]
    ev = dict(ev, group_loop=dict(e, other_turns_cpu_ms_per_step=round(turns_us / 1000, 3)),
              measured_cost_is="the stalls' GPU idle (median per full step)" + (
                  " plus the data-dependent kernels' GPU time" if kernels else "") + " plus the CPU time of the loop's "
              "turns past the batched one's (profiled, mean per full step): what the fix targets")
    ways = "forward and backward" if e["backward_loops_per_step"] else "forward (no backward here)"
    fix = (f" Here the sync sizes each group of a loop over data-dependent groups ({e['loops_per_step']:g} such loops a "
           f"step, {e['groups_each']} groups each, {e['ops_each_turn']} ops a group: a mixture-of-experts dispatch, a "
           "per-class loop): what removes it is one batched turn for all the groups (a fixed-capacity dispatch with "
           "each item's slot from a cumsum, or the items sorted by group and one grouped matmul; a segment reduction), "
           f"which also takes the CPU work of the other turns, {ways} (counted in the estimate; their GPU work is "
           "kept). The syncs' own wait is the small part; a fixed-size nonzero (nonzero_static) alone would keep the "
           "loop.")
    # (what costs is the loop's CPU work: a review read "The CPU waits for the GPU in aten::nonzero_numpy" over 0.4 ms
    # of waiting and 62 ms of the loop's CPU work)
    title = (f"A loop over data-dependent groups, a sync in each turn ({op_where}): {e['loops_per_step']:g} loops a "
             f"step of {e['groups_each']} turns, the turns past a batched one's taking {turns_us / 1000:.2f} ms of CPU "
             "a step (profiled)")
    return fix, title, ev
