"""What a rank's task sends back to the driver: numbers and small arrays, never the rank's tables.

A rank of a 1 GB trace comes back as a few hundred collectives and steps (tens of KB pickled), so the
driver can hold thousands of them. Times are microseconds on the rank's own clock: 0 is its first
event, and `epoch_ns` says when that was in Unix time (from baseTimeNanoseconds), so the driver can
put every rank on one clock without losing precision (float64 epoch microseconds keep only 0.25 us).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Per-step columns of RankSummary.steps: what the rank did in each whole step (the straggler is compared with the
# median rank over them).
WORK = ("untraced", "data", "cpu", "gpu")


@dataclass
class RankSummary:
    path: str
    rank: int = -1
    world_size: int | None = None
    backend: str | None = None
    host: str | None = None
    rank_source: str = "distributedInfo"      # or "file name", "unknown"
    pg_config: list = field(default_factory=list)   # [{"name", "desc", "size"}]
    epoch_ns: int | None = None               # Unix time of this rank's clock origin, ns
    epoch_source: str = "none"                # "baseTimeNanoseconds" | "absolute ts" | "none"
    file_bytes: int = 0
    has_gpu: bool = False
    # One entry per step window (ProfilerStep#N; one window for a trace without steps).
    steps: dict = field(default_factory=dict)     # step, start, end, dur, partial, comm, exposed, cpu_own,
    #                                               compute, profiler_cost, and WORK
    # One entry per collective, in issue order. pg / op / dtype are codes into the lists below.
    pgs: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    dtypes: list = field(default_factory=list)
    coll: dict = field(default_factory=dict)      # pg, seq, step, idx, op, dtype, nelems, out_nelems,
    #                                               group, enqueue, start, end
    step_ops: list = field(default_factory=list)  # [(where, name, shape, us, count)] in the rank's steps
    dropped: dict = field(default_factory=dict)   # prewindow / p2p / unlinked collectives left out
    warnings: list = field(default_factory=list)
    error: str | None = None

    @property
    def n_coll(self) -> int:
        return len(self.coll.get("start", ()))


def empty_coll() -> dict:
    ints = ("pg", "seq", "step", "idx", "op", "dtype", "nelems", "out_nelems", "group")
    out = {k: np.zeros(0, dtype=np.int64) for k in ints}
    out.update({k: np.zeros(0) for k in ("enqueue", "start", "end")})
    return out
