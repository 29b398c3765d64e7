"""load: a trace file on disk -> a list of typed events and the trace's metadata.

Decoding is typed (msgspec) and keeps only the fields the analysis reads, which is what makes a
300 MB trace cheap: unknown keys are skipped by the decoder instead of becoming Python dicts.
Every failure becomes a TraceError naming the file and the problem in one line.
"""
from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import msgspec

from ..errors import TraceError

Scalar = Union[int, float, str, None]


class Args(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """The event args we use. Names with spaces are Kineto's own. Only what the analysis reads is
    declared: msgspec skips the rest without building Python objects (gc=False: a million of these
    need not be tracked by the garbage collector, they hold no cycles)."""
    correlation: Union[int, str, None] = None
    external_id: Union[int, str, None] = msgspec.field(default=None, name="External id")
    stream: Union[int, str, None] = None
    device: Union[int, str, None] = None
    bytes: Union[int, float, None] = None
    bandwidth: Union[int, float, None] = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    # Kept as raw JSON bytes: only shown as text, so never worth building nested lists for.
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    wait_on_stream: Union[int, None] = None
    wait_on_event_corr: Union[int, None] = msgspec.field(
        default=None, name="wait_on_cuda_event_record_corr_id")
    labels: Union[str, None] = None
    # "M" metadata events name their process / thread here.
    meta_name: Union[str, int, None] = msgspec.field(default=None, name="name")


class Event(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    ph: str = ""
    cat: Union[str, None] = None
    name: Union[str, int, float, None] = ""
    pid: Union[int, str, None] = 0
    tid: Union[int, str, None] = 0
    ts: Union[float, str, None] = None
    dur: Union[float, str, None] = None
    id: Union[int, str, None] = None
    args: Union[Args, None] = None


class DeviceProps(msgspec.Struct, forbid_unknown_fields=False):
    id: Union[int, None] = None
    name: Union[str, None] = None
    totalGlobalMem: Union[int, None] = None
    computeMajor: Union[int, None] = None
    computeMinor: Union[int, None] = None
    numSms: Union[int, None] = None


class TraceFile(msgspec.Struct, forbid_unknown_fields=False):
    traceEvents: list[Event] = []
    schemaVersion: Any = None
    deviceProperties: list[DeviceProps] = []
    distributedInfo: Any = None
    baseTimeNanoseconds: Union[int, None] = None
    displayTimeUnit: Union[str, None] = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    with_stack: Any = None
    with_modules: Any = None
    profile_memory: Any = None
    record_shapes: Any = None
    traceName: Union[str, None] = None
    trace_id: Any = None
    traceinsight_record: Any = None


@dataclass
class RawTrace:
    """What the loader hands to the model: events plus the facts the file states about itself."""
    path: str
    events: list[Event]
    devices: list[DeviceProps] = field(default_factory=list)
    distributed: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    file_bytes: int = 0


_OBJECT_DECODER = msgspec.json.Decoder(TraceFile)
_ARRAY_DECODER = msgspec.json.Decoder(list[Event])
# Deep nesting is either garbage or an attack; msgspec itself stops at depth 2048, we say so plainly.
_MAX_TEXT_NESTING = 1000


def read_bytes(path: Path) -> tuple[bytes, list[str]]:
    """Read a file, gunzipping if needed. A gzip stream cut short yields what it holds, with a warning."""
    warnings: list[str] = []
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except IsADirectoryError:
        raise TraceError(path, "is a directory with no traces") from None
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(wbits=47)
        try:
            out = d.decompress(data)
        except zlib.error as exc:
            raise TraceError(path, f"corrupt gzip data ({exc})") from None
        if not d.eof:
            if not out:
                raise TraceError(path, "gzip file is truncated before any data")
            warnings.append(f"gzip stream ends early (file cut off?): read {len(out):,} bytes of JSON")
        data = out
    return data, warnings


_BYTE = re.compile(r"\(byte (\d+)\)")


def load_trace(path: str | os.PathLike) -> RawTrace:
    path = Path(path)
    data, warnings = read_bytes(path)
    file_bytes = len(data)
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark some editors write
        data = data[3:]
    # msgspec accepts leading whitespace; stripping it would copy a 300 MB buffer.
    lead = re.match(rb"\s*", data).end()
    if lead == len(data):
        raise TraceError(path, "file is empty")
    first = data[lead:lead + 1]
    if first not in (b"{", b"["):
        raise TraceError(path, "not JSON (a Kineto trace starts with '{' or '[')")
    _check_nesting(path, data)
    counts = _Lenient()
    try:
        trace = _decode_or_repair(path, data, first, warnings, counts)
    except RecursionError:
        raise TraceError(path, "nesting too deep: not a trace") from None
    if counts.bad_entries:
        warnings.append(f"skipped {counts.bad_entries} entries of traceEvents that are not event objects")
    if counts.bad_fields:
        warnings.append(f"ignored {counts.bad_fields} fields of an unexpected type")
    if not isinstance(trace, TraceFile):
        raise TraceError(path, "not a Kineto trace")
    if not trace.traceEvents:
        raise TraceError(path, "not a Kineto trace: it has no traceEvents")
    meta = {k: getattr(trace, k) for k in (
        "schemaVersion", "baseTimeNanoseconds", "displayTimeUnit", "cupti_version",
        "cuda_runtime_version", "cuda_driver_version", "with_stack", "with_modules",
        "profile_memory", "record_shapes", "traceName", "traceinsight_record")
        if getattr(trace, k) is not None}
    dist = trace.distributedInfo if isinstance(trace.distributedInfo, dict) else {}
    return RawTrace(path=str(path), events=trace.traceEvents, devices=list(trace.deviceProperties),
                    distributed=dist, meta=meta, warnings=warnings, file_bytes=file_bytes)


def _decode_or_repair(path, text: bytes, first: bytes, warnings: list[str], counts) -> TraceFile:
    """Decode; a file cut off mid-write is repaired, trailing junk ignored, anything else refused."""
    try:
        return _decode(text, first, counts)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"not a Kineto trace: {exc}") from None
    except msgspec.DecodeError as exc:
        msg = str(exc)
        m = _BYTE.search(msg)
        pos = int(m.group(1)) if m else None
        if "trailing characters" in msg and pos is not None:
            # msgspec's byte offset is one past the first extra byte.
            try:
                trace = _decode(text[:pos - 1], first, counts)
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise TraceError(path, f"not valid JSON ({exc})") from None
            warnings.append(f"ignored {len(text) - pos + 1:,} bytes of trailing data after the JSON document")
            return trace
        if "truncated" in msg or (pos is not None and pos >= len(text)):
            repaired = _repair_truncated(text, first, counts)
            if repaired is None:
                raise TraceError(path, f"not valid JSON ({exc})") from None
            trace, kept = repaired
            warnings.append(f"trace is cut off (killed mid-write?): dropped the last {len(text) - kept:,} "
                            f"bytes after {len(trace.traceEvents):,} complete events")
            return trace
        raise TraceError(path, f"not valid JSON ({exc})") from None


class _Lenient:
    """Counts what the lenient decode had to drop, for the warning."""

    def __init__(self):
        self.bad_fields = 0
        self.bad_entries = 0

    def scrub(self, d: dict, typ) -> dict:
        """The keys of d that convert to typ's fields on their own."""
        out = {}
        for k, v in d.items():
            try:
                msgspec.convert({k: v}, typ, strict=False)
                out[k] = v
            except msgspec.ValidationError:
                self.bad_fields += 1
        return out

    def event(self, e) -> Event | None:
        if not isinstance(e, dict):
            self.bad_entries += 1
            return None
        args0 = e.get("args")
        if isinstance(args0, dict) and "Input Dims" in args0:
            e = dict(e, args=dict(args0, **{"Input Dims": msgspec.Raw(msgspec.json.encode(args0["Input Dims"]))}))
        try:
            return msgspec.convert(e, Event, strict=False)
        except msgspec.ValidationError:
            pass
        e = dict(e)
        args = e.pop("args", None)
        if isinstance(args, dict) and "Input Dims" in args:
            # convert() will not build a Raw from a list; give it the bytes it would have decoded.
            args = dict(args)
            args["Input Dims"] = msgspec.Raw(msgspec.json.encode(args["Input Dims"]))
        e = self.scrub(e, Event)
        if isinstance(args, dict):
            e["args"] = self.scrub(args, Args)
        elif args is not None:
            self.bad_fields += 1
        return msgspec.convert(e, Event, strict=False)

    def trace(self, text: bytes) -> TraceFile:
        doc = msgspec.json.decode(text)   # a DecodeError here still means truncated / not JSON
        if isinstance(doc, list):
            doc = {"traceEvents": doc}
        if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents", []), list):
            raise msgspec.ValidationError("expected an object with a traceEvents array, or an array of events")
        events = [ev for ev in (self.event(e) for e in doc.get("traceEvents", [])) if ev is not None]
        top = {k: v for k, v in doc.items() if k != "traceEvents"}
        devs = top.pop("deviceProperties", [])
        top = self.scrub(top, TraceFile)
        if isinstance(devs, list):
            top["deviceProperties"] = [msgspec.convert(self.scrub(d, DeviceProps), DeviceProps, strict=False)
                                       for d in devs if isinstance(d, dict)]
        else:
            self.bad_fields += 1
        tf = msgspec.convert(top, TraceFile, strict=False)
        tf.traceEvents = events
        return tf


def _decode(text: bytes, first: bytes, counts: _Lenient | None = None) -> TraceFile:
    """The fast typed decode; if one field has an odd type, a lenient one that drops only that field."""
    try:
        if first == b"[":
            return TraceFile(traceEvents=_ARRAY_DECODER.decode(text))
        return _OBJECT_DECODER.decode(text)
    except msgspec.ValidationError:
        return (counts or _Lenient()).trace(text)


def _check_nesting(path: Path, text: bytes) -> None:
    """Refuse absurdly nested input before the decoder recurses into it.

    Real traces nest a few levels (args -> Input Dims -> dims); a run of a thousand openers is not one.
    Checking only the first and last 64 KiB keeps this O(1) for big files, and catches the usual bomb.
    """
    for chunk in (text[:65536], text[-65536:]):
        if re.search(rb"[\[{]\s*(?:[\[{]\s*){%d}" % _MAX_TEXT_NESTING, chunk):
            raise TraceError(path, f"nesting deeper than {_MAX_TEXT_NESTING} levels: not a trace")


# Where a complete event ends (its '}' then a comma or the end of the data), and where the events
# array itself closed (the cut fell in the metadata Kineto writes after it).
_EVENT_END = re.compile(rb"\}(?=\s*(?:,|$))")
_ARRAY_END = re.compile(rb"\}\s*\](?=\s*(?:,|$))")


def _repair_truncated(text: bytes, first: bytes, counts: _Lenient | None = None, max_tries: int = 40):
    """Cut a trace that ends mid-write at its last complete event and close the brackets.

    Returns (trace, bytes kept) or None. We try the last few candidate ends from the end: a killed
    writer leaves at most one partial event, but a '}' followed by a comma may sit inside args.
    """
    tail_start = max(0, len(text) - (8 << 20))
    tail = text[tail_start:]
    closer = b"]" if first == b"[" else b"]}"
    cands = [(tail_start + m.end(), closer) for m in _EVENT_END.finditer(tail)]
    if first == b"{":
        cands += [(tail_start + m.end(), b"}") for m in _ARRAY_END.finditer(tail)]
    cands.sort()
    for end, close in reversed(cands[-max_tries:]):
        try:
            return _decode(text[:end] + close, first, counts), end
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
    return None


def find_trace_files(path: Path) -> list[Path]:
    """A directory of per-rank traces -> the trace files in it, sorted by name."""
    files = sorted(p for p in path.iterdir() if p.is_file() and (
        p.name.endswith(".json") or p.name.endswith(".json.gz")))
    if not files:
        raise TraceError(path, "directory has no .json or .json.gz trace files")
    return files
