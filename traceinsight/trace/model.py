"""model: event columns -> columnar tables of what the CPU and the GPU did, linked, step by step.

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

from .compiles import mark_compiling
from .events import BAD, MISSING
from .gpu_specs import rocm_trace
from .instants import allocation_rows, memory_table
from .launch_dims import grid_ranks, launch_threads
from .load import RawTrace
from .nesting import nest, nesting_order, top_ops
from .peer_waits import take_out as peer_wait_shift
from .steps import (STEP_NAME, clip_to_data, drop_leading_idle, find_steps, gpu_aware_bounds, idle_gaps,
                    mark_partial, mark_warmup, step_gpu_accounting)

LAZY_LOADING = "Lazy Function Loading"
CPU_OP_CATS = {"cpu_op", "Operator", "user_annotation", "python_function"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
            "gpu_memset": "memset", "Memset": "memset"}

_LAUNCH = re.compile(r"(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ModuleLaunchKernel|"
                     r"ExtLaunchKernel|cuLaunch|hipLaunch)")
# The allocators handing memory back: cudaFree (the caching allocator's blocks, torch.cuda.empty_cache())
# and cudaFreeHost (pinned blocks) synchronize the device implicitly; cudaFreeAsync is stream-ordered and
# does not. DEVICE_FREE is the device-memory one alone.
FREE_CALL = r"^(?:cuda|hip)Free(?:Host)?$|^cuMemFree"
DEVICE_FREE = r"^(?:cuda|hip)Free$"
_SYNC = re.compile(r"StreamSynchronize|DeviceSynchronize|EventSynchronize|CtxSynchronize|"
                   r"ThreadSynchronize|" + FREE_CALL)
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
    memory: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"ts": [], "thread": []}))  # instants.py

    def gpu_match(self, pattern: str, flags: int = 0) -> np.ndarray:
        """Boolean per gpu row: its name matches the regex (searched once per distinct name; kept, as asked again)."""
        return _match_names(self, "gpu", pattern, flags)

    def cpu_match(self, pattern: str, flags: int = 0) -> np.ndarray:
        """Boolean per cpu row: its name matches the regex (searched once per distinct name; kept, as asked again)."""
        return _match_names(self, "cpu", pattern, flags)

    def name_ranks(self, table: str) -> tuple[np.ndarray, np.ndarray]:
        """(rank per row of the table ("cpu" or "gpu"), names): the rank of each row's name among the
        distinct names in sorted order. A group key that sorts as the names do, so grouping by it gives
        the groups (and order) grouping by the text gives, without hashing every row's text."""
        def compute():
            codes, uniques = self.memo(f"name_codes:{table}",
                                       lambda: pd.factorize(getattr(self, table)["name"], sort=False))
            names, rank = np.unique(np.asarray(uniques, dtype=object), return_inverse=True)
            return (rank.reshape(-1)[codes] if len(codes) else np.zeros(0, dtype=np.int64)), names
        return self.memo(f"name_ranks:{table}", compute)

    def cpu_names_where(self, test) -> np.ndarray:
        """Boolean per cpu row: test(name) holds (called once per distinct name)."""
        return _names_where(self, "cpu", test)

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

    def thread_rows(self) -> dict[str, np.ndarray]:
        """Each thread's cpu rows (ascending; threads in the order they first appear): what
        cpu.groupby("thread", sort=False).indices gives, once per model and from the thread codes
        rather than from hashing a million rows of text. Shared: do not modify the arrays."""
        return self.memo("thread_rows", lambda: _rows_by_value(*self.memo(
            "thread_codes:cpu", lambda: pd.factorize(self.cpu["thread"].to_numpy()))))

    def thread_frames(self, mask: np.ndarray, columns: list[str]) -> dict[str, pd.DataFrame]:
        """The cpu rows where mask holds, one frame per thread with only `columns` (rows in table order,
        the table's index): what cpu[mask].groupby("thread") gives, without copying every column."""
        cols = self.cpu[columns]
        return {th: cols.iloc[r[mask[r]]] for th, r in sorted(self.thread_rows().items()) if mask[r].any()}

    def memo(self, key: str, compute):
        """compute(), once per model: for derived tables several analyses read (blocking calls, ...)."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]


def _match_names(model: "TraceModel", table: str, pattern: str, flags: int) -> np.ndarray:   # (a copy: callers may change theirs)
    return model.memo(f"match:{table}:{flags}:{pattern}", lambda: _names_where(model, table, re.compile(pattern, flags).search)).copy()


def _names_where(model: "TraceModel", table: str, test) -> np.ndarray:
    # A million events carry a few thousand distinct names: factorize once, test the distinct ones.
    codes, uniques = model.memo(f"name_codes:{table}",
                                lambda: pd.factorize(getattr(model, table)["name"], sort=False))
    hit = np.fromiter((bool(test(str(u))) for u in uniques), dtype=bool, count=len(uniques))
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)


def _rows_by_value(codes: np.ndarray, values) -> dict:
    """{value: the rows whose code stands for it (ascending)}, values in the order they first appear.
    Two codes of one value (pid 1 and pid "1" both read "1/...") make one group."""
    values = list(values)
    first: dict = {}
    canon = np.array([first.setdefault(v, i) for i, v in enumerate(values)] + [0], dtype=np.int64)[:-1]
    c = canon[codes] if len(codes) else np.zeros(0, dtype=np.int64)
    order = np.argsort(c, kind="stable")
    counts = np.bincount(c, minlength=len(values))
    groups = np.split(order, np.cumsum(counts)[:-1]) if len(values) else []
    present = sorted((k for k in range(len(values)) if counts[k]), key=lambda k: groups[k][0])
    return {values[k]: groups[k] for k in present}


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
    except (TypeError, ValueError, OverflowError):
        m = re.search(r"-?\d+", str(x))
        return int(m.group()) if m else default


_RKINDS = ["", "launch", "sync", "memcpy", "memset", "other"]
MAX_TS_US = 1e17
MAX_DUR_US = 1e12


def _ids(col: np.ndarray) -> np.ndarray:
    """An id column as the model keeps it: -1 where the event has none or an unusable one."""
    return np.where(col <= BAD, -1, col)


def _str_column(values: list, codes: np.ndarray):
    """values[codes] as the column type pandas infers for text (what the tables always held)."""
    if len(codes) == 0:
        return np.array([], dtype=object)
    return pd.Series(np.array(values + [""], dtype=object)[:-1]).array.take(codes)


def _labels(values: list, codes: np.ndarray) -> pd.Categorical:
    """values[codes] as a categorical column: for the few-valued labels (kind, rkind) that the
    analyses compare against a constant many times; comparing codes costs nothing next to
    comparing a million strings."""
    return pd.Categorical.from_codes(codes, categories=values)


def _objects(values: list, codes: np.ndarray) -> pd.Series:
    """values[codes] as a column of Python objects (names, categories: kept as object, not text)."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return pd.Series(arr[codes] if len(arr) else np.array([], dtype=object), dtype=object, copy=False)


class _Tables:
    """Per distinct value facts about the trace's interned columns (computed once per value)."""

    def __init__(self, raw: RawTrace):
        c = self.c = raw.columns
        self.cat = c.values("cat")
        self.names = ["" if v is None else str(v) for v in c.values("name")]
        self.pids, self.tids = c.values("pid"), c.values("tid")
        ph = c.values("ph")
        cat_kind = np.array([1 if v in CPU_OP_CATS or v in RUNTIME_CATS else (2 if v in GPU_CATS else 0)
                             for v in self.cat] + [0], dtype=np.int8)
        is_x = np.isin(c["ph"], [i for i, v in enumerate(ph) if v == "X"])
        kind = cat_kind[c["cat"]]
        self.cpu_rows = np.flatnonzero(is_x & (kind == 1))
        self.gpu_rows = np.flatnonzero(is_x & (kind == 2))
        ph_code = {v: i for i, v in enumerate(ph)}
        self.n_flows = int((c["ph"] == ph_code.get("s", -1)).sum())
        self.memory_rows = allocation_rows(c, self.cat, ph_code, self.names)
        # CUPTI's "Lazy Function Loading" overhead records: CUDA loading a kernel's code at its first launch.
        lazy_cat = [i for i, v in enumerate(self.cat) if v == "overhead"]
        lazy_name = [i for i, v in enumerate(self.names) if v == LAZY_LOADING]
        self.lazy_rows = (np.flatnonzero(is_x & np.isin(c["cat"], lazy_cat) & np.isin(c["name"], lazy_name))
                          if lazy_cat and lazy_name else np.zeros(0, dtype=np.int64))

    def times(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start, duration (0 where none is usable) and which durations were missing, negative or not numbers."""
        ts = self.c["ts"][rows]
        dur = self.c["dur"][rows]
        bad = ~np.isfinite(dur) | (dur < 0)
        return ts, np.where(~bad & (dur > 0), dur, 0.0), bad


def build_model(raw: RawTrace, peer_waits: tuple | None = None) -> TraceModel:
    """Columns of the events the analysis reads, then vectorised linking and interval arithmetic.

    `peer_waits`: (collective kernel starts on this trace's clock, us of each spent waiting for other ranks),
    from the job's traces (trace/peer_waits.py); the waits leave the kernels and become idle."""
    tb = _Tables(raw)
    c = tb.c
    warnings = list(raw.warnings)
    (cpu_ts, cpu_dur, cpu_bad), (gpu_ts, gpu_dur, gpu_bad) = tb.times(tb.cpu_rows), tb.times(tb.gpu_rows)
    # A start beyond MAX_TS_US (3000 years of microseconds) has no microseconds left in a float64.
    ok_cpu, ok_gpu = np.abs(cpu_ts) <= MAX_TS_US, np.abs(gpu_ts) <= MAX_TS_US
    bad = int((~ok_cpu).sum() + (~ok_gpu).sum())
    if bad:
        warnings.append(f"ignored {bad} events with no usable timestamp")
    # (said, as a bad timestamp is: a kernel whose duration was missing or "abc" had silently lasted 0)
    bad_dur = int(cpu_bad[ok_cpu].sum() + gpu_bad[ok_gpu].sum())
    if bad_dur:
        warnings.append(f"read {bad_dur} events with a missing, negative or non-numeric duration as lasting 0")
    # A range of more than MAX_DUR_US (11.6 days) is no profiler range: it would swamp every sum.
    long_cpu, long_gpu = ok_cpu & (cpu_dur > MAX_DUR_US), ok_gpu & (gpu_dur > MAX_DUR_US)
    if long_cpu.any() or long_gpu.any():
        warnings.append(f"ignored {int(long_cpu.sum() + long_gpu.sum())} events lasting more than "
                        f"{MAX_DUR_US / 86.4e9:.1f} days (not real ranges)")
        ok_cpu, ok_gpu = ok_cpu & ~long_cpu, ok_gpu & ~long_gpu
    if not (ok_cpu.any() or ok_gpu.any()):
        from ..errors import TraceError
        raise TraceError(raw.path, "not a Kineto trace: no complete ('X') CPU or GPU events")
    t0 = float(min(cpu_ts[ok_cpu].min() if ok_cpu.any() else np.inf,
                   gpu_ts[ok_gpu].min() if ok_gpu.any() else np.inf))
    cpu, cpu_names, cpu_threads = _cpu_table(tb, tb.cpu_rows[ok_cpu], cpu_ts[ok_cpu] - t0, cpu_dur[ok_cpu])
    del cpu_ts, cpu_dur
    gpu, gpu_names = _gpu_table(tb, tb.gpu_rows[ok_gpu], gpu_ts[ok_gpu], gpu_dur[ok_gpu], t0)
    gpu = _link_launches(cpu, gpu)
    peer_wait_us = None
    if peer_waits is not None:
        gpu, gpu_names, peer_wait_us = peer_wait_shift(gpu, gpu_names, tb.names, *peer_waits)
    steps, step_source = find_steps(cpu, gpu, raw.meta.get("step_ranges"))
    steps, cut = clip_to_data(steps, cpu, gpu)
    steps = mark_partial(gpu_aware_bounds(steps, cpu, gpu), step_source)
    if step_source == "whole trace":
        warnings.append("no ProfilerStep annotations: the whole trace is analysed as one window")
    gaps, steps, leading_idle = drop_leading_idle(idle_gaps(gpu, steps), steps, gpu, cpu, step_source)
    steps = step_gpu_accounting(steps, gpu, gaps)
    steps, warmup = mark_warmup(steps)

    devices, rocm = {}, rocm_trace(raw.meta, [d.name for d in raw.devices])
    for d in raw.devices:
        if d.id is None:
            continue
        cc = (d.computeMajor, d.computeMinor) if d.computeMajor is not None else None   # (AMD's: gfx; rocm_trace)
        devices[int(d.id)] = Device(id=int(d.id), name=d.name or "unknown GPU", compute_capability=cc, num_sms=d.numSms,
                                    memory_gb=(d.totalGlobalMem / 2**30) if d.totalGlobalMem else None)
    rank = _int_or(raw.distributed.get("rank"), 0) if raw.distributed else 0
    # (peer_wait_us None: not read with a job's other ranks)
    meta = dict(raw.meta, vendor="AMD" if rocm else None, distributed=raw.distributed, warmup_steps=warmup,
                leading_idle_excluded_us=leading_idle, steps_cut_to_data=cut, peer_wait_us=peer_wait_us,
                lazy_loads_us=sorted(float(x) - t0 for x in tb.c["ts"][tb.lazy_rows]), comm_args=c.comm_args)
    _pid, _tid, mem_threads, mem_codes, _rank = _threads(tb, tb.memory_rows)   # (profile_memory's events)
    model = TraceModel(path=raw.path, rank=rank, cpu=cpu, gpu=gpu, steps=steps, gaps=gaps,
                       devices=devices, meta=meta, thread_names=dict(c.thread_names), warnings=warnings,
                       t0_us=t0, n_events=c.n, n_flows=tb.n_flows, step_source=step_source,
                       memory=memory_table(c["ts"][tb.memory_rows],
                                           np.array(mem_threads + [""], dtype=object)[mem_codes], t0, MAX_TS_US))
    # The name codes cpu_match / gpu_match need come with the interned columns.
    uniques = np.array(tb.names + [""], dtype=object)[:-1]
    model.memo("name_codes:cpu", lambda: (cpu_names, uniques))
    model.memo("name_codes:gpu", lambda: (gpu_names, uniques))
    model.memo("thread_codes:cpu", lambda: cpu_threads)
    # (after the model: the compile spans are read through its name index)
    model.meta["compile_steps"] = mark_compiling(model)
    return model


def _threads(tb: _Tables, rows: np.ndarray):
    """Codes of pid, tid, "pid/tid" text and each thread's rank in name order (a sort key that does not
    depend on the order of events in the file), from the distinct (pid, tid) pairs only."""
    pc, tc = tb.c["pid"][rows].astype(np.int64), tb.c["tid"][rows].astype(np.int64)
    codes, pairs = pd.factorize(pc * max(1, len(tb.tids)) + tc)
    nt = max(1, len(tb.tids))
    pid_text = [str(v) for v in tb.pids]
    tid_text = [str(v) for v in tb.tids]
    names = [f"{pid_text[p // nt]}/{tid_text[p % nt]}" for p in pairs.tolist()]
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(np.array(names + [""], dtype=object)[:-1], kind="stable")] = np.arange(len(names))
    return pid_text, tid_text, names, codes, rank[codes] if len(codes) else np.zeros(0, dtype=np.int64)


def _cpu_table(tb: _Tables, rows: np.ndarray, ts: np.ndarray,
               dur: np.ndarray) -> tuple[pd.DataFrame, np.ndarray, tuple[np.ndarray, list]]:
    """The cpu table in nesting order, its name codes and (thread codes, thread names). Columns are
    taken from the raw ones through the final row order, one at a time: a few million rows never
    exist twice over."""
    c = tb.c
    kind_of_cat = np.array([(1 if v in RUNTIME_CATS else 2 if v == "python_function" else
                             3 if v == "user_annotation" else 0) for v in tb.cat] + [0], dtype=np.int8)
    kind = kind_of_cat[c["cat"][rows]]
    # PyTorch 1.8-1.9 wrote step and optimizer ranges as plain `Operator` events.
    op_cat = [i for i, v in enumerate(tb.cat) if v == "Operator"]
    if op_cat:
        legacy = np.array([bool(_LEGACY_ANNOTATION.match(n)) for n in tb.names] + [False])
        kind[np.isin(c["cat"][rows], op_cat) & legacy[c["name"][rows]]] = 3
    ext_id = _ids(c["external_id"][rows])
    pid_text, tid_text, thread_names, thread, rank = _threads(tb, rows)
    order = nesting_order(rank, ts, dur, kind == 1, ext_id,
                          lambda sel: [tb.names[k] for k in c["name"][rows[sel]]])
    del rank
    rows, ts, dur, kind, ext_id, thread = rows[order], ts[order], dur[order], kind[order], ext_id[order], thread[order]
    del order
    end = ts + dur
    parent, depth = nest(thread, ts, end)
    name = c["name"][rows]
    rkind_of_name = np.array([_RKINDS.index(runtime_kind(n)) for n in tb.names] + [0], dtype=np.int64)
    is_step_name = np.array([bool(STEP_NAME.match(n)) for n in tb.names] + [False])
    dims = c["dims"][rows]
    dims_vals = c.values("dims")
    df = pd.DataFrame({
        "pid": _str_column(pid_text, c["pid"][rows]),
        "tid": _str_column(tid_text, c["tid"][rows]),
        "thread": _str_column(thread_names, thread),
        "name": _objects(tb.names, name),
        "cat": _objects(tb.cat, c["cat"][rows]),
        "kind": _labels(["op", "runtime", "python", "annotation"], kind),
        "ts": ts,
        "dur": dur,
        "ext_id": ext_id,
        "correlation": _ids(c["correlation"][rows]),
        # Raw JSON bytes, turned into text only for the few ops a table shows (dims_text).
        "input_dims": _objects(dims_vals + [b""], np.where(dims >= 0, dims, len(dims_vals))),
        "rkind": _labels(_RKINDS, np.where(kind == 1, rkind_of_name[name], 0)),
        "end": end,
        "parent": parent,
        "depth": depth,
        "top_op": top_ops(parent, depth, kind == 0),
        "is_step": (kind == 3) & is_step_name[name],
    }, copy=False)
    return df, name, (thread, thread_names)


def _gpu_table(tb: _Tables, rows: np.ndarray, ts: np.ndarray, dur: np.ndarray,
               t0: float) -> tuple[pd.DataFrame, np.ndarray]:
    c = tb.c
    order = np.lexsort((dur, ts))          # by the file's own times, then made relative
    rows, ts, dur = rows[order], ts[order] - t0, dur[order]
    name = c["name"][rows]
    kind = np.array([GPU_CATS.get(v, "") for v in tb.cat] + [""], dtype=object)[c["cat"][rows]]
    device = _with_fallback(c["device"][rows], c["pid"][rows], tb.pids)
    stream = _with_fallback(c["stream"][rows], c["tid"][rows], tb.tids)
    df = pd.DataFrame({
        "device": device,
        "stream": stream,
        "name": _objects(tb.names, name),
        "kind": pd.Series(kind, dtype=object, copy=False),
        "ts": ts,
        "dur": dur,
        "correlation": _ids(c["correlation"][rows]),
        "ext_id": _ids(c["external_id"][rows]),
        "bytes": c.sparse("bytes", rows, 0.0),
        "grid": grid_ranks(c, rows),      # the launch grid as a number (-1: none): equal numbers, equal grids
        "threads": launch_threads(c, rows),      # how many threads the launch holds, grid x block (-1: none)
    }, copy=False)
    # Only copies have a direction and host memory kind; parse each distinct copy name once.
    is_copy = kind == "memcpy"
    parsed = [_MEMCPY_NAME.search(n) for n in tb.names] + [None]
    for k, col in enumerate(("copy_dir", "copy_src", "copy_dst")):
        vals = np.array([(m.group(k + 1) or "") if m else "" for m in parsed], dtype=object)
        df[col] = np.where(is_copy, vals[name], "") if len(rows) else ""
    pg = np.array(["Pageable" in n for n in tb.names] + [False])
    df["pageable"] = is_copy & pg[name]
    df["end"] = df["ts"] + df["dur"]
    return df, name


def _with_fallback(ids: np.ndarray, codes: np.ndarray, values: list) -> np.ndarray:
    """device / stream: the args value, else the event's pid / tid read as a number (0 if none)."""
    as_int = np.array([_int_or(v, 0) for v in values] + [0], dtype=np.int64)
    out = np.where(ids == MISSING, as_int[codes], ids)
    return np.where(out == BAD, 0, out).astype(np.int64)


def _link_launches(cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    """gpu.launcher = cpu row of the runtime call with the same correlation id (-1 if none)."""
    corr = cpu["correlation"].to_numpy()
    rt = np.flatnonzero((cpu["kind"] == "runtime").to_numpy() & (corr >= 0))
    # A correlation id is unique per process; if a merged file repeats one, the first launch wins.
    keys, first = np.unique(corr[rt], return_index=True)
    g = gpu["correlation"].to_numpy()
    k = np.minimum(np.searchsorted(keys, g), max(len(keys) - 1, 0))
    hit = (g >= 0) & (len(keys) > 0) & (keys[k] == g) if len(keys) else np.zeros(len(g), dtype=bool)
    gpu["launcher"] = np.where(hit, rt[first[k]] if len(keys) else -1, -1).astype(np.int64)
    return gpu
