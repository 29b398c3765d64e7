"""model: events -> columnar tables of what the CPU and the GPU did, linked, step by step.

Tables (pandas, one row per event, times in microseconds from the trace's first event):
  cpu   every CPU-side range: aten ops, annotations, python frames and runtime/driver calls, with
        their nesting (`parent`, `depth`) on their thread. Runtime calls carry `rkind`
        (launch / memcpy / memset / sync / other) and `correlation`.
  gpu   kernels, memcpys and memsets with device, stream, bytes, and `launcher`: the cpu row of
        the runtime call that issued them (-1 when none: CUDA-graph replays, other processes).
  steps ProfilerStep#N windows on the CPU (one window for a trace without steps).
  gaps  every stretch, inside a step, where a GPU device had nothing running on any stream.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .load import RawTrace
from .steps import (drop_leading_idle, find_steps, gpu_aware_bounds, idle_gaps, mark_partial, mark_warmup,
                    step_gpu_accounting)

CPU_OP_CATS = {"cpu_op", "Operator", "user_annotation", "python_function"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
            "gpu_memset": "memset", "Memset": "memset"}

_LAUNCH = re.compile(r"(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ModuleLaunchKernel|"
                     r"ExtLaunchKernel|cuLaunch|hipLaunch)")
# cudaFree / cudaFreeHost synchronize the device implicitly (the caching allocator giving memory back).
_SYNC = re.compile(r"(StreamSynchronize|DeviceSynchronize|EventSynchronize|CtxSynchronize|"
                   r"ThreadSynchronize|^cudaFree|^hipFree|^cuMemFree)")
_LEGACY_ANNOTATION = re.compile(r"^(ProfilerStep#\d+$|Optimizer\.(step|zero_grad)#)")
_MEMCPY_NAME = re.compile(r"Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")


def runtime_kind(name: str) -> str:
    if _LAUNCH.search(name):
        return "launch"
    if _SYNC.search(name):
        return "sync"
    if "Memcpy" in name:
        return "memcpy"
    if "Memset" in name:
        return "memset"
    return "other"


@dataclass
class Device:
    id: int
    name: str = "unknown GPU"
    compute_capability: tuple[int, int] | None = None
    num_sms: int | None = None
    memory_gb: float | None = None


@dataclass
class TraceModel:
    path: str
    rank: int
    cpu: pd.DataFrame
    gpu: pd.DataFrame
    steps: pd.DataFrame
    gaps: pd.DataFrame
    devices: dict[int, Device]
    meta: dict
    thread_names: dict
    warnings: list[str] = field(default_factory=list)
    t0_us: float = 0.0
    n_events: int = 0
    n_flows: int = 0
    step_source: str = "ProfilerStep"

    def gpu_match(self, pattern: str, flags: int = 0) -> np.ndarray:
        """Boolean per gpu row: its name matches the regex (searched once per distinct name)."""
        return _match_names(self, "gpu", pattern, flags)

    def cpu_match(self, pattern: str, flags: int = 0) -> np.ndarray:
        """Boolean per cpu row: its name matches the regex (searched once per distinct name)."""
        return _match_names(self, "cpu", pattern, flags)

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu) > 0

    @property
    def runtime(self) -> pd.DataFrame:
        """The runtime / driver calls (cuda*, cu*, hip*) among the CPU ranges."""
        return self.cpu[self.cpu["kind"] == "runtime"]

    def device_name(self) -> str:
        names = sorted({d.name for d in self.devices.values() if d.name})
        return ", ".join(names) if names else ("no GPU" if not self.has_gpu else "unknown GPU")

    def memo(self, key: str, compute):
        """compute(), once per model: for derived tables several analyses read (blocking calls, ...)."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]


def _match_names(model: "TraceModel", table: str, pattern: str, flags: int) -> np.ndarray:
    # A million events carry a few thousand distinct names: factorize once, search the distinct ones.
    codes, uniques = model.memo(f"name_codes:{table}",
                                lambda: pd.factorize(getattr(model, table)["name"], sort=False))
    rx = re.compile(pattern, flags)
    hit = np.fromiter((bool(rx.search(str(u))) for u in uniques), dtype=bool, count=len(uniques))
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)


def _num(x, default=np.nan):
    if x is None:
        return default
    if isinstance(x, (int, float)):
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def _int_or(x, default=-1):
    v = _to_int(x, default)
    # Ids live in int64 columns; a number beyond that range is not an id we can use.
    return v if -2**63 <= v < 2**63 else default


def _to_int(x, default=-1):
    if x is None:
        return default
    if isinstance(x, int):
        return x
    try:
        return int(float(x))
    except (TypeError, ValueError):
        m = re.search(r"-?\d+", str(x))
        return int(m.group()) if m else default


def build_model(raw: RawTrace) -> TraceModel:
    """One pass over events to columns, then vectorised linking and interval arithmetic."""
    ev = raw.events
    cpu_rows, gpu_rows, thread_names = [], [], {}
    n_flows = n_memory = 0
    for e in ev:
        ph = e.ph
        if ph == "X":
            cat = e.cat
            if cat in CPU_OP_CATS or cat in RUNTIME_CATS:
                cpu_rows.append(e)
            elif cat in GPU_CATS:
                gpu_rows.append(e)
        elif ph == "M":
            if e.name == "thread_name" and e.args is not None:
                thread_names[(e.pid, e.tid)] = e.args.meta_name
        elif ph == "s":
            n_flows += 1
        elif ph == "i" and e.cat == "cpu_instant_event":
            n_memory += 1

    warnings = list(raw.warnings)
    cpu = _cpu_table(cpu_rows)
    gpu = _gpu_table(gpu_rows)
    times = [cpu["ts"].to_numpy(), gpu["ts"].to_numpy()]
    all_ts = np.concatenate([t[np.isfinite(t)] for t in times]) if any(len(t) for t in times) else np.array([])
    if len(all_ts) == 0:
        from ..errors import TraceError
        raise TraceError(raw.path, "not a Kineto trace: no complete ('X') CPU or GPU events")
    t0 = float(all_ts.min())
    for df in (cpu, gpu):
        df["ts"] -= t0
        df["end"] = df["ts"] + df["dur"]

    bad = int((~np.isfinite(cpu["ts"])).sum() + (~np.isfinite(gpu["ts"])).sum())
    if bad:
        warnings.append(f"ignored {bad} events with no usable timestamp")
        cpu = cpu[np.isfinite(cpu["ts"])].reset_index(drop=True)
        gpu = gpu[np.isfinite(gpu["ts"])].reset_index(drop=True)

    cpu = _nest(cpu)
    ann = np.flatnonzero((cpu["kind"] == "annotation").to_numpy())
    cpu["is_step"] = False
    cpu.loc[ann, "is_step"] = cpu["name"].iloc[ann].str.startswith("ProfilerStep#").to_numpy()
    gpu = _link_launches(cpu, gpu)
    steps, step_source = find_steps(cpu, gpu)
    steps = mark_partial(gpu_aware_bounds(steps, cpu, gpu), step_source)
    if step_source == "whole trace":
        warnings.append("no ProfilerStep annotations: the whole trace is analysed as one window")
    gaps, steps, leading_idle = drop_leading_idle(idle_gaps(gpu, steps), steps, gpu, cpu, step_source)
    steps = step_gpu_accounting(steps, gpu, gaps)
    steps, warmup = mark_warmup(steps)

    devices = {}
    for d in raw.devices:
        if d.id is None:
            continue
        cc = (d.computeMajor, d.computeMinor) if d.computeMajor is not None else None
        devices[int(d.id)] = Device(id=int(d.id), name=d.name or "unknown GPU", compute_capability=cc,
                                    num_sms=d.numSms,
                                    memory_gb=(d.totalGlobalMem / 2**30) if d.totalGlobalMem else None)
    rank = _int_or(raw.distributed.get("rank"), 0) if raw.distributed else 0
    meta = dict(raw.meta)
    meta["distributed"] = raw.distributed
    meta["n_memory_events"] = n_memory
    meta["warmup_steps"] = warmup
    meta["leading_idle_excluded_us"] = leading_idle
    return TraceModel(path=raw.path, rank=rank, cpu=cpu, gpu=gpu, steps=steps, gaps=gaps,
                      devices=devices, meta=meta, thread_names=thread_names, warnings=warnings,
                      t0_us=t0, n_events=len(ev), n_flows=n_flows, step_source=step_source)


def _threads(pids: list, tids: list):
    """pid, tid and "pid/tid" as text, and each thread's rank in name order (a sort key that does
    not depend on the order of events in the file). Work is done on distinct values only."""
    pc, pu = pd.factorize(pd.Series(pids, dtype=object))
    tc, tu = pd.factorize(pd.Series(tids, dtype=object))
    nt = max(1, len(tu))
    codes, pairs = pd.factorize(pc.astype(np.int64) * nt + tc)
    names = np.array([f"{pu[p // nt]}/{tu[p % nt]}" for p in pairs], dtype=object)
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(names, kind="stable")] = np.arange(len(names))
    pid_text = np.array([str(u) for u in pu], dtype=object)
    tid_text = np.array([str(u) for u in tu], dtype=object)
    if len(pids) == 0:
        empty = np.array([], dtype=object)
        return empty, empty, empty, np.array([], dtype=np.int64)
    return pid_text[pc], tid_text[tc], names[codes], rank[codes]


def _cpu_table(rows) -> pd.DataFrame:
    name = [str(e.name) if e.name is not None else "" for e in rows]
    cat = [e.cat for e in rows]
    args = [e.args for e in rows]
    kind = np.array(["runtime" if c in RUNTIME_CATS else
                     ("python" if c == "python_function" else
                      ("annotation" if c == "user_annotation" else "op")) for c in cat], dtype=object)
    pid, tid, thread, thread_rank = _threads([e.pid for e in rows], [e.tid for e in rows])
    df = pd.DataFrame({
        "pid": pid,
        "tid": tid,
        "thread": thread,
        "thread_rank": thread_rank,
        "name": pd.Series(name, dtype=object),
        "cat": pd.Series(cat, dtype=object),
        "kind": kind,
        "ts": _floats([e.ts for e in rows], np.nan),
        "dur": _floats([e.dur for e in rows], 0.0),
        "ext_id": _ids(args, "external_id"),
        "correlation": _ids(args, "correlation"),
        # Raw JSON bytes, turned into text only for the few ops a table shows (dims_text).
        "input_dims": [a.input_dims if a is not None else b"" for a in args],
    })
    df["dur"] = df["dur"].clip(lower=0)
    # PyTorch 1.8-1.9 wrote step and optimizer ranges as plain `Operator` events.
    op_rows = np.flatnonzero((df["cat"] == "Operator").to_numpy())
    if len(op_rows):
        legacy = df["name"].iloc[op_rows].str.match(_LEGACY_ANNOTATION).to_numpy()
        df.loc[op_rows[legacy], "kind"] = "annotation"
    is_rt = df["kind"].to_numpy() == "runtime"
    rk = np.full(len(df), "", dtype=object)
    rk[is_rt] = [runtime_kind(n) for n in df["name"].to_numpy()[is_rt]]
    df["rkind"] = rk
    return df


def _ids(args, field: str) -> np.ndarray:
    """An int64 column from an optional args field; -1 where missing or unusable. Fast path for ints."""
    vals = [-1 if (v := (getattr(a, field) if a is not None else None)) is None else v for a in args]
    try:
        out = np.array(vals)
        if out.dtype.kind == "i" or len(vals) == 0:
            return out.astype(np.int64)
    except OverflowError:
        pass
    return np.array([_int_or(v) for v in vals], dtype=np.int64)


def _floats(vals, default: float) -> np.ndarray:
    """A float column; numbers pass straight through, anything else goes through _num."""
    try:
        return np.array([v if v is not None else default for v in vals], dtype=float)
    except (TypeError, ValueError):
        return np.array([_num(v, default) for v in vals], dtype=float)


def dims_text(raw) -> str:
    """Input Dims as compact text (the model keeps the raw JSON bytes)."""
    b = bytes(raw)
    return "" if not b or b == b"null" else b[:200].decode("utf-8", "replace")


def _gpu_table(rows) -> pd.DataFrame:
    args = [e.args for e in rows]
    names = [str(e.name) if e.name is not None else "" for e in rows]
    kind = [GPU_CATS[e.cat] for e in rows]
    device = [_int_or(a.device if a is not None and a.device is not None else e.pid, 0)
              for e, a in zip(rows, args)]
    stream = [_int_or(a.stream if a is not None and a.stream is not None else e.tid, 0)
              for e, a in zip(rows, args)]
    df = pd.DataFrame({
        "device": np.array(device, dtype=np.int64),
        "stream": np.array(stream, dtype=np.int64),
        "name": pd.Series(names, dtype=object),
        "kind": pd.Series(kind, dtype=object),
        "ts": _floats([e.ts for e in rows], np.nan),
        "dur": _floats([e.dur for e in rows], 0.0),
        "correlation": _ids(args, "correlation"),
        "ext_id": _ids(args, "external_id"),
        "bytes": _floats([a.bytes if a is not None else 0 for a in args], 0.0),
    })
    df["dur"] = df["dur"].clip(lower=0)
    # Only copies have a direction and host memory kind; parse each distinct copy name once.
    is_copy = (df["kind"] == "memcpy").to_numpy()
    for col in ("copy_dir", "copy_src", "copy_dst"):
        df[col] = ""
    df["pageable"] = False
    if is_copy.any():
        codes, uniques = pd.factorize(df["name"].to_numpy()[is_copy])
        parsed = [_MEMCPY_NAME.search(str(u)) for u in uniques]
        for k, col in enumerate(("copy_dir", "copy_src", "copy_dst")):
            vals = np.array([(m.group(k + 1) or "") if m else "" for m in parsed], dtype=object)
            df.loc[is_copy, col] = vals[codes]
        pg = np.array(["Pageable" in str(u) for u in uniques], dtype=bool)
        df.loc[is_copy, "pageable"] = pg[codes]
    return df.sort_values(["ts", "dur"], kind="stable").reset_index(drop=True)


def _nest(cpu: pd.DataFrame) -> pd.DataFrame:
    """Parent and depth of every CPU range on its thread (stack walk over start-sorted ranges).

    Ranges that overlap their parent's end slightly (clock jitter) are kept as children rather than
    breaking the tree; `parent` is a row index into the returned table, -1 at top level.
    """
    # Longer ranges first at equal start, so a parent precedes its children; runtime calls last.
    # Equal ranges (aten::detach and detach): the outer op has the smaller External id, so the order,
    # and the tree, do not depend on the order of events in the file.
    cpu = cpu.iloc[_nesting_order(cpu)].drop(columns="thread_rank").reset_index(drop=True)
    # Plain Python lists: this loop visits every CPU range once, numpy scalars would triple its cost.
    ts = cpu["ts"].tolist()
    end = (cpu["ts"] + cpu["dur"]).tolist()
    thread_code = pd.factorize(cpu["thread"])[0].tolist()
    n = len(cpu)
    parent = [-1] * n
    depth = [0] * n
    stack: list[int] = []
    prev_thread = None
    eps = 0.001
    for i in range(n):
        th = thread_code[i]
        if th != prev_thread:
            stack = []
            prev_thread = th
        t = ts[i] + eps
        while stack and end[stack[-1]] <= t:
            stack.pop()
        if stack:
            p = stack[-1]
            parent[i] = p
            depth[i] = depth[p] + 1
        stack.append(i)
    cpu["parent"] = np.array(parent, dtype=np.int64)
    cpu["depth"] = np.array(depth, dtype=np.int32)
    parent, depth = cpu["parent"].to_numpy(), cpu["depth"].to_numpy()
    cpu["top_op"] = _top_ops(parent, depth, cpu["kind"].to_numpy() == "op")
    return cpu


def _nesting_order(cpu: pd.DataFrame) -> np.ndarray:
    """Row order for the stack walk: thread, start, longer first, runtime calls last, External id, name.

    Numeric keys go through one lexsort; the name only breaks the rare exact ties, on those rows alone.
    """
    keys = [cpu["thread_rank"].to_numpy(), cpu["ts"].to_numpy(), -cpu["dur"].to_numpy(),
            (cpu["kind"] == "runtime").to_numpy().astype(np.int8), cpu["ext_id"].to_numpy()]
    order = np.lexsort(keys[::-1])
    if len(order) < 2:
        return order
    same = np.ones(len(order) - 1, dtype=bool)
    for k in keys:
        v = k[order]
        same &= v[1:] == v[:-1]
    if not same.any():
        return order
    run = np.concatenate([[0], np.cumsum(~same)])
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    names = cpu["name"].to_numpy()
    idx = np.flatnonzero(tied)
    # Within each run of exact ties, order by name; runs stay where they are.
    resorted = sorted(idx, key=lambda i: (run[i], names[order[i]]))
    order = order.copy()
    order[idx] = order[np.array(resorted)]
    return order


def _top_ops(parent: np.ndarray, depth: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """Row of the outermost op in the unbroken chain of ops above-or-at each row (-1 if none).

    For a runtime call under aten::item -> aten::_local_scalar_dense this is aten::item: the op a
    user wrote, not the internal one that made the call. Filled top-down, one depth level at a time.
    """
    top = np.where(is_op, np.arange(len(parent)), -1)
    for d in range(1, int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero(depth == d)
        p = parent[rows]
        inherit = (p >= 0) & is_op[np.maximum(p, 0)]
        top[rows[inherit]] = top[p[inherit]]
    return top


def _link_launches(cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """gpu.launcher = cpu row of the runtime call with the same correlation id (-1 if none)."""
    rt = cpu.index[(cpu["kind"] == "runtime") & (cpu["correlation"] >= 0)]
    corr = cpu.loc[rt, "correlation"]
    # A correlation id is unique per process; if a merged file repeats one, the first launch wins.
    lookup = pd.Series(rt.to_numpy(), index=corr.to_numpy())
    lookup = lookup[~lookup.index.duplicated()]
    gpu["launcher"] = gpu["correlation"].map(lookup).fillna(-1).astype(np.int64)
    gpu.loc[gpu["correlation"] < 0, "launcher"] = -1
    return gpu
