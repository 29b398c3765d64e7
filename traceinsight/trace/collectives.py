"""What each collective kernel moved and how fast: its op, dtype, bytes and group from the args PyTorch writes on
NCCL kernels (CUDA) or on the record_param_comms range that launched it (any backend, RCCL's too), and its bus
bandwidth as NCCL's tests define it. Read by the single-rank communication findings and by the job's table.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .events import COMM_RANGE
from .facts import is_collective
from .model import TraceModel

# Order matters: the specific names before the ones they contain (allreduce before reduce).
_OPS = [("allreduce", r"all_?reduce"), ("reducescatter", r"reduce_?scatter"),
        ("allgather", r"all_?gather"), ("alltoall", r"all_?to_?all"), ("broadcast", r"broadcast|bcast"),
        ("barrier", r"barrier"), ("reduce", r"reduce"), ("gather", r"gather"), ("scatter", r"scatter"),
        ("send", r"send"), ("recv", r"recv"), ("coalesced", r"coalesced")]
_OP_RX = [(op, re.compile(rx, re.I)) for op, rx in _OPS]

DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
               "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "byte": 1, "uint8": 1,
               "char": 1, "int8": 1, "bool": 1, "complexfloat": 8, "complexdouble": 16}

# NCCL-tests bus bandwidth factors, n = group size: what each rank's links carry, comparable across ops.
BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
              "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0}


def op_kind(name: str) -> str:
    """A collective's kind from any of its names (Collective name, c10d op, gloo range, NCCL kernel)."""
    for op, rx in _OP_RX:
        if rx.search(name):
            return op
    return "unknown"


def dtype_bytes(dtype: str) -> int:
    d = (dtype or "").lower().replace("torch.", "")
    if d.startswith("float8"):
        return 1
    return DTYPE_BYTES.get(d, 0)


def busbw_gbps(op: str, nbytes: float, group: int, us: float) -> float | None:
    """NCCL-tests bus bandwidth (GB/s) of one collective; None where it has none (unknown op, no size or time)."""
    f = BUS_FACTOR.get(op)
    if f is None or nbytes <= 0 or us <= 0 or group < 1:
        return None
    return nbytes / (us * 1e3) * f(int(group))


def _int(x) -> int:
    try:
        return int(float(x))
    except (TypeError, ValueError):
        return 0


def sizes(model: TraceModel) -> pd.DataFrame:
    """One row per collective kernel whose size the trace records: its gpu row, op, dtype, bytes, group size
    and duration (us). Kernel args first; else those of the record_param_comms range whose launch ran it."""
    return model.memo("collective_sizes", lambda: _sizes(model))


def _sizes(model: TraceModel) -> pd.DataFrame:
    cols = ["row", "op", "dtype", "bytes", "group", "dur"]
    args = model.meta.get("comm_args") or []
    g = model.gpu
    if not args or g.empty:
        return pd.DataFrame(columns=cols)
    kernel = (g["kind"] == "kernel").to_numpy() & is_collective(model)
    by_corr, by_ext = {}, {}
    for on_kernel, key, name, dtype, n_in, n_out, group in args:
        (by_corr if on_kernel else by_ext)[key] = (str(name or ""), str(dtype or ""), max(_int(n_in), _int(n_out)),
                                                   _int(group))
    found: dict[int, tuple] = {}
    if by_corr:
        corr = g["correlation"].to_numpy()
        for r in np.flatnonzero(kernel).tolist():
            info = by_corr.get(int(corr[r]))
            if info is not None:
                found[r] = info
    if by_ext:
        found.update({r: i for r, i in _launched_by_ranges(model, by_ext, kernel).items() if r not in found})
    rows = []
    dur = g["dur"].to_numpy()
    for r, (name, dtype, nel, group) in sorted(found.items()):
        rows.append((r, op_kind(name), dtype, nel * dtype_bytes(dtype), group, float(dur[r])))
    return pd.DataFrame(rows, columns=cols)


def range_above(parent: np.ndarray, is_range: np.ndarray, row: int, hops: int = 64) -> int:
    """The innermost cpu row at or above `row` (up its parents, at most `hops` of them) that `is_range` marks (a
    record_param_comms range above a launch call); -1 where none is."""
    p, n = row, 0
    while p >= 0 and n < hops and not is_range[p]:
        p, n = int(parent[p]), n + 1
    return p if p >= 0 and is_range[p] else -1


def _launched_by_ranges(model: TraceModel, by_ext: dict, kernel: np.ndarray) -> dict[int, tuple]:
    """{collective kernel's gpu row: the args of the record_param_comms range whose launch call (inside it) ran it}."""
    cpu, g = model.cpu, model.gpu
    is_range = model.cpu_match(f"^{COMM_RANGE}$")
    if not is_range.any():
        return {}
    ext, parent = cpu["ext_id"].to_numpy(), cpu["parent"].to_numpy()
    lr = g["launcher"].to_numpy()
    out = {}
    for row in np.flatnonzero(kernel & (lr >= 0)).tolist():
        p = range_above(parent, is_range, int(lr[row]))
        if p >= 0 and int(ext[p]) in by_ext:
            out[row] = by_ext[int(ext[p])]
    return out
