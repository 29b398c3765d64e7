"""reader: a trace file's JSON text in pieces, gunzipped by a thread ahead of the decoder.

zlib releases the GIL while it inflates, so on two cores gunzip costs almost no wall time: the
decoder works on one piece while the thread inflates the next. At most QUEUE pieces wait, so memory
stays bounded whatever the file's size (and a gzip bomb inflates BLOCK bytes at a time).
"""
from __future__ import annotations

import os
import queue
import re
import sys
import threading
import zlib
from pathlib import Path

from ..errors import TraceError

PIECE = 256 << 10        # bytes of JSON per decoded piece: small enough that its events stay in the CPU cache
BLOCK = 4 << 20          # bytes of JSON the gunzip thread hands over at once (few GIL hand-overs)
QUEUE = 3
_READ = 1 << 20          # compressed bytes per read
SWITCH_S = 0.0002        # GIL switch interval while the gunzip thread runs


def _open(path: Path):
    try:
        return open(path, "rb")
    except IsADirectoryError:
        raise TraceError(path, "is a directory with no traces") from None
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None


class TextSource:
    """Iterate over the JSON text of a plain or gzipped file. `done` / `total`: bytes of the file read,
    for progress; `warnings`: a gzip stream cut short (what it held is still returned)."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = _open(path)
        try:
            self.total = os.fstat(self.fh.fileno()).st_size
        except OSError:
            self.total = 0
        self.done = 0
        self.text = 0
        self.warnings: list[str] = []
        self._stop = threading.Event()
        self._thread = None
        try:
            magic = self.fh.read(2)
        except OSError as exc:
            self.fh.close()
            if getattr(exc, "errno", None) == 21:
                raise TraceError(path, "is a directory with no traces") from None
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
        self.gz = magic == b"\x1f\x8b"
        self.fh.seek(0)

    def __iter__(self):
        return self._gunzip() if self.gz else self._plain()

    def _plain(self):
        while True:
            try:
                data = self.fh.read(BLOCK)
            except OSError as exc:
                raise TraceError(self.path, f"cannot read: {exc.strerror or exc}") from None
            if not data:
                return
            self.done += len(data)
            self.text += len(data)
            yield data

    def _gunzip(self):
        q: queue.Queue = queue.Queue(maxsize=QUEUE)
        self._thread = threading.Thread(target=self._inflate, args=(q,), daemon=True, name="gunzip")
        # The thread needs the GIL back after every inflate call; at the default 5 ms switch interval
        # it waits on the decoder's long C calls and falls behind (15% of a load's wall time).
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, SWITCH_S))
        self._thread.start()
        while True:
            kind, data, done = q.get()
            if kind == "data":
                self.done = done
                self.text += len(data)
                yield data
            elif kind == "error":
                raise data
            else:
                if not data:       # the stream ended before gzip's end marker
                    if self.text == 0:
                        raise TraceError(self.path, "gzip file is truncated before any data")
                    self.warnings.append(f"gzip stream ends early (file cut off?): read {self.text:,} bytes of JSON")
                self.done = done
                return

    def _put(self, q: queue.Queue, item) -> bool:
        while not self._stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _inflate(self, q: queue.Queue) -> None:
        """Thread: read, inflate at most BLOCK bytes at a time, queue the blocks."""
        d = zlib.decompressobj(wbits=47)
        done = 0
        out: list[bytes] = []
        size = 0
        try:
            while not self._stop.is_set() and not d.eof:
                comp = d.unconsumed_tail
                if not comp:
                    comp = self.fh.read(_READ)
                    done += len(comp)
                    if not comp:
                        break
                data = d.decompress(comp, BLOCK)
                if data:
                    out.append(data)
                    size += len(data)
                if size >= BLOCK:
                    if not self._put(q, ("data", b"".join(out), done)):
                        return
                    out, size = [], 0
            if out and not self._put(q, ("data", b"".join(out), done)):
                return
            self._put(q, ("end", d.eof, done))
        except zlib.error as exc:
            self._put(q, ("error", TraceError(self.path, f"corrupt gzip data ({exc})"), done))
        except OSError as exc:
            self._put(q, ("error", TraceError(self.path, f"cannot read: {exc.strerror or exc}"), done))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            sys.setswitchinterval(self._switch)
            self._thread = None
        self.fh.close()


def read_bytes(path: Path) -> tuple[bytes, list[str]]:
    """The whole JSON text of a file, gunzipped if needed; a gzip stream cut short yields what it holds,
    with a warning. For callers that need the document at once (diff's JSON inputs, a job's rank traces):
    it holds the file in memory."""
    src = TextSource(Path(path))
    try:
        data = b"".join(src)
    finally:
        src.close()
    return data, src.warnings


HEAD_BYTES = 64 << 10


def head(path, n: int = HEAD_BYTES) -> bytes:
    """The first n bytes of a file's text, gunzipped when gzip; b"" when it cannot be read (the loader then
    says what is wrong with it). Enough to tell a trace from our own documents, or to read distributedInfo."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(n)
            if data[:2] != b"\x1f\x8b":
                return data
            d = zlib.decompressobj(wbits=47)
            out, chunk = b"", data
            while len(out) < n and chunk:
                out += d.decompress(chunk, n - len(out))
                if d.eof:
                    break
                chunk = d.unconsumed_tail or fh.read(n)
            return out[:n]
    except (OSError, zlib.error):
        return b""


_OUR_DOCUMENT = re.compile(rb'"schema_version"\s*:')


def is_our_document(text: bytes) -> bool:
    """A document traceinsight wrote (analyze --json, a job's or a diff's JSON), from its head: a JSON object
    with "schema_version" (Kineto writes "schemaVersion") and no "traceEvents"."""
    h = text.lstrip()
    return h[:1] == b"{" and bool(_OUR_DOCUMENT.search(h)) and b'"traceEvents"' not in h
