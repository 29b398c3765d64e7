"""profile_memory's allocation events: [memory] instants (cat cpu_instant_event), one per allocation and free,
on the thread that made it. Not ranges: what recording them cost the CPU is all the analysis reads of them
(profiler_cost.MEMORY_EVENT_US)."""
from __future__ import annotations

import numpy as np
import pandas as pd

MEMORY_NAME = "[memory]"


def instant_rows(c, cats: list, ph_code: dict, names: list[str]) -> tuple[int, np.ndarray]:
    """How many CPU instants (cat cpu_instant_event) the trace holds, and the raw rows of the allocation events
    among them."""
    instant = (c["ph"] == ph_code.get("i", -1)) & np.isin(c["cat"], [i for i, v in enumerate(cats)
                                                                      if v == "cpu_instant_event"])
    alloc = [i for i, v in enumerate(names) if v == MEMORY_NAME]
    return int(instant.sum()), (np.flatnonzero(instant & np.isin(c["name"], alloc)) if alloc
                                else np.zeros(0, np.int64))


def memory_table(c, rows: np.ndarray, pids: list, tids: list, t0: float, max_ts: float) -> pd.DataFrame:
    """Start (us, on the cpu table's clock) and thread ("pid/tid", as the cpu table names it) of each
    allocation event, by start."""
    ts = c["ts"][rows]
    rows = rows[np.isfinite(ts) & (np.abs(ts) <= max_ts)]
    if not len(rows):
        return pd.DataFrame({"ts": np.zeros(0), "thread": np.array([], dtype=object)})
    pairs, codes = np.unique(np.stack([c["pid"][rows], c["tid"][rows]]).astype(np.int64), axis=1,
                             return_inverse=True)
    names = np.array([f"{pids[p]!s}/{tids[t]!s}" for p, t in pairs.T] + [""], dtype=object)[:-1]
    order = np.argsort(c["ts"][rows], kind="stable")
    return pd.DataFrame({"ts": c["ts"][rows][order] - t0, "thread": names[codes.reshape(-1)[order]]})
