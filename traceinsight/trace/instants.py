"""profile_memory's allocation events: [memory] instants (cat cpu_instant_event), one per allocation and free,
on the thread that made it. Not ranges: what recording them cost the CPU is all the analysis reads of them
(profiler_cost.MEMORY_EVENT_US)."""
from __future__ import annotations

import numpy as np
import pandas as pd

MEMORY_NAME = "[memory]"


def allocation_rows(c, cats: list, ph_code: dict, names: list[str]) -> np.ndarray:
    """The raw rows of the allocation events: instants (ph "i", cat cpu_instant_event) named [memory]."""
    cat = [i for i, v in enumerate(cats) if v == "cpu_instant_event"]
    alloc = [i for i, v in enumerate(names) if v == MEMORY_NAME]
    if not (cat and alloc):
        return np.zeros(0, np.int64)
    return np.flatnonzero((c["ph"] == ph_code.get("i", -1)) & np.isin(c["cat"], cat) & np.isin(c["name"], alloc))


def memory_table(ts: np.ndarray, threads, t0: float, max_ts: float) -> pd.DataFrame:
    """The allocation events with a usable start: start (us, on the cpu table's clock, t0 its origin) and thread
    (as the cpu table names it), by start."""
    ok = np.isfinite(ts) & (np.abs(ts) <= max_ts)
    ts, threads = ts[ok] - t0, np.asarray(threads, dtype=object)[ok]
    order = np.argsort(ts, kind="stable")
    return pd.DataFrame({"ts": ts[order], "thread": threads[order]})
