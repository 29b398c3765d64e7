"""events: pieces of a traceEvents array -> growing columns (numpy) of the fields the model reads.

A piece (a few hundred KB of complete events) is decoded by msgspec into short-lived Structs, which
are turned into columns at once and dropped: a trace never exists as a million Python objects.
Strings that repeat (ph, cat, name, pid, tid, Input Dims) are interned into integer codes.

An event with an odd field type is decoded again leniently, dropping only that field; numbers outside
what msgspec reads (1e400, 40-digit ints) go through the json module, invalid UTF-8 becomes U+FFFD.
Ids are int64 with MISSING (absent) and BAD (present but unusable); times are float64 with NaN for
absent or unusable.
"""
from __future__ import annotations

import json
import math
import re
from itertools import repeat
from operator import attrgetter, index, is_not, itemgetter
from typing import Union

import msgspec
import numpy as np

NAN = float("nan")
MISSING = -(2 ** 63)       # an id the event does not have
BAD = MISSING + 1          # an id the event has, in a form we cannot read
_NO_DIMS = msgspec.Raw(b"")


class Args(msgspec.Struct, forbid_unknown_fields=False, gc=False, frozen=True):
    """The event args we read (names with spaces are Kineto's own); msgspec skips the rest."""
    correlation: Union[int, str, None] = MISSING
    external_id: Union[int, str, None] = msgspec.field(default=MISSING, name="External id")
    stream: Union[int, str, None] = MISSING
    device: Union[int, str, None] = MISSING
    bytes: Union[int, float, None] = NAN
    bandwidth: Union[int, float, None] = msgspec.field(default=NAN, name="memory bandwidth (GB/s)")
    # Raw JSON bytes: only ever shown as text, so never worth building nested lists for.
    input_dims: msgspec.Raw = msgspec.field(default=_NO_DIMS, name="Input Dims")
    # "M" metadata events name their process / thread here.
    meta_name: Union[str, int, None] = msgspec.field(default=None, name="name")


NO_ARGS = Args()


class Event(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    ph: str = ""
    cat: Union[str, None] = None
    name: Union[str, int, float, None] = ""
    pid: Union[int, str, None] = 0
    tid: Union[int, str, None] = 0
    ts: Union[float, str, None] = NAN
    dur: Union[float, str, None] = NAN
    args: Union[Args, None] = NO_ARGS


PIECE_DECODER = msgspec.json.Decoder(list[Event])
_GET = {f: attrgetter(f) for f in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")}
# The interned fields, read together as one key (see Columns._codes).
KEY_FIELDS = ("ph", "cat", "name", "pid", "tid")
_KEY = attrgetter(*KEY_FIELDS)
_DIMS = attrgetter("input_dims")
_ARGF = {f: attrgetter(f) for f in ("correlation", "external_id", "stream", "device", "bytes", "bandwidth")}
# Python frames (half the events of a with_stack trace) carry only Python ids: no stream, device,
# bytes or Input Dims is looked for on them.
NO_DEVICE_ARGS_CATS = frozenset({"python_function"})
ID_FIELDS = ("correlation", "external_id", "stream", "device")


# ---------------------------------------------------------------- decoding one piece

class Lenient:
    """Counts what the lenient decode had to drop, for the warnings."""

    def __init__(self):
        self.bad_fields = 0
        self.bad_entries = 0
        self.bad_text = 0
        self.odd_values = 0     # NaN, Infinity or out-of-range numbers, read as null

    def scrub(self, d: dict, typ) -> dict:
        """The keys of d that convert to typ's fields on their own."""
        out = {}
        for k, v in d.items():
            try:
                msgspec.convert({k: v}, typ, strict=False)
                out[k] = v
            except (msgspec.ValidationError, RecursionError):
                self.bad_fields += 1
        return out

    def event(self, e, dims: msgspec.Raw | None = None) -> Event | None:
        """One decoded entry -> Event, dropping only the fields of an odd type. dims: the raw text of
        its Input Dims when known (else re-encoded from the decoded value)."""
        if not isinstance(e, dict):
            self.bad_entries += 1
            return None
        args = e.get("args")
        if isinstance(args, dict) and "Input Dims" in args:
            # convert() will not build a Raw from a list; give it the bytes decode would have kept.
            if dims is None:
                try:
                    dims = msgspec.Raw(msgspec.json.encode(args["Input Dims"]))
                except (TypeError, ValueError, OverflowError, RecursionError):
                    dims = _NO_DIMS
            e = dict(e, args=dict(args, **{"Input Dims": dims}))
        try:
            return msgspec.convert(e, Event, strict=False)
        except (msgspec.ValidationError, RecursionError):
            pass
        e = dict(e)
        args = e.pop("args", None)
        e = self.scrub(e, Event)
        if isinstance(args, dict):
            e["args"] = self.scrub(args, Args)
        elif args is not None:
            self.bad_fields += 1
        return msgspec.convert(e, Event, strict=False)

    def events(self, items: list) -> list[Event]:
        return [ev for ev in map(self.event, items) if ev is not None]


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def decode_generic(piece: bytes):
    """Untyped decode; numbers msgspec refuses (1e400, 40-digit ints) through the json module.

    Raises msgspec.DecodeError (with msgspec's wording and 1-based byte) for malformed JSON.
    """
    try:
        return msgspec.json.decode(piece)
    except msgspec.ValidationError:
        pass
    except UnicodeDecodeError:          # invalid UTF-8 in a string: that text gets U+FFFD
        piece = bytes(piece).decode("utf-8", "replace").encode()
        try:
            return msgspec.json.decode(piece)
        except msgspec.ValidationError:
            pass
    return _json_loads(piece, parse_constant=_no_constants)


def _json_loads(text, **kw):
    """json.loads, its errors as msgspec's (the splitter reads their byte offsets)."""
    try:
        return json.loads(text, **kw)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise msgspec.DecodeError(f"JSON is malformed: trailing characters (byte {exc.pos + 1})") from None
        if exc.msg.startswith("Unterminated") or exc.pos >= len(text):
            raise msgspec.DecodeError("Input data was truncated") from None
        raise msgspec.DecodeError(f"JSON is malformed: {exc.msg} (byte {exc.pos})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise msgspec.DecodeError(f"JSON is malformed: {exc}") from None


def _python_items(piece: bytes, lenient: Lenient) -> list:
    """The piece's events through the json module: NaN / Infinity / out-of-range numbers become null
    (Lenient.odd_values) and lone surrogates U+FFFD. Raises msgspec.DecodeError as decode_generic does
    where even that cannot read it (malformed, or cut off: the splitter tries another cut)."""
    seen = []

    def odd(name):
        seen.append(name)
        return None
    items = _json_loads(bytes(piece).decode("utf-8", "replace"), parse_constant=odd,
                        parse_float=lambda s: _finite(s, odd))
    if not isinstance(items, list):
        raise msgspec.DecodeError("JSON is malformed: expected an array of events")
    lenient.odd_values += len(seen)      # (counted once the piece is read: a cut tried and failed is not)
    return [_no_surrogates(x) if isinstance(x, dict) else x for x in items]


def _finite(s: str, odd):
    v = float(s)
    return v if math.isfinite(v) else odd(s)


def _no_surrogates(x):
    if isinstance(x, str):
        return x.encode("utf-16", "surrogatepass").decode("utf-16", "replace") if _SURROGATE.search(x) else x
    if isinstance(x, dict):
        return {k: _no_surrogates(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_surrogates(v) for v in x]
    return x


_SURROGATE = re.compile("[\ud800-\udfff]")


class _DimsArgs(msgspec.Struct, forbid_unknown_fields=False):
    input_dims: Union[msgspec.Raw, None] = msgspec.field(default=None, name="Input Dims")


class _DimsOnly(msgspec.Struct, forbid_unknown_fields=False):
    args: Union[_DimsArgs, None] = None


_EVENT = msgspec.json.Decoder(Event)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_DIMS_ONLY = msgspec.json.Decoder(_DimsOnly)


def decode_piece(piece: bytes, lenient: Lenient) -> list[Event]:
    """A JSON array of events -> Events. Raises msgspec.DecodeError / RecursionError on bad JSON.

    The fast typed decode; if some event has an odd field, the piece is split into its events and
    only those that need it are decoded leniently (keeping their Input Dims text as written).
    """
    try:
        return PIECE_DECODER.decode(piece)
    except (msgspec.ValidationError, UnicodeDecodeError):
        pass
    except msgspec.DecodeError:
        # A value msgspec cannot hold (1e309, Kineto's own `inf` or NaN, a lone UTF-16 surrogate) costs
        # that value, not the piece: the json module reads it, the value becomes null (counted).
        return lenient.events(_python_items(piece, lenient))
    try:
        raws = _RAWS.decode(piece)
    except msgspec.ValidationError:
        raise msgspec.DecodeError("JSON is malformed: expected an array of events") from None
    out = []
    for r in raws:
        try:
            out.append(_EVENT.decode(r))
            continue
        except msgspec.ValidationError:
            pass
        except UnicodeDecodeError:
            lenient.bad_text += 1
        try:
            dims = _DIMS_ONLY.decode(r).args
            dims = dims.input_dims if dims is not None else None
        except (msgspec.ValidationError, UnicodeDecodeError):
            dims = None
        ev = lenient.event(decode_generic(bytes(r)), dims)
        if ev is not None:
            out.append(ev)
    return out


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
        self.interns = {f: Intern(floats_possible=f == "name") for f in ("ph", "cat", "name", "pid", "tid", "dims")}
        self._parts: dict[str, list] = {f: [] for f in (
            "ph", "cat", "name", "pid", "tid", "ts", "dur", *ID_FIELDS, "dims", "sparse_rows",
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
        p["dims"].append(self._dims(sub, rows, n))
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

    def _host_cat(self) -> np.ndarray:
        cats = self.interns["cat"].values
        if len(self._host) != len(cats):
            self._host = np.array([c in NO_DEVICE_ARGS_CATS for c in cats], dtype=bool)
        return self._host

    def _dims(self, args, rows: np.ndarray, n: int) -> np.ndarray:
        """Input Dims codes (-1: none) of n events, looked for on args, those of the given rows."""
        raws = list(map(_DIMS, args))
        out = np.full(n, -1, dtype=np.int32)
        has = np.flatnonzero(np.fromiter(map(is_not, raws, repeat(_NO_DIMS)), bool, len(raws)))
        if len(has):
            out[rows[has]] = self.interns["dims"].codes([bytes(raws[i]) for i in has.tolist()], len(has))
        return out

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
