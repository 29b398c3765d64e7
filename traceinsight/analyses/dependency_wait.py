"""dependency_wait: work was launched in time, but the GPU could not start it: it waited behind an
event (cudaStreamWaitEvent), another stream or a blocking copy. Launch overhead is not the cause, and
CUDA graphs do not remove it; the fix is in how streams and events are ordered.
"""
from __future__ import annotations

import numpy as np

import pandas as pd

from ..trace.facts import blocking_calls, host_copies
from ..trace.steps import cum_lengths, merged_intervals, overlap_many
from .base import Context, Finding, KindSpec, top_op, user_frame

# Small waits behind other streams are normal (a copy stream, a graph's own kernel spacing): reported
# only when they are a large share of the step.
SPEC = KindSpec("dependency_wait", "waiting on dependencies", idle_cause=True, color="#5b7fd6",
                estimate="measured", min_share=0.10)


def compute_waits_on_copies(ctx: Context) -> pd.Series:
    """Per step (us): time the compute streams sat idle while only copies ran, before a kernel that had
    been launched already (it waited for the copy: an event wait or a shared stream). The GPU looks busy
    then, so the idle-gap attribution does not see it."""
    m = ctx.model
    g = m.gpu
    out = pd.Series(0.0, index=pd.Index(ctx.full_steps, name="step"))
    # Copies to or from the host only (a review found a ResNet's DtoD copies on its only stream counted as
    # compute waiting for them).
    g = g[(g["kind"] != "memcpy").to_numpy() | host_copies(m)]
    if g.empty or not (g["kind"] == "memcpy").any():
        return out
    cpu_ts = m.cpu["ts"].to_numpy() if len(m.cpu) else np.zeros(0)
    for dev, d in g.groupby("device"):
        k = d[d["kind"] == "kernel"].sort_values("ts")
        c = d[d["kind"] == "memcpy"]
        if k.empty or c.empty:
            continue
        ks, ke = merged_intervals(k["ts"].to_numpy(), k["end"].to_numpy())
        cs, ce = merged_intervals(c["ts"].to_numpy(), c["end"].to_numpy())
        # Compute idle stretches between kernel blocks, and the kernel that ends each.
        gs, ge = ke[:-1], ks[1:]
        first = np.searchsorted(k["ts"].to_numpy(), ge, side="left")
        launcher = k["launcher"].to_numpy()[np.minimum(first, len(k) - 1)]
        early = (launcher >= 0) & (cpu_ts[np.maximum(launcher, 0)] <= gs) if len(cpu_ts) else launcher < -1
        for a, b in zip(gs[early], ge[early]):
            lo, hi = np.searchsorted(ce, a, "right"), np.searchsorted(cs, b, "left")
            cov = float(np.sum(np.minimum(b, ce[lo:hi]) - np.maximum(a, cs[lo:hi]))) if hi > lo else 0.0
            if cov > 0:
                st = ctx.step_of(np.array([a]))[0]
                if st in out.index:
                    out[st] += cov
    return out


QUIET_MIN_US = 100.0    # a gap this long before a waiting kernel is no spacing between kernels
# Evidence key: the part of the largest waits behind something no GPU work in the trace shows (ms per step).
UNSEEN = "waits_on_what_the_trace_lacks_ms_per_step"


def analyze(ctx: Context) -> list[Finding]:
    cause = SPEC.kind
    on_copies = compute_waits_on_copies(ctx)
    copy_wait = float(on_copies.median()) if len(on_copies) else 0.0
    lost = ctx.per_step_median(ctx.per_step[cause]) + copy_wait
    gaps = ctx.gaps[ctx.gaps[cause] > 0]
    # (under a microsecond a step: nothing to show; a review found a table of waits all "0.000 ms" on a compiled
    # step that was 97% busy)
    if (gaps.empty and copy_wait <= 0) or lost < 1.0:
        return []
    gpu, cpu = ctx.model.gpu, ctx.model.cpu
    waits = []
    for r in gaps.nlargest(5, cause).itertuples():
        g = gpu.loc[r.next_gpu] if r.next_gpu >= 0 else None
        prev = gpu.loc[r.prev_gpu] if r.prev_gpu >= 0 else None
        waited = getattr(r, cause)
        # The GPU's last work before the gap is what the kernel waited behind only if it ended near the
        # kernel's start: one that ended long before is no dependency (a decode step's kernel waited 463 ms
        # for an event the trace never records, 463 ms after the last kernel).
        quiet = float(g["ts"] - prev["end"]) if g is not None and prev is not None else 0.0
        unseen = prev is None or quiet >= max(QUIET_MIN_US, 0.5 * waited)
        if prev is not None and unseen:
            prev = None
            after = (f"(no GPU work in the {quiet / 1000:.3f} ms before it: what it waited for is not GPU work "
                     "in the trace, e.g. an event recorded late by the host, or before the window)")
        else:
            after = str(prev["name"])[:120] if prev is not None else (
                "(no GPU work before it in the trace: what it waited for is not in the trace, e.g. work "
                "before the window, another process's, or an event recorded late by the host)")
        waits.append({"waited_ms": round(waited / 1000, 3),
                      "kernel": str(g["name"])[:120] if g is not None else "?",
                      "stream": int(g["stream"]) if g is not None else None,
                      "after": after, "after_stream": int(prev["stream"]) if prev is not None else None,
                      "unseen": unseen} | _host_blocked(ctx, float(r.start), float(r.end),
                                                      g["device"] if g is not None else None))
    wait_events = int(((cpu["kind"] == "runtime").to_numpy() &
                       ctx.model.cpu_names_where(lambda n: "StreamWaitEvent" in n)).sum())
    n_steps = max(1, len(ctx.model.steps))
    cross = sum(1 for w in waits if w["stream"] is not None and w["after_stream"] is not None
                and w["stream"] != w["after_stream"])
    ev = {"idle_ms_per_step": round((lost - copy_wait) / 1000, 3),
          "compute_waits_on_copies_ms_per_step": round(copy_wait / 1000, 3),
          "stream_wait_event_calls_per_step": round(wait_events / n_steps, 2),
          "largest_waits": waits}
    if copy_wait > 0:
        # More than the GPU's idle: while only copies ran the GPU counts as busy (a review read the sum
        # as a saving above the idle).
        ev["measured_cost_is"] = (f"{(lost - copy_wait) / 1000:.3f} ms of GPU idle before waiting kernels plus "
                                  f"{copy_wait / 1000:.3f} ms of compute waiting while only copies ran, which the "
                                  "GPU's idle does not count")
    share = lost / ctx.median_step_us if ctx.median_step_us else 0.0
    # Most of the wait is behind something no GPU work in the trace shows (SGLang's decode: 463 ms after the
    # last kernel, beside 9.8 ms of GPU work; HTA's backward_thread excerpt: 64 ms with no kernel before it):
    # its cost is real idle, but what would recover it the trace cannot tell.
    # (of the largest waits, by their time: they are the finding's bulk)
    unseen_us = sum(w["waited_ms"] for w in waits if w.pop("unseen")) * 1000
    unseen = unseen_us >= 0.5 * sum(w["waited_ms"] for w in waits) * 1000 > 0
    if unseen:
        ev[UNSEEN] = round(unseen_us / max(1, ctx.n_full) / 1000, 3)
    # Event waits between work of one stream order nothing (a stream runs in order anyway).
    one_stream = gpu.groupby("device")["stream"].nunique().max() <= 1 if len(gpu) else True
    in_order = not cross and (not wait_events or one_stream)     # no other stream to wait for
    same_stream = in_order and copy_wait <= 0
    copies_inline = in_order and copy_wait > 0 and _copies_on_compute_streams(gpu)
    held = next((w for w in waits if w.get("host_blocked_in")), None)
    # (the host's side of the same wait: SGLang's step thread sat 463 ms in a copy behind the waiting kernel, which a
    # review found only in a minor sync finding's table)
    meanwhile = (f" Meanwhile the host sat {held['host_blocked_ms']:.3f} ms in {held['host_blocked_in']}, blocked "
                 "behind the same wait." if held else "")
    return [Finding(
        kind=cause,
        title=(f"Work launched in time waits on something the trace does not show ({share:.0%} of each step): no "
               "GPU work ran in the stretch before it" if unseen else
               f"Kernels queued in time start late behind their predecessor on one stream ({share:.0%} of "
               "each step)" if same_stream else
               f"Work launched in time waits on a dependency before it can start ({share:.0%} of each step"
               f"{', across streams' if cross else ''}"
               f"{'; compute waits behind copies' if copy_wait > 0.5 * lost else ''})"),
        lost_per_step_us=lost, lost_total_us=float(np.sum(ctx.gaps[cause])) + float(on_copies.sum()),
        fix=(_UNSEEN_FIX if unseen else _SAME_STREAM_FIX if same_stream else _INLINE_COPY_FIX if copies_inline else
             "Find what the waiting kernel depends on (the largest waits name it): a cudaStreamWaitEvent on "
             "an event recorded late, a side stream that serialises with the main one, or a blocking copy "
             "in front of it. Record the event as early as the data is ready, move independent work onto "
             "the waiting stream's idle time, and use non-blocking copies on their own stream.") + meanwhile,
        confidence="low" if unseen else "medium", evidence=ev, beyond_idle_us=copy_wait)]


def _host_blocked(ctx: Context, start: float, end: float, device=None) -> dict:
    """The blocking call (any thread) that held the host through most of a wait [start, end): what it was, where
    the program made it, and for how long; {} where none did. Only a call made in an analysed step (on its
    ProfilerStep range), during which the GPU sat idle most of the time: a sync that waits for queued work while the
    GPU runs it is behind that work, not behind the wait (a review found the profiler's exit sync, 174 ms of 999
    queued kernels after the last step, named beside 1 ms of microsecond gaps on five traces)."""
    blocks = blocking_calls(ctx.model)
    if blocks.empty or end <= start:
        return {}
    ts, te = blocks["ts"].to_numpy(), blocks["end"].to_numpy()
    over = np.minimum(te, end) - np.maximum(ts, start)
    ok = (over >= HELD_SHARE * (end - start)) & np.isin(ctx.cpu_step_of(ts), ctx.full_steps)
    if ok.any():
        s, e = _gpu_union(ctx, device)
        ok[ok] = overlap_many(s, e, cum_lengths(s, e), ts[ok], te[ok]) < HELD_SHARE * (te[ok] - ts[ok])
    if not ok.any():
        return {}
    k = int(np.argmax(np.where(ok, over, -np.inf)))
    cpu, row = ctx.model.cpu, int(blocks.index[k])
    src = user_frame(cpu, row)
    return {"host_blocked_in": f"{cpu['name'].iat[row]} ({top_op(cpu, row)}" + (f", {src}" if src else "") + ")",
            "host_blocked_ms": round(float(te[k] - ts[k]) / 1000, 3)}


def _gpu_union(ctx: Context, device=None) -> tuple[np.ndarray, np.ndarray]:
    """When the GPU (the waiting kernel's device, where known) ran anything: sorted disjoint (starts, ends)."""
    g = ctx.model.gpu
    if device is not None:
        g = g[(g["device"] == device).to_numpy()]
    return merged_intervals(g["ts"].to_numpy(dtype=float), g["end"].to_numpy(dtype=float))


HELD_SHARE = 0.5    # of a wait, that a blocking call must span to be the host's side of it; of the call, that the GPU
#                    may be busy for it to be waiting behind the wait, not behind queued work


def _copies_on_compute_streams(gpu: pd.DataFrame) -> bool:
    """Every copy runs on a stream that also runs kernels (the default stream's input copy)."""
    kernels = set(zip(gpu.loc[gpu["kind"] == "kernel", "device"], gpu.loc[gpu["kind"] == "kernel", "stream"]))
    copies = set(zip(gpu.loc[gpu["kind"] == "memcpy", "device"], gpu.loc[gpu["kind"] == "memcpy", "stream"]))
    return bool(copies) and copies <= kernels


_INLINE_COPY_FIX = ("The copies run on the compute stream itself, so its kernels wait for each copy to finish "
                    "(a v100 ResNet's input batch, for one). Copy the next batch ahead of time so it overlaps "
                    "the current step's compute: pinned memory (DataLoader(pin_memory=True)), "
                    ".to(device, non_blocking=True), issued a step early or on a side stream (a prefetcher).")

_UNSEEN_FIX = ("The kernel was launched early but waited on something that ran no GPU work in this trace: an event "
               "the host records late (after a blocking call or host work), work of another process, or work from "
               "before the window. The trace cannot show what that was, so this idle is a bound, not a saving: find "
               "the cudaStreamWaitEvent / stream the kernel waits on (the largest waits name it) and what records "
               "that event, and profile that side too.")

# One stream, no event waits, no copies: the kernel was queued in time and started late behind its
# predecessor on the same stream. That is the GPU's own spacing between back-to-back small kernels, not
# an event or stream to reorder.
_SAME_STREAM_FIX = ("The waits are between kernels on one stream (no other stream to wait for): queued kernels start "
                    "a few microseconds after their predecessor ends (the GPU's own spacing between many "
                    "small kernels). Fewer, larger kernels (fusion, torch.compile) shrink it; there is no "
                    "stream or event to reorder.")
