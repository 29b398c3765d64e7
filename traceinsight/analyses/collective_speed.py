"""How fast the step's collectives moved their data: the bus bandwidth (NCCL-tests' measure) of each kind of
collective, at its fastest and its median, for the communication findings' evidence; and, where even the largest
ones crawl, what that says.

A collective kernel's time holds the transfer and, on one rank's trace, its wait for the last rank to arrive: the
fastest instance of a size is the nearest to the transfer alone. Read in a job, the waits for the other ranks are
taken out of the kernels first (trace/peer_waits.py), so what is left is the transfer.
"""
from __future__ import annotations

import numpy as np

from ..trace.collectives import busbw_gbps, sizes
from .base import Context

# Collectives this large are bandwidth-bound on any interconnect (a 4 MiB all-reduce takes tens of microseconds
# on NVLink): their speed says how fast the transport is, not its latency.
LARGE_BYTES = 4 * 2**20
# A bus bandwidth under this for the largest collectives, even at their fastest, is far below what GPUs' links
# carry: NVLink and xGMI 100 GB/s and more inside a node, InfiniBand or RoCE 25-50 GB/s a GPU between nodes. (TraceLens'
# MI300 ResNet rank, 8 GPUs: all-reduces of 17.6 MB at 3.6 GB/s at best, 1.5 GB/s for 5.7 MB; HTA's A100 DDP rank,
# SXM4 boards: 26-32 MB at 11-13 GB/s, which a review read as some 10x short of NVLink.)
SLOW_BUSBW_GBPS = 20.0
# What the report compares with: a bus bandwidth GPU links reach for large collectives (NVLink, xGMI: 100+ GB/s).
LINK_GBPS = 100.0
# Below this size a collective's time is its latency: no bandwidth is quoted for it.
LATENCY_BYTES = 2**20
ROWS = 6


def table(ctx: Context) -> list[dict]:
    """Per (op, dtype, bytes, group size), the collectives in the full steps with a recorded size, by time spent:
    how many a step, their fastest and median time and the bus bandwidth at each."""
    s = sizes(ctx.model)
    if s.empty:
        return []
    ts = ctx.model.gpu["ts"].to_numpy()[s["row"].to_numpy(dtype=np.int64)]
    s = s[np.isin(ctx.step_of(ts), ctx.full_steps) & (s["bytes"].to_numpy() > 0)]
    out = []
    for (op, dtype, nbytes, group), g in s.groupby(["op", "dtype", "bytes", "group"], sort=False):
        d = g["dur"].to_numpy()
        fast, med = float(d.min()), float(np.median(d))
        best, typical = busbw_gbps(op, nbytes, group, fast), busbw_gbps(op, nbytes, group, med)
        if nbytes < LATENCY_BYTES:      # (a review: "0.03 GB/s" for a 160-byte broadcast says nothing)
            best = typical = None
        out.append({"op": op, "dtype": dtype, "size_mb": round(nbytes / 1e6, 3), "group_size": int(group),
                    "per_step": round(len(d) / ctx.n_full, 2), "fastest_us": round(fast, 1),
                    "median_us": round(med, 1), "ms_per_step": round(float(d.sum()) / ctx.n_full / 1000, 3),
                    "busbw_fastest_gbps": None if best is None else round(best, 2),
                    "busbw_median_gbps": None if typical is None else round(typical, 2)})
    return sorted(out, key=lambda r: -r["ms_per_step"])[:ROWS]


def at_link_ms(rows: list[dict]) -> float:
    """What the large collectives a step runs would take at LINK_GBPS of bus bandwidth (ms per step)."""
    return sum(r["per_step"] * r["fastest_us"] * r["busbw_fastest_gbps"] / LINK_GBPS for r in _large(rows)) / 1000


def _large(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["size_mb"] * 1e6 >= LARGE_BYTES and r["busbw_fastest_gbps"] is not None]


def slow(rows: list[dict]) -> bool:
    """Whether the large collectives, even at their fastest, move far slower than GPU links carry."""
    large = _large(rows)
    return bool(large) and max(r["busbw_fastest_gbps"] for r in large) < SLOW_BUSBW_GBPS


def slow_note(rows: list[dict], in_job: bool) -> str:
    """Sentences where the large collectives, even at their fastest, move far slower than GPU links carry ("" otherwise):
    the time is waiting for a later rank or a slow transport."""
    if not slow(rows):
        return ""
    large = _large(rows)
    top = max(large, key=lambda r: r["size_mb"])
    now = sum(r["ms_per_step"] for r in large)
    said = (f" Its largest collectives move slowly: {top['op']} of {top['size_mb']:g} MB ({top['dtype']}, "
            f"{top['group_size']} ranks) at {top['busbw_fastest_gbps']:g} GB/s bus bandwidth at its fastest "
            f"({top['fastest_us'] / 1000:.2f} ms), where NVLink or xGMI carry 100 GB/s and more inside a node and "
            f"InfiniBand 25-50 GB/s a GPU between nodes: at {LINK_GBPS:g} GB/s this step's large collectives would take "
            f"about {at_link_ms(rows):.2f} ms, not {now:.2f}.")
    if in_job:
        # (the waits for the other ranks are out of these kernels: what is left is the transfer)
        return said + (" With the waits for the other ranks taken out, that is the transfer itself: check the "
                       "transport (NCCL_DEBUG=INFO names the one in use: a socket or PCIe path in place of NVLink or "
                       "InfiniBand, or too few network interfaces for the GPUs; nccl-tests' all_reduce_perf on the "
                       "node shows what it can do).")
    return said + (" So most of that time is not the transfer: each collective waits inside its kernel for the last "
                   "rank to arrive, or runs over a slow transport (NCCL_DEBUG=INFO names the one in use; nccl-tests' "
                   "all_reduce_perf at these sizes shows what the node can do). All ranks' traces tell the two apart "
                   "(`traceinsight analyze` on them).")
