"""load: a trace file on disk -> columns of its events and the trace's metadata, in bounded memory.

The file is read (and gunzipped by a thread, ahead of the decoder) in blocks (reader.py); the events
array is cut into pieces of complete events (splitter.py), each decoded by msgspec and appended to
columns (events.py). Neither the whole text nor all events as Python objects ever exist at once.

Robustness kept from the whole-file loader: a file cut off mid-write keeps every complete event
(warning), trailing junk is ignored (warning), a bad field type costs that field only, non-object
entries are skipped, BOM, bare-array (Chrome) form, absurd nesting refused. Every failure is a
TraceError naming the file and the problem in one line.
"""
from __future__ import annotations

import atexit
import ctypes
import glob
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import msgspec

from ..errors import TraceError
from .decode import Lenient
from .events import Columns
from .progress import current as current_progress
from .reader import TextSource, is_our_document
from .splitter import Splitter
from .view import event_views


def spooled(path: str) -> str:
    """`path`, or where it is a pipe or other stream ('-' is standard input) a temporary file holding what
    it gave (removed at exit): a trace is read twice, its head for the rank and then its events, and a
    stream only once (`analyze <(zcat t.json.gz)` had failed: not seekable)."""
    if path != "-":
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return path                    # (the loader says what is wrong with it)
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return path
    out = Path(tempfile.mkdtemp(prefix="traceinsight-")) / ("stdin" if path == "-" else Path(path).name or "stream")
    atexit.register(shutil.rmtree, out.parent, True)
    try:
        with (open(path, "rb") if path != "-" else open(sys.stdin.fileno(), "rb", closefd=False)) as src, \
                open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    return str(out)


class DeviceProps(msgspec.Struct, forbid_unknown_fields=False):
    id: Union[int, None] = None
    name: Union[str, None] = None
    totalGlobalMem: Union[int, None] = None
    computeMajor: Union[int, None] = None
    computeMinor: Union[int, None] = None
    numSms: Union[int, None] = None


class TraceMeta(msgspec.Struct, forbid_unknown_fields=False):
    """The top-level keys other than traceEvents (Kineto writes some before it, some after)."""
    schemaVersion: Any = None
    deviceProperties: list[DeviceProps] = []
    distributedInfo: Any = None
    baseTimeNanoseconds: Union[int, None] = None
    displayTimeUnit: Union[str, None] = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    roctracer_version: Any = None       # (an AMD GPU's trace: ROCm's tracer, HIP's runtime)
    hip_runtime_version: Any = None
    with_stack: Any = None
    with_modules: Any = None
    profile_memory: Any = None
    with_flops: Any = None
    record_shapes: Any = None
    traceName: Union[str, None] = None
    trace_id: Any = None
    traceinsight_record: Any = None
    INFO: Any = None                    # Kineto's own log lines (Kineto writes them with verbose logging on)


META_KEYS = ("schemaVersion", "baseTimeNanoseconds", "displayTimeUnit", "cupti_version", "cuda_runtime_version",
             "cuda_driver_version", "roctracer_version", "hip_runtime_version", "with_stack", "with_modules",
             "profile_memory", "with_flops", "record_shapes", "traceName", "traceinsight_record")


@dataclass
class RawTrace:
    """What the loader hands to the model: event columns plus the facts the file states about itself."""
    path: str
    columns: Columns
    devices: list[DeviceProps] = field(default_factory=list)
    distributed: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    file_bytes: int = 0

    @property
    def n_events(self) -> int:
        return self.columns.n

    @property
    def events(self) -> list:
        """Every event as an object (ph, cat, name, pid, tid, ts, dur, args.*): tests and small tools."""
        return event_views(self.columns)


def load_trace(path: str | os.PathLike, progress=None) -> RawTrace:
    """Read a trace. progress(done_bytes, total_bytes, events, finished=False) is called as pieces
    are decoded, and once at the end with finished=True (default: the reporter progress.reporting
    installed, if any)."""
    path = Path(path)
    progress = progress or current_progress()
    parser = Splitter(path)
    src = TextSource(path)
    try:
        for piece in src:
            parser.feed(piece)
            if progress is not None:
                progress(src.done, src.total, parser.cols.n)
        parser.finish()
        if progress is not None:
            progress(src.total, src.total, parser.cols.n, True)
    except RecursionError:
        raise TraceError(path, "nesting too deep: not a trace") from None
    finally:
        src.close()
    raw = _result(parser, src.warnings)
    del parser
    _give_back_freed_memory()
    return raw


def _give_back_freed_memory() -> None:
    """The pieces' short-lived objects leave the C heap fragmented around the columns; glibc keeps
    such freed memory (about as much as the columns) unless asked to return it. No-op elsewhere."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass



def _result(sp: Splitter, source_warnings: list[str]) -> RawTrace:
    """The columns and the metadata around them, with every warning the reading gave."""
    cols = sp.cols.finish()
    lenient = cols.lenient
    top = {**sp.head, **{k: v for k, v in sp.tail.items() if k != "_"}}
    meta_struct = _meta(top, lenient)
    warnings = list(source_warnings) + sp.warnings
    if lenient.bad_entries:
        warnings.append(f"skipped {lenient.bad_entries} entries of traceEvents that are not event objects")
    if lenient.bad_fields:
        warnings.append(f"ignored {lenient.bad_fields} fields of an unexpected type")
    if lenient.bad_text:
        warnings.append(f"replaced invalid UTF-8 text in {lenient.bad_text} events")
    if lenient.odd_values:
        warnings.append(f"read {lenient.odd_values} value(s) that are not finite JSON numbers (NaN, Infinity, "
                        "out of range) as missing")
    if cols.n == 0:
        raise TraceError(sp.path, "not a Kineto trace: it has no traceEvents")
    meta = {k: getattr(meta_struct, k) for k in META_KEYS if getattr(meta_struct, k) is not None}
    if getattr(sp, "cut_off", False):
        meta["cut_off"] = True      # (what the file lost may be its GPU side: trace/coverage.py)
    log = _kineto_log_counts(meta_struct.INFO)
    if log:
        meta["kineto_log"] = log
    dist = meta_struct.distributedInfo if isinstance(meta_struct.distributedInfo, dict) else {}
    return RawTrace(path=str(sp.path), columns=cols, devices=list(meta_struct.deviceProperties),
                    distributed=dist, meta=meta, warnings=warnings, file_bytes=sp.total)


# Kineto's log: the CUPTI records it read, and the runtime calls it skipped as noise (cudaGetDevice and such).
_PROCESSED = re.compile(r"Processed (\d+) GPU records")
_BLOCKLISTED = re.compile(r"Blocklisted runtime = (\d+)")


def _kineto_log_counts(info: Any) -> dict:
    """{"records_processed": N, "blocklisted_runtime": B} from Kineto's log lines, where the file has them: what
    the profiler received, to set against what it wrote (trace/coverage.py)."""
    if not isinstance(info, list):
        return {}
    out: dict = {}
    for line in info:
        if not isinstance(line, str):
            continue
        for key, pattern in (("records_processed", _PROCESSED), ("blocklisted_runtime", _BLOCKLISTED)):
            m = pattern.search(line)
            if m:
                out[key] = out.get(key, 0) + int(m.group(1))
    return out


def _meta(top: dict, lenient: Lenient) -> TraceMeta:
    try:
        return msgspec.convert(top, TraceMeta, strict=False)
    except (msgspec.ValidationError, RecursionError):
        pass
    devs = top.pop("deviceProperties", [])
    top = lenient.scrub(top, TraceMeta)
    if isinstance(devs, list):
        top["deviceProperties"] = [msgspec.convert(lenient.scrub(d, DeviceProps), DeviceProps, strict=False)
                                   for d in devs if isinstance(d, dict)]
    else:
        lenient.bad_fields += 1
    return msgspec.convert(top, TraceMeta, strict=False)


def find_trace_files(path: Path, skipped: list[str] | None = None) -> list[Path]:
    """A directory of per-rank traces -> the trace files in it, sorted by name. Our own reports written
    beside them (`analyze --json`, a diff's JSON) are not traces: left out, not an error; so is other
    JSON that holds no events (a config.json beside the ranks had stopped a job), named in `skipped`."""
    kinds = {p: _plain_json(p) for p in sorted(path.iterdir())
             if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))}
    traces = [p for p, k in kinds.items() if k is None]
    if skipped is not None:
        skipped += [f"{p}: left out, not a trace (no traceEvents near its start)" for p, k in kinds.items()
                    if k == "other"]
    if not traces:
        raise TraceError(path, "directory has no .json or .json.gz trace files")
    return traces


def expand(paths, skipped: list[str] | None = None) -> list[str]:
    """Directories -> their .json / .json.gz files; globs -> their matches; files as given. Sorted, unique.
    What a directory held that is no trace is named in `skipped`."""
    out: list[str] = []
    for p in paths:
        s = spooled(str(p))
        if Path(s).is_dir():
            out += [str(f) for f in find_trace_files(Path(s), skipped)]     # (one listing: our own reports left out)
        elif any(c in s for c in "*?[") and not Path(s).exists():
            found = sorted(glob.glob(s, recursive=True))
            if not found:
                raise TraceError(s, "no file matches this pattern")
            out += found
        elif not Path(s).exists():
            raise TraceError(s, "no such file")
        else:
            out.append(s)
    return list(dict.fromkeys(out))


_TRACE_HEAD = 1 << 20


def _plain_json(p: Path) -> str | None:
    """What a plain JSON file in a directory of traces is, from its head (read once): "report", our own
    document (reader.is_our_document); "other", a small valid
    object without traceEvents (a config); None, a trace, or a file for the loader to say what is wrong with
    (a rank that cannot be read is reported as one). Gzipped files are not opened here."""
    if not p.name.endswith(".json"):
        return None
    try:
        with open(p, "rb") as f:
            head = f.read(_TRACE_HEAD)
    except OSError:
        return None
    if is_our_document(head):
        return "report"
    if len(head) >= _TRACE_HEAD or b'"traceEvents"' in head:
        return None
    try:
        doc = json.loads(head.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None
    return "other" if isinstance(doc, dict) else None
