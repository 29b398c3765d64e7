"""collective_wait: compute waits on collectives (NCCL) that are not hidden behind compute."""
from __future__ import annotations


from . import collective_speed
from .base import Context, Finding, KindSpec
from .exposed_communication import overlap_advice
from .fixes import NoPeerWait

# Replayed in a job, where the other ranks' traces say how long each collective waited for them (the fix: they
# arrive in time); one rank's trace cannot tell the wait from the transfer, so alone its measured idle is the bound.
SPEC = KindSpec("collective_wait", "communication-bound", idle_cause=True, color="#2f9e9e")


def analyze(ctx: Context) -> list[Finding]:
    lost = ctx.per_step_median(ctx.per_step["collective_wait"])
    g = ctx.gpu_in_full_steps(ctx.model.gpu)
    from ..trace.facts import is_collective
    coll = g[is_collective(ctx.model)[g.index.to_numpy()]] if len(g) else g
    ev = {"idle_ms_per_step": round(lost / 1000, 3),
          "collective_kernels_per_step": round(len(coll) / ctx.n_full, 1),
          # (a median, as the idle beside it: a review read 15.6 ms, the mean of 12.0, 12.3 and 22.6)
          "collective_ms_per_step": round(ctx.per_step_median(
              coll["dur"].groupby(ctx.step_of(coll["ts"].to_numpy())).sum()) / 1000, 3),
          "top_collectives": coll["name"].str.slice(0, 100).value_counts().head(5).to_dict()}
    title = "Compute waits on collectives (NCCL): communication is not hidden behind compute"
    fix = (f"Overlap communication with compute: {overlap_advice(ctx.model)}; and check the other ranks for "
           "stragglers (load imbalance makes this rank wait).")
    peer = ctx.model.meta.get("peer_wait_us")
    fixes, label = (), ""
    if peer is not None:
        # Read with the job's other ranks (trace/peer_waits.py): the time inside its collectives that this rank
        # spent waiting for the last rank to arrive is idle here, and is theirs to fix.
        ev["waits_for_other_ranks_ms_total"] = round(peer / 1000, 3)
        if peer > 0:
            title = ("This rank waits in its collectives for the other ranks to arrive: its GPU idles there, and "
                     "the rank that arrives last sets the wait")
            # What the wait costs this rank is its step at its own pace less its step now: not the wait itself,
            # which grows where this rank's CPU runs ahead of its GPU (a full launch queue).
            fixes, label = (NoPeerWait(),), "waiting for another rank"
            fix = ("Fix the rank that arrives last (the job report's straggler): its top finding is what this rank "
                   "waits for. "
                   "Where every rank has the same problem, fix it on every rank: the estimates here hold the other ranks as "
                   "they are, so this rank's own fixes save little while it waits.")
    speed = collective_speed.table(ctx)
    if speed:
        ev["collective_bandwidth"] = speed
        fix += collective_speed.slow_note(speed, peer is not None)
    return [Finding(
        kind=SPEC.kind, title=title,
        lost_per_step_us=lost, lost_total_us=float(ctx.gaps["collective_wait"].sum()),
        fix=fix, confidence="medium", evidence=ev, fixes=fixes, label=label)]
