"""view: the events of a loaded trace as objects, the way the whole-file loader gave them.

For tests and small tools (a million of these is what the columnar loader exists to avoid). Ids
written as something else than an int come back as written; times are floats (None when absent);
stream, device, bytes, bandwidth and Input Dims are not read on Python frames (None / b"").
"""
from __future__ import annotations

import numpy as np

from .events import BAD, ID_FIELDS, MISSING, Columns


class ArgsView:
    __slots__ = ("correlation", "external_id", "stream", "device", "bytes", "bandwidth", "input_dims",
                 "meta_name")


class EventView:
    """One event as it was read: what load.Event held before the loader became columnar."""
    __slots__ = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")


def event_views(c: Columns) -> list[EventView]:
    """All events as objects: for tests and small tools only (a big trace should stay in columns)."""
    vals = {f: c.values(f) for f in ("ph", "cat", "name", "pid", "tid", "dims")}
    rows = np.arange(c.n)
    byt, bw = c.sparse("bytes", rows), c.sparse("bandwidth", rows)
    out = []
    for i in range(c.n):
        e = EventView()
        for f in ("ph", "cat", "name", "pid", "tid"):
            setattr(e, f, vals[f][c[f][i]])
        for f in ("ts", "dur"):
            v = float(c[f][i])
            setattr(e, f, None if np.isnan(v) else v)
        a = ArgsView()
        for f in ID_FIELDS:
            v = int(c[f][i])
            setattr(a, f, c.odd_ids[f].get(i, None if v in (MISSING, BAD) else v))
        a.bytes = None if np.isnan(byt[i]) else float(byt[i])
        a.bandwidth = None if np.isnan(bw[i]) else float(bw[i])
        d = int(c["dims"][i])
        a.input_dims = vals["dims"][d] if d >= 0 else b""
        a.meta_name = (c.thread_names.get((e.pid, e.tid))
                       if e.ph == "M" and e.name == "thread_name" else None)
        e.args = a
        out.append(e)
    return out
