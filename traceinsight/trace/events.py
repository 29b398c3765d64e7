"""events: pieces of a traceEvents array -> growing columns (numpy) of the fields the model reads.

A piece (a few hundred KB of complete events) is decoded by msgspec into short-lived Structs, which
are turned into columns at once and dropped: a trace never exists as a million Python objects.
Strings that repeat (ph, cat, name, pid, tid, Input Dims) are interned into integer codes.

Decoding a piece, leniently where an event has an odd field, is decode.py's.
Ids are int64 with MISSING (absent) and BAD (present but unusable); times are float64 with NaN for
absent or unusable.
"""
from __future__ import annotations

import re
from itertools import repeat
from operator import attrgetter, index, is_not, itemgetter

import numpy as np

from .decode import BAD, MISSING, NAN, NO_ARGS, NO_DIMS, Event, Lenient

_GET = {f: attrgetter(f) for f in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")}
# The interned fields, read together as one key (see Columns._codes).
KEY_FIELDS = ("ph", "cat", "name", "pid", "tid")
_KEY = attrgetter(*KEY_FIELDS)
_RAW = {"dims": attrgetter("input_dims"), "grid": attrgetter("grid"), "block": attrgetter("block")}
_ARGF = {f: attrgetter(f) for f in ("correlation", "external_id", "stream", "device", "bytes", "bandwidth")}
# Python frames (half the events of a with_stack trace) carry only Python ids: no stream, device,
# bytes or Input Dims is looked for on them.
NO_DEVICE_ARGS_CATS = frozenset({"python_function"})
COMM_RANGE = "record_param_comms"     # c10d's range around a collective's launch, with its args
ID_FIELDS = ("correlation", "external_id", "stream", "device")


# ---------------------------------------------------------------- interning

class Intern:
    """value -> small int code, over the whole trace. Values keep their JSON type (1 vs "1").

    Lookups go through a dict keyed by the value itself (one C-level pass per piece). A dict merges
    1, 1.0 and True; where such values can meet (a float or a bool seen, or ints where floats may
    come), lookups switch to keys tagged with the type, which is slower but exact.
    """

    def __init__(self, floats_possible: bool = False):
        self.index: dict = {}          # value -> code (untyped mode)
        self.typed: dict | None = None  # (type, value) -> code (typed mode)
        self.values: list = []
        self.floats_possible = floats_possible

    def _typed_key(self, v):
        return (None, None) if v is None else (type(v), v)

    def code(self, value) -> int:
        """The code of one value (registering it if new)."""
        if self.typed is None:
            t = type(value)
            if t is float or t is bool or (t is int and self.floats_possible):
                self.typed = {self._typed_key(v): i for i, v in enumerate(self.values)}
            else:
                c = self.index.get(value)
                if c is None:
                    c = self.index[value] = len(self.values)
                    self.values.append(value)
                return c
        key = self._typed_key(value)
        c = self.typed.get(key)
        if c is None:
            c = self.typed[key] = len(self.values)
            self.values.append(value)
        return c

    def find(self, value) -> int | None:
        return self.index.get(value) if self.typed is None else self.typed.get(self._typed_key(value))

    def codes(self, vals, n: int, get=None) -> np.ndarray:
        """Codes of n values: vals is a list, or a list of objects to read each value from with get
        (the values then need no list of their own)."""
        values = map(get, vals) if get is not None else vals
        if self.typed is None:
            out = np.fromiter(map(self.index.get, values, repeat(-1)), np.int32, n)
            miss = np.flatnonzero(out < 0)
            for i in miss.tolist():
                out[i] = self.code(get(vals[i]) if get is not None else vals[i])
                if self.typed is not None:     # a value that may alias others: redo exactly
                    break
            else:
                return out
            values = map(get, vals) if get is not None else vals
        key = self._typed_key
        return np.fromiter((self.code(v) if (c := self.typed.get(key(v))) is None else c for v in values),
                           np.int32, n)


# ---------------------------------------------------------------- slow paths for odd values

_DIGITS = re.compile(r"-?\d+")


def id_value(v) -> int:
    """An id as int64: MISSING when absent or null, BAD when it cannot be read (old `_int_or`)."""
    if v is None or v == MISSING:
        return MISSING
    if isinstance(v, bool):
        return BAD
    if not isinstance(v, int):
        try:
            v = int(float(v))
        except (TypeError, ValueError, OverflowError):
            m = _DIGITS.search(str(v))
            if not m:
                return BAD
            v = int(m.group())
    return v if -2 ** 63 + 2 <= v < 2 ** 63 else BAD


def float_value(v) -> float:
    if v is None:
        return NAN
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return NAN


def _floats(vals_iter_fn, n: int) -> np.ndarray:
    try:
        return np.fromiter(vals_iter_fn(), np.float64, n)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(map(float_value, vals_iter_fn()), np.float64, n)


def _ids(vals_iter_fn, n: int, odd: dict | None = None, base: int = 0, rows=None) -> np.ndarray:
    """An int64 id column. Values written as anything but an int are read by id_value and, when odd
    is given, kept as written in odd[row] (row: base + i, or base + rows[i])."""
    try:
        out = np.fromiter(map(index, vals_iter_fn()), np.int64, n)
        if not ((out > MISSING) & (out <= BAD)).any():   # nothing in the sentinel range came in
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    vals = list(vals_iter_fn())
    if odd is not None:
        for i, v in enumerate(vals):
            if v is not None and type(v) is not int:
                odd[base + (i if rows is None else int(rows[i]))] = v
    return np.fromiter(map(id_value, vals), np.int64, n)


# ---------------------------------------------------------------- columns

class Columns:
    """Every event of the trace as columns. Codes index the Intern tables' values."""

    def __init__(self):
        self.interns = {f: Intern(floats_possible=f == "name") for f in ("ph", "cat", "name", "pid", "tid", "dims",
                                                                        "grid", "block")}
        self._parts: dict[str, list] = {f: [] for f in (
            "ph", "cat", "name", "pid", "tid", "ts", "dur", *ID_FIELDS, "dims", "grid", "block", "sparse_rows",
            "bytes", "bandwidth")}
        self.arrays: dict[str, np.ndarray] = {}
        self.n = 0
        self.thread_names: dict = {}
        self.lenient = Lenient()
        self._host = np.zeros(0, dtype=bool)
        # (ph, cat, name, pid, tid) -> its column in _key_table, which holds the five codes (None: looked
        # up field by field). New keys come in most pieces: the table grows by doubling, not by copies.
        self._keys: dict | None = {}
        self._key_table = np.zeros((len(KEY_FIELDS), 1024), dtype=np.int32)
        # Ids written as something else than an int ("0x1f", "7", 7.0): row -> the value as written.
        self.odd_ids: dict[str, dict] = {f: {} for f in ID_FIELDS}
        # Collectives' own args (trace/collectives.py): (on a kernel?, its correlation or External id, name, dtype,
        # in and out elements, group size), from the NCCL kernels and record_param_comms ranges: a few a step.
        self.comm_args: list[tuple] = []

    def values(self, field: str) -> list:
        return self.interns[field].values

    def add(self, evs: list[Event]) -> None:
        """Append decoded events (the list is not kept)."""
        n = len(evs)
        if not n:
            return
        args = list(map(_GET["args"], evs))
        if not all(map(is_not, args, repeat(None))):     # "args": null
            args = [NO_ARGS if a is None else a for a in args]
        p = self._parts
        for f, codes in zip(KEY_FIELDS, self._codes(evs, n)):
            p[f].append(codes)
        p["ts"].append(_floats(lambda: map(_GET["ts"], evs), n))
        p["dur"].append(_floats(lambda: map(_GET["dur"], evs), n))
        for f in ("correlation", "external_id"):
            p[f].append(_ids(lambda g=_ARGF[f]: map(g, args), n, self.odd_ids[f], self.n))
        # Stream, device, bytes, bandwidth, Input Dims: not looked for on Python frames. Bytes and
        # bandwidth (copies, memsets, some runtime calls) are kept as (row, value) pairs.
        rows = np.flatnonzero(~self._host_cat()[p["cat"][-1]])
        sub = args if len(rows) == n else (itemgetter(*rows.tolist())(args) if len(rows) > 1 else
                                           [args[i] for i in rows.tolist()])
        for f in ("stream", "device"):
            col = np.full(n, MISSING, dtype=np.int64)
            col[rows] = _ids(lambda g=_ARGF[f]: map(g, sub), len(rows), self.odd_ids[f], self.n, rows)
            p[f].append(col)
        byt = _floats(lambda: map(_ARGF["bytes"], sub), len(rows))
        bw = _floats(lambda: map(_ARGF["bandwidth"], sub), len(rows))
        has = ~(np.isnan(byt) & np.isnan(bw))
        p["sparse_rows"].append(rows[has] + self.n)
        p["bytes"].append(byt[has])
        p["bandwidth"].append(bw[has])
        p["dims"].append(self._raw("dims", sub, rows, n))
        # (kernels only: the only events with a grid and block, a few in a million-event trace of ops and frames)
        k = np.flatnonzero(self._kernel_cat()[p["cat"][-1]])
        ka = [args[i] for i in k.tolist()]
        p["grid"].append(self._raw("grid", ka, k, n))
        p["block"].append(self._raw("block", ka, k, n))
        self._comm_args(args, k, p["name"][-1])
        self._meta_names(evs, p["ph"][-1], p["name"][-1])
        self.n += n

    def _codes(self, evs: list[Event], n: int) -> list[np.ndarray]:
        """The codes of the KEY_FIELDS of n events, one array per field.

        An event's five come in few combinations (a few thousand in a million events), so they are
        looked up as one key: one getattr and one dict lookup per event instead of five. New keys
        register their values field by field, in event order, so the codes are those a field-by-field
        lookup gives. Exact while every name is text: a number as a name (1 == 1.0 == True as keys)
        turns the shortcut off for the rest of the trace.
        """
        if self._keys is not None:
            rows = np.fromiter(map(self._keys.get, map(_KEY, evs), repeat(-1)), np.int32, n)
            for i in np.flatnonzero(rows < 0).tolist():
                k = _KEY(evs[i])
                r = self._keys.get(k)
                if r is None:
                    if not (type(k[2]) is str or k[2] is None):
                        self._keys = None
                        break
                    r = self._keys[k] = len(self._keys)
                    if r == self._key_table.shape[1]:
                        self._key_table = np.concatenate([self._key_table, np.zeros_like(self._key_table)], axis=1)
                    self._key_table[:, r] = [self.interns[f].code(v) for f, v in zip(KEY_FIELDS, k)]
                rows[i] = r
            else:
                return [t[rows] for t in self._key_table]
        return [self.interns[f].codes(evs, n, _GET[f]) for f in KEY_FIELDS]

    def _kernel_cat(self) -> np.ndarray:
        cats = self.interns["cat"].values
        if len(getattr(self, "_kernel", ())) != len(cats):
            self._kernel = np.array([c == "kernel" for c in cats], dtype=bool)
        return self._kernel

    def _host_cat(self) -> np.ndarray:
        cats = self.interns["cat"].values
        if len(self._host) != len(cats):
            self._host = np.array([c in NO_DEVICE_ARGS_CATS for c in cats], dtype=bool)
        return self._host

    def _raw(self, field: str, args, rows: np.ndarray, n: int) -> np.ndarray:
        """Codes (-1: none) of a raw-JSON arg (Input Dims, grid) of n events, looked for on args, those of the
        given rows."""
        raws = list(map(_RAW[field], args))
        out = np.full(n, -1, dtype=np.int32)
        has = np.flatnonzero(np.fromiter(map(is_not, raws, repeat(NO_DIMS)), bool, len(raws)))
        if len(has):
            out[rows[has]] = self.interns[field].codes([bytes(raws[i]) for i in has.tolist()], len(has))
        return out

    def _comm_args(self, args: list, kernels: np.ndarray, name: np.ndarray) -> None:
        """Collect the collective args of this piece's kernels and record_param_comms ranges."""
        rpc = self.interns["name"].find(COMM_RANGE)
        ops = np.flatnonzero(name == rpc) if rpc is not None else np.zeros(0, dtype=np.int64)
        for rows, on_kernel in ((kernels, True), (ops, False)):
            for i in rows.tolist():
                a = args[i]
                if a.coll_name is None and a.out_nelems is None and a.in_nelems is None:
                    continue
                key = a.correlation if on_kernel else a.external_id
                self.comm_args.append((on_kernel, key, a.coll_name, a.dtype, a.in_nelems, a.out_nelems, a.group_size))

    def _meta_names(self, evs: list[Event], ph: np.ndarray, name: np.ndarray) -> None:
        m, tn = self.interns["ph"].find("M"), self.interns["name"].find("thread_name")
        if m is None or tn is None:
            return
        for i in np.flatnonzero((ph == m) & (name == tn)).tolist():
            e = evs[i]
            self.thread_names[(e.pid, e.tid)] = e.args.meta_name

    def finish(self) -> "Columns":
        """Join the pieces into one array per field (one field at a time: peak memory stays low)."""
        empty = {"ts": np.float64, "dur": np.float64, "bytes": np.float64, "bandwidth": np.float64,
                 "sparse_rows": np.int64, **{f: np.int64 for f in ID_FIELDS}}
        for f in list(self._parts):
            parts = self._parts.pop(f)
            self.arrays[f] = (np.concatenate(parts) if parts
                              else np.zeros(0, dtype=empty.get(f, np.int32)))
        return self

    def __getitem__(self, field: str) -> np.ndarray:
        return self.arrays[field]

    def sparse(self, field: str, rows: np.ndarray, default: float = NAN) -> np.ndarray:
        """Values of a (row, value) field at the given rows; default where the event has none."""
        sr = self.arrays["sparse_rows"]
        out = np.full(len(rows), default)
        if len(sr) and len(rows):
            k = np.minimum(np.searchsorted(sr, rows), len(sr) - 1)
            hit = sr[k] == rows
            vals = self.arrays[field][k[hit]]
            out[hit] = np.where(np.isnan(vals), default, vals)
        return out
