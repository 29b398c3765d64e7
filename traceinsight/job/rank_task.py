"""The per-rank task: one trace file (a PATH, never its bytes) in, a RankSummary out.

This is the one module of the job package that imports the single-rank pipeline (loader, model,
analyses, pipeline), so that a move of those modules touches import lines here only.

The streaming loader (trace/load.py) builds the columns the single-rank model needs; a second, narrow
decode reads only the few fields a collective needs (Collective name, sizes, dtype, process group, Seq;
gloo's Input type and Input Dims; the top-level host_name). A file that narrow decode refuses (a
truncated trace the loader repaired) loses only those extra fields.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import msgspec
import numpy as np
import pandas as pd

from ..trace.facts import blocking_calls, is_collective
from ..trace.profiler_cost import event_cost_us
from ..errors import TraceError
from ..trace.host import INPUT_NAMES
from ..trace.load import RawTrace, load_trace
from ..trace.reader import read_bytes
from ..trace.dims import dims_text
from ..trace.model import build_model
from ..trace.steps import interval_of
from . import comms
from .discover import name_identity
from .spans import Cover, both_within
from .summary import RankSummary, empty_coll

# CPU ranges that are communication: neither compute nor host time in a step's own work.
COMM_CPU = r"^(c10d::|record_param_comms$|nccl:|gloo:|_c10d_functional|c10d_functional)"
ABSOLUTE_TS_US = 1e14     # ts beyond this are Unix microseconds (older traces), not offsets from a base


class CommArgs(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    coll_name: Union[str, None] = msgspec.field(default=None, name="Collective name")
    in_nelems: Union[int, None] = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Union[int, None] = msgspec.field(default=None, name="Out msg nelems")
    dtype: Union[str, None] = None
    group_size: Union[int, None] = msgspec.field(default=None, name="Group size")
    pg_name: Union[str, int, None] = msgspec.field(default=None, name="Process Group Name")
    seq: Union[int, None] = msgspec.field(default=None, name="Seq")
    input_type: Any = msgspec.field(default=None, name="Input type")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    external_id: Any = msgspec.field(default=None, name="External id")


class CommEvent(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """Only what the collectives need; the rest of each event is the loader's (trace/load.py)."""
    name: Any = None
    ph: Any = None
    ts: Any = None
    dur: Any = None
    tid: Any = None
    args: Union[CommArgs, None] = None


class CommTrace(msgspec.Struct, forbid_unknown_fields=False):
    traceEvents: list[CommEvent] = []
    host_name: Union[str, None] = None


_DECODER = msgspec.json.Decoder(CommTrace)


def read_trace(path: str) -> tuple[RawTrace, list, str | None, bool]:
    """(raw trace from the loader, the collective events, host name, whether their fields were read).

    The loader keeps the columns the model needs; a second, narrow decode reads the collectives' own
    args (names, sizes, process groups), which the single-rank analysis does not keep."""
    raw = load_trace(path)        # the loader's repairs and its one-line errors
    data, _ = read_bytes(Path(path))
    try:
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        tf = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return raw, [], None, False
    return raw, tf.traceEvents, tf.host_name, True


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


def comm_events(events) -> comms.CommEvents:
    out = comms.CommEvents()
    for e in events:
        name = e.name
        if e.ph != "X" or not isinstance(name, str) or not name or name[0] not in "rgc":
            continue
        a = e.args
        if name == "record_param_comms":
            d = {"name": getattr(a, "coll_name", None), "in": getattr(a, "in_nelems", None),
                 "out": getattr(a, "out_nelems", None), "dtype": getattr(a, "dtype", None),
                 "group": getattr(a, "group_size", None), "pg": getattr(a, "pg_name", None),
                 "seq": getattr(a, "seq", None)}
            ext = a.external_id if a is not None and isinstance(a.external_id, int) else None
            out.rpc.append((e.tid, _num(e.ts), _num(e.dur), ext, d))
        elif name.startswith("gloo:"):
            it = getattr(a, "input_type", None)
            dt = it[0] if isinstance(it, list) and it and isinstance(it[0], str) else ""
            nel = comms.first_arg_nelems(a.input_dims) if a is not None else 0
            out.gloo.append((e.tid, _num(e.ts), _num(e.dur), name, nel, dt))
        elif name.startswith("c10d::"):
            out.issue.append((e.tid, _num(e.ts), _num(e.dur), name))
    return out


def summarize(path) -> RankSummary:
    """The fan-out function: parse and summarise one rank. Bad input comes back as `error`."""
    try:
        return _summarize(str(path))
    except TraceError as exc:
        return RankSummary(path=str(path), error=str(exc), **_identity_from_name(str(path)))


def full_rank(path, peer_waits: tuple | None = None) -> dict:
    """The single-rank report of one rank (its JSON document), for the straggler and the median rank.
    `peer_waits`: its collectives' waits for the other ranks (job/analysis.peer_waits), taken out of its GPU time."""
    from ..report.analyze import analyze_file
    from ..report.document import build_report, thaw
    try:
        # (its ranks are all given)
        return thaw(build_report(analyze_file(Path(path), in_job=True, peer_waits=peer_waits)).doc)
    except TraceError as exc:
        return {"error": str(exc)}


def _identity_from_name(path: str) -> dict:
    rank, world = name_identity(path)
    return {"rank": -1 if rank is None else rank, "world_size": world,
            "rank_source": "unknown" if rank is None else "file name"}


def _summarize(path: str) -> RankSummary:
    raw, events, host, have_args = read_trace(path)
    ev = comm_events(events)
    del events
    model = build_model(raw)
    dist = raw.distributed or {}
    s = RankSummary(path=path, file_bytes=raw.file_bytes, host=host, has_gpu=model.has_gpu,
                    warnings=list(model.warnings), backend=dist.get("backend"))
    ident = _identity_from_name(path)
    if isinstance(dist.get("rank"), int):
        s.rank, s.rank_source = int(dist["rank"]), "distributedInfo"
    else:
        s.rank, s.rank_source = ident["rank"], ident["rank_source"]
    s.world_size = dist.get("world_size") if isinstance(dist.get("world_size"), int) else ident["world_size"]
    s.pg_config = [{"name": str(p.get("pg_name")), "desc": p.get("pg_desc"), "size": p.get("pg_size")}
                   for p in dist.get("pg_config") or [] if isinstance(p, dict)]
    base, t0 = raw.meta.get("baseTimeNanoseconds"), model.t0_us
    if t0 > ABSOLUTE_TS_US:
        s.epoch_ns, s.epoch_source = int(round(t0 * 1000)), "absolute ts"
    elif isinstance(base, int):
        s.epoch_ns, s.epoch_source = base + int(round(t0 * 1000)), "baseTimeNanoseconds"
    if not have_args:
        s.warnings.append("collective arguments unavailable (the trace needed repair): sizes and groups unknown")
    one_pg = len(s.pg_config) == 1
    default_pg = s.pg_config[0]["name"] if one_pg else "default"
    # 0: unknown here; the merge then takes the number of ranks that issued the group's collectives.
    default_group = int((s.pg_config[0]["size"] if one_pg else None) or s.world_size or 0)
    comm_gpu = is_collective(model) if model.has_gpu else np.zeros(0, dtype=bool)
    table, s.dropped = comms.collectives(ev, t0, model.gpu, model.cpu, comm_gpu, default_pg, default_group)
    _fill_steps_and_collectives(s, model, table, ev, comm_gpu, t0)
    return s


def _fill_steps_and_collectives(s: RankSummary, model, table, ev, comm_gpu, t0) -> None:
    st = model.steps
    cs, ce = st["cpu_start"].to_numpy(), st["cpu_end"].to_numpy()
    step_no = st["step"].to_numpy().astype(np.int64)
    cpu, gpu = model.cpu, model.gpu
    is_step = cpu["is_step"].to_numpy()
    comm_cpu = model.cpu_match(COMM_CPU)
    # Threads that run Python / ops (not gloo's worker threads): their gaps are untraced host time.
    py_threads = set(cpu["thread"].to_numpy()[~is_step & ~comm_cpu])
    on_py = cpu["thread"].isin(py_threads).to_numpy()
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    traced = Cover(ts[on_py & ~is_step], end[on_py & ~is_step])
    # The loop's own thread(s), those that hold the step markers: a DataLoader's pin-memory thread waits in its
    # queue while the loop runs (a review read 9.4 ms of it a step as the loop waiting for data).
    loop = cpu["thread"].isin(set(cpu["thread"].to_numpy()[is_step]) or py_threads).to_numpy()
    data = Cover(*(x[loop & ~is_step & model.cpu_match(INPUT_NAMES)] for x in (ts, end)))
    gpu_compute = ~comm_gpu if s.has_gpu else np.zeros(0, dtype=bool)
    gts, gend = gpu["ts"].to_numpy(), gpu["end"].to_numpy()
    gpu_busy = Cover(gts[gpu_compute], gend[gpu_compute])
    if s.has_gpu:
        comm_cover, compute_cover = Cover(gts[comm_gpu], gend[comm_gpu]), gpu_busy
    else:
        g = np.array([(x[1] - t0, x[1] + x[2] - t0) for x in ev.gloo]).reshape(-1, 2)
        is_op = (cpu["kind"] == "op").to_numpy() & on_py & ~comm_cpu
        comm_cover, compute_cover = Cover(g[:, 0], g[:, 1]), Cover(ts[is_op], end[is_op])
    w0, w1 = st["start"].to_numpy(), st["end"].to_numpy()
    comm = comm_cover.within(w0, w1)
    # The loop's own CPU work per step: its step less the time it sat in calls that wait for the GPU (which,
    # in a job, may be waiting for another rank), and what recording its events cost (trace/profiler_cost).
    blk = blocking_calls(model)
    blk = blk[blk["block_kind"].isin(("sync", "copy_sync")).to_numpy() & loop[blk.index.to_numpy()]]
    waiting = Cover(blk["ts"].to_numpy(), blk["end"].to_numpy()).within(cs, ce)
    span = np.maximum(ce - cs, 0.0)
    # What each whole step held, for comparing a straggler with the median rank: host time outside ops, the
    # loop's DataLoader, ops (less communication and waits), compute kernels. (Over the stretches before each
    # collective, as before, the waiting rank's stretch starts where its previous collective ended, late, as it
    # waited: a review read its DataLoader at 7.5 ms a step against 13.2 in its steps.)
    comm_ops = on_py & ~is_step & comm_cpu
    # The step's path: the loop's threads and those that launch its GPU work (autograd's backward), not a
    # DataLoader's pin-memory thread, whose events' profiler cost is off the path.
    launching = set(cpu["thread"].to_numpy()[(cpu["kind"] == "runtime").to_numpy()
                                             & (cpu["rkind"] == "launch").to_numpy()])
    on_path = loop | cpu["thread"].isin(launching).to_numpy()
    # The profiler's cost of the events on the path that start inside each step's CPU range.
    path = on_path & ~is_step
    at, cost = interval_of(ts[path], cs, ce), event_cost_us(model)[path]
    in_ops, in_comm = traced.within(cs, ce), Cover(ts[comm_ops], end[comm_ops]).within(cs, ce)
    loading = data.within(cs, ce)
    s.steps = {"step": step_no, "start": w0, "end": w1, "dur": st["dur"].to_numpy(),
               "partial": st["partial"].to_numpy(dtype=bool), "comm": comm,
               "exposed": comm - both_within(comm_cover, compute_cover, w0, w1),
               # (a GPU job's collectives on the CPU are launches; a CPU job's hold their transfer and their wait
               # for the other ranks, which the driver takes out from the matched arrivals)
               "cpu_own": span - waiting - (in_comm if s.has_gpu else 0.0), "compute": compute_cover.within(w0, w1),
               "profiler_cost": np.bincount(at[at >= 0], weights=cost[at >= 0], minlength=len(cs)),
               "untraced": np.maximum(span - in_ops, 0.0), "data": loading,
               "cpu": np.maximum(in_ops - in_comm - waiting - loading, 0.0), "gpu": gpu_busy.within(w0, w1)}
    s.step_ops = _step_ops(model, Cover(cs, ce), Cover(w0, w1), on_py & ~is_step & ~comm_cpu, gpu_compute)

    coll = empty_coll()
    n = len(table)
    if n:
        enq = table["enqueue"].to_numpy()
        k = np.searchsorted(cs, enq, side="right") - 1
        inside = (k >= 0) & (enq < ce[np.maximum(k, 0)])
        step = np.where(inside, step_no[np.maximum(k, 0)], -1)
        s.pgs, pg = _codes(table["pg"])
        s.ops, op = _codes(table["op"])
        s.dtypes, dt = _codes(table["dtype"])
        idx = table.assign(step=step).groupby(["pg", "step"], sort=False).cumcount().to_numpy()
        start, stop = table["start"].to_numpy(), table["end"].to_numpy()
        coll.update(pg=pg, seq=table["seq"].to_numpy(np.int64), step=step, idx=idx, op=op, dtype=dt,
                    nelems=table["nelems"].to_numpy(np.int64), out_nelems=table["out_nelems"].to_numpy(np.int64),
                    group=table["group"].to_numpy(np.int64), enqueue=enq, start=start, end=stop)
    s.coll = coll


def _codes(col) -> tuple[list, np.ndarray]:
    codes, uniques = col.factorize(sort=True)
    return [str(u) for u in uniques], codes.astype(np.int64)


def _step_ops(model, windows: Cover, gpu_windows: Cover, cpu_rows: np.ndarray, gpu_rows: np.ndarray,
              top: int = 30) -> list:
    """Time inside the steps by (name, input shapes): CPU ops by self time (their time less their children's,
    so extra matmuls show as aten::mm, not as the forward around them), GPU kernels."""
    cpu, gpu = model.cpu, model.gpu
    parent = cpu["parent"].to_numpy()
    over = windows.within(cpu["ts"].to_numpy(), cpu["end"].to_numpy())
    child = np.bincount(parent[parent >= 0], weights=over[parent >= 0], minlength=len(cpu))
    rows = np.flatnonzero(cpu_rows & cpu["kind"].isin(("op", "annotation")).to_numpy())
    dims_col = cpu["input_dims"].to_numpy()
    out = _group("cpu", cpu["name"].to_numpy()[rows], rows, np.maximum(over - child, 0.0)[rows], dims_col, top)
    if len(gpu):
        g = np.flatnonzero(gpu_rows)
        over = gpu_windows.within(gpu["ts"].to_numpy()[g], gpu["end"].to_numpy()[g])
        launcher = gpu["launcher"].to_numpy()[g]
        p = np.where(launcher >= 0, parent[np.maximum(launcher, 0)], -1)
        op_row = np.where(p >= 0, cpu["top_op"].to_numpy()[np.maximum(p, 0)], -1)
        out += _group("gpu", gpu["name"].to_numpy()[g], op_row, over, dims_col, top)
    return out


def _group(where, names, dims_rows, over, dims_col, top) -> list:
    """Sum `over` by (name, input dims); the top entries as (where, name, dims, us, count)."""
    keep = over > 0
    if not keep.any():
        return []
    rows = dims_rows[keep]
    raw = [bytes(dims_col[r]) if r >= 0 else b"" for r in rows]
    df = pd.DataFrame({"name": names[keep], "dims": raw, "us": over[keep]})
    agg = df.groupby(["name", "dims"], sort=False)["us"].agg(["sum", "count"]).reset_index()
    agg = agg.sort_values(["sum", "name", "dims"], ascending=[False, True, True]).head(top)
    return [(where, str(n)[:160], dims_text(d, 120), round(float(us), 3), int(c))
            for n, d, us, c in agg.itertuples(index=False)]
