"""decode: one piece of a traceEvents array (JSON text) -> Event structs, leniently.

The fast path is one typed msgspec decode of the whole piece. An event with an odd field type is decoded
again leniently, dropping only that field (counted: Lenient); numbers outside what msgspec reads (1e400,
40-digit ints) go through the json module; a value no JSON number holds (NaN, Infinity: Kineto writes
`inf`) is read as missing; invalid UTF-8 and lone surrogates become U+FFFD. Split from events.py, which
turns the structs into columns.
"""
from __future__ import annotations

import json
import math
import re
from typing import Union

import msgspec

NAN = float("nan")
MISSING = -(2 ** 63)       # an id the event does not have
BAD = MISSING + 1          # an id the event has, in a form we cannot read
NO_DIMS = msgspec.Raw(b"")


class Args(msgspec.Struct, forbid_unknown_fields=False, gc=False, frozen=True):
    """The event args we read (names with spaces are Kineto's own); msgspec skips the rest."""
    correlation: Union[int, str, None] = MISSING
    external_id: Union[int, str, None] = msgspec.field(default=MISSING, name="External id")
    stream: Union[int, str, None] = MISSING
    device: Union[int, str, None] = MISSING
    bytes: Union[int, float, None] = NAN
    bandwidth: Union[int, float, None] = msgspec.field(default=NAN, name="memory bandwidth (GB/s)")
    # Raw JSON bytes: only ever shown as text, so never worth building nested lists for.
    input_dims: msgspec.Raw = msgspec.field(default=NO_DIMS, name="Input Dims")
    # A kernel's launch grid, as raw JSON: only compared (the same kernel launched on other shapes).
    grid: msgspec.Raw = NO_DIMS
    # Its thread block's dims: with the grid, the threads a launch holds (how much of the GPU one kernel fills).
    block: msgspec.Raw = NO_DIMS
    # "M" metadata events name their process / thread here.
    meta_name: Union[str, int, None] = msgspec.field(default=None, name="name")
    # A collective's own args, on NCCL kernels (CUDA) and on its record_param_comms range (any backend): what it
    # moved, for its bandwidth (trace/collectives.py). Any JSON scalar, so that an odd one is read, not dropped.
    coll_name: Union[str, int, float, None] = msgspec.field(default=None, name="Collective name")
    in_nelems: Union[int, float, str, None] = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Union[int, float, str, None] = msgspec.field(default=None, name="Out msg nelems")
    dtype: Union[str, int, float, None] = None
    group_size: Union[int, float, str, None] = msgspec.field(default=None, name="Group size")


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
                    dims = NO_DIMS
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


def bad_utf8(exc: Exception) -> bool:
    """Invalid UTF-8 in a string: msgspec before 0.23 raised UnicodeDecodeError, 0.23 a DecodeError saying so."""
    return isinstance(exc, UnicodeDecodeError) or (isinstance(exc, msgspec.DecodeError) and "UTF-8" in str(exc))


def decode_generic(piece: bytes):
    """Untyped decode; numbers msgspec refuses (1e400, 40-digit ints) through the json module.

    Raises msgspec.DecodeError (with msgspec's wording and 1-based byte) for malformed JSON.
    """
    try:
        return msgspec.json.decode(piece)
    except msgspec.ValidationError:
        pass
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        if not bad_utf8(exc):
            raise
        piece = bytes(piece).decode("utf-8", "replace").encode()   # that text gets U+FFFD
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
    except msgspec.DecodeError as exc:
        # A value msgspec cannot hold (1e309, Kineto's own `inf` or NaN, a lone UTF-16 surrogate) costs
        # that value, not the piece: the json module reads it, the value becomes null (counted).
        if not bad_utf8(exc):
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
        except (UnicodeDecodeError, msgspec.DecodeError) as exc:
            if not bad_utf8(exc):
                raise
            lenient.bad_text += 1
        try:
            dims = _DIMS_ONLY.decode(r).args
            dims = dims.input_dims if dims is not None else None
        except (msgspec.DecodeError, UnicodeDecodeError):
            dims = None
        ev = lenient.event(decode_generic(bytes(r)), dims)
        if ev is not None:
            out.append(ev)
    return out
