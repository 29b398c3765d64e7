"""The collectives one rank issued, in issue order, with where they ran on the rank's own clock.

Three shapes of trace (see KINETO_NOTES.md, "Collectives"):
  NCCL   `record_param_comms` CPU ranges carry the collective's name, sizes, dtype, process group and,
         on newer PyTorch, its sequence number (`Seq`); the NCCL kernel they launch (same External id,
         or a launch inside the range) is where it ran.
  gloo   `c10d::allreduce_` & co. on the issuing thread enqueue; `gloo:all_reduce` & co. ranges on
         gloo's worker threads run it, FIFO per process group; sizes come from their Input Dims.
  old    NCCL kernels and no record_param_comms: the kernel's launch is the issue, the kernel name
         the op.
A kernel launched before the profiling window has no launch (or record_param_comms) in the trace:
it is left out, so it cannot shift the order in which collectives are matched across ranks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import numpy as np
import pandas as pd

from ..trace.collectives import op_kind, range_above
from ..trace.events import COMM_RANGE

P2P = {"send", "recv"}
NOT_COLLECTIVES = {"wait", "waitall", ""}


def nelems_of(dims) -> int:
    """Elements of a shape ([a, b]) or of a list of shapes ([[a], [b, c]])."""
    if not isinstance(dims, list) or not dims:
        return 0
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims, dtype=np.int64))
    return sum(nelems_of(d) for d in dims)


def first_arg_nelems(raw) -> int:
    """Elements of an op's first argument, from the raw Input Dims JSON."""
    b = bytes(raw) if raw is not None else b""
    if not b:
        return 0
    try:
        dims = msgspec.json.decode(b)
    except msgspec.DecodeError:
        return 0
    return nelems_of(dims[0]) if isinstance(dims, list) and dims else 0


@dataclass
class CommEvents:
    """The events the collectives are read from, gathered in one pass over a rank's events."""
    rpc: list = field(default_factory=list)      # record_param_comms: (tid, ts, dur, ext_id, args)
    gloo: list = field(default_factory=list)     # gloo:* ranges: (tid, ts, dur, name, nelems, dtype)
    issue: list = field(default_factory=list)    # c10d::* ops: (tid, ts, dur, name)


COLUMNS = ["pg", "seq", "op", "dtype", "nelems", "out_nelems", "group", "enqueue", "start", "end", "tid"]


def collectives(ev: CommEvents, t0: float, gpu: pd.DataFrame, cpu: pd.DataFrame, comm_gpu: np.ndarray,
                default_pg: str, default_group: int) -> tuple[pd.DataFrame, dict]:
    """One row per collective this rank issued inside the window, sorted by issue time.

    Times are on the model's clock (microseconds since the rank's first event, t0). Returns the table and
    counts of what was left out (`prewindow`: kernels launched before the window, `p2p`: send/recv).
    """
    counts = {"prewindow": 0, "p2p": 0, "unlinked": 0}
    if ev.rpc:
        rows = _from_record_param_comms(ev.rpc, t0, gpu, cpu, comm_gpu, default_pg, default_group, counts)
    elif ev.gloo:
        rows = _from_gloo(ev, t0, default_pg, default_group, counts)
    else:
        rows = _from_kernels(gpu, cpu, comm_gpu, default_pg, default_group, counts)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df = df.sort_values(["enqueue", "start"], kind="stable").reset_index(drop=True)
    return df, counts


def _from_record_param_comms(rpc, t0, gpu, cpu, comm_gpu, default_pg, default_group, counts) -> list:
    by_ext = {ext: i for i, (_, _, _, ext, _) in enumerate(rpc) if ext is not None and ext >= 0}
    first = np.full(len(rpc), np.nan)
    last = np.full(len(rpc), np.nan)
    # NCCL kernels -> the record_param_comms that launched them: same External id, else the
    # record_param_comms range around the launch call.
    is_range = cpu["name"].to_numpy() == COMM_RANGE
    parent = cpu["parent"].to_numpy()
    cpu_ext = cpu["ext_id"].to_numpy()
    g = gpu[comm_gpu]
    for ext, launcher, ts, end in zip(g["ext_id"].to_numpy(), g["launcher"].to_numpy(),
                                      g["ts"].to_numpy(), g["end"].to_numpy()):
        i = by_ext.get(int(ext))
        if i is None and launcher >= 0:
            p = range_above(parent, is_range, int(launcher))
            if p >= 0:
                i = by_ext.get(int(cpu_ext[p]))
        if i is None:
            counts["prewindow" if launcher < 0 else "unlinked"] += 1
            continue
        first[i] = np.fmin(first[i], ts)
        last[i] = np.fmax(last[i], end)
    rows = []
    for i, (tid, ts, dur, ext, a) in enumerate(rpc):
        op = op_kind(a.get("name") or "")
        name = (a.get("name") or "").lower()
        if name in NOT_COLLECTIVES:
            continue
        if op in P2P:
            counts["p2p"] += 1
            continue
        seq = a.get("seq")
        rows.append((str(a.get("pg") or default_pg), int(seq) if seq is not None else -1, op,
                     str(a.get("dtype") or ""), int(a.get("in") or 0), int(a.get("out") or 0),
                     int(a.get("group") or default_group), ts - t0, first[i], last[i], str(tid)))
    return rows


def _norm(name: str) -> str:
    return op_kind(name.split("::")[-1].split(":")[-1])


def _from_gloo(ev: CommEvents, t0, default_pg, default_group, counts) -> list:
    """Pair each c10d issue with the gloo range that ran it: the next unpaired one of its kind."""
    execs: dict[str, list] = {}
    for tid, ts, dur, name, nel, dt in sorted(ev.gloo, key=lambda r: r[1]):
        execs.setdefault(_norm(name), []).append((ts, dur, nel, dt))
    used = {k: 0 for k in execs}
    rows = []
    for tid, ts, dur, name in sorted(ev.issue, key=lambda r: r[1]):
        op = _norm(name)
        if op in P2P:
            counts["p2p"] += 1
            continue
        if op == "unknown" or op not in execs:
            continue
        q, k = execs[op], used[op]
        # A gloo range that started before this issue ran a collective issued before the window.
        while k < len(q) and q[k][0] < ts:
            k += 1
            counts["prewindow"] += 1
        if k < len(q):
            xts, xdur, nel, dt = q[k]
            used[op] = k + 1
            rows.append((default_pg, -1, op, dt, nel, 0, default_group, ts - t0, xts - t0, xts + xdur - t0,
                         str(tid)))
        else:   # issued, never seen running: the window closed first
            used[op] = k
            rows.append((default_pg, -1, op, "", 0, 0, default_group, ts - t0, np.nan, np.nan, str(tid)))
    return rows


def _from_kernels(gpu, cpu, comm_gpu, default_pg, default_group, counts) -> list:
    g = gpu[comm_gpu]
    rows = []
    cpu_ts = cpu["ts"].to_numpy()
    cpu_tid = cpu["tid"].to_numpy()
    for name, launcher, ts, end in zip(g["name"].to_numpy(), g["launcher"].to_numpy(),
                                       g["ts"].to_numpy(), g["end"].to_numpy()):
        if launcher < 0:
            counts["prewindow"] += 1
            continue
        op = op_kind(str(name))
        if op in P2P:
            counts["p2p"] += 1
            continue
        rows.append((default_pg, -1, op, "", 0, 0, default_group, cpu_ts[launcher], ts, end,
                     str(cpu_tid[launcher])))
    return rows
