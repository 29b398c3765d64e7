"""splitter: a trace's JSON text, piece by piece -> event columns, plus the keys around the events.

The text arrives in blocks of any size (reader.py). The document is walked in states: start (BOM,
blanks, '{' or '['), head (keys before "traceEvents"), events, tail (keys after the events array),
junk (anything after the document). The events array is cut into pieces of complete events, each
decoded by msgspec and appended to columns (events.py).

A cut is tried after a '}' followed by ',' or ']': the JSON before it, with a ']' added, decodes only
if the cut is a real event boundary (parsing is left to right, so the prefix is parsed exactly as
in the whole document). A failure before the cut is a real error in the data; one at the cut means
it fell inside an event (a string, the args), and the previous '}' is tried.
"""
from __future__ import annotations

import re
from pathlib import Path

import msgspec
import numpy as np

from ..errors import TraceError
from .decode import decode_generic, decode_piece
from .events import Columns
from .reader import PIECE

# Deep nesting is either garbage or an attack; msgspec itself stops near depth 1000, we say so plainly.
_MAX_TEXT_NESTING = 1000
_BYTE = re.compile(r"\(byte (\d+)\)")
_KEY = re.compile(rb'"traceEvents"')
_COLON = re.compile(rb"\s*:\s*")
# Where a complete event may end: its '}' then ',' or ']' (or the end of what we have).
_CUT = re.compile(rb"\}(?=\s*(?:,|\]|\Z))")
_WS = re.compile(rb"\s*")
_NEAR_TRIES = 8
_HEAD_LIMIT = 256 << 20


class Splitter:
    """The document, piece by piece: head (keys before traceEvents), events, tail (keys after), junk."""

    def __init__(self, path: Path):
        self.path = path
        self.cols = Columns()
        self.state = "start"
        self.parts: list[bytes] = []
        self.size = 0              # bytes in parts
        self.buf = b""             # the text not yet consumed, starting at text offset self.pos
        self.pos = 0
        self.total = 0             # text bytes seen
        self.bom = False
        self.form = ""             # "object" or "array"
        self.head: dict = {}
        self.tail: dict = {}
        self.last_end = 0          # text offset just after the last complete event (or the array)
        self.need = PIECE
        self.warnings: list[str] = []
        self.junk_from = None      # text offset where trailing junk begins
        self.after_value = False   # an event was just consumed: a ',' or the array's ']' comes next
        self.cut_off = False

    # ---- input

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.state == "junk":
            return
        self.parts.append(data)
        self.size += len(data)
        if self.state == "start" and (self.size >= 65536):
            self._start(eof=False)
        if self.state == "head" and self.size >= self.need:
            self._head(eof=False)
        if self.state == "events" and self.size >= self.need:
            self._events(eof=False)
        if self.state == "tail" and self.size >= self.need:
            self._tail(eof=False)

    def _take(self) -> bytes:
        if self.parts:
            self.buf = self.buf + b"".join(self.parts) if self.buf else b"".join(self.parts)
            self.parts = []
        self.size = len(self.buf)
        return self.buf

    def _drop(self, n: int) -> None:
        self.buf = self.buf[n:]
        self.pos += n
        self.size = len(self.buf)

    def finish(self) -> None:
        if self.state == "start":
            self._start(eof=True)
        if self.state == "head":
            self._head(eof=True)
        if self.state == "events":
            self._events(eof=True)
        if self.state == "tail":
            self._tail(eof=True)
        if self.state == "whole":
            self._whole()
        if self.junk_from is not None:
            self.warnings.append(f"ignored {self.total - self.junk_from:,} bytes of trailing data after the "
                                 "JSON document")

    # ---- states

    def _start(self, eof: bool) -> None:
        buf = self._take()
        if buf.startswith(b"\xef\xbb\xbf"):   # a UTF-8 byte order mark some editors write
            self.bom = True
            self._drop(3)
            buf = self.buf
        lead = len(buf) - len(buf.lstrip())
        if lead == len(buf):
            if eof:
                raise TraceError(self.path, "file is empty")
            return
        first = buf[lead:lead + 1]
        if first not in (b"{", b"["):
            raise TraceError(self.path, "not JSON (a Kineto trace starts with '{' or '[')")
        _check_nesting(self.path, buf[:65536])
        self._drop(lead + 1)
        if first == b"[":
            self.form, self.state, self.last_end = "array", "events", self.pos
        else:
            self.form, self.state, self.scan_from = "object", "head", 0
        self.need = 0

    def _head(self, eof: bool) -> None:
        """Find the top-level "traceEvents" key and the '[' after it."""
        buf = self._take()
        for m in _KEY.finditer(buf, self.scan_from):
            head = _top_level_object(b"{" + buf[:m.start()])
            if head is None:
                continue
            c = _COLON.match(buf, m.end())
            if c is None or c.end() >= len(buf):
                if eof:
                    break
                self.need = len(buf) + PIECE
                return
            if buf[c.end():c.end() + 1] != b"[":
                break                             # traceEvents is not an array: the whole decode says so
            self.head = head
            self._drop(c.end() + 1)
            self.state, self.last_end, self.need = "events", self.pos, PIECE
            return
        else:
            self.scan_from = max(0, len(buf) - 16)
            if not eof and len(buf) < _HEAD_LIMIT:
                self.need = len(buf) + PIECE
                return
            if not eof:
                raise TraceError(self.path, "not a Kineto trace: no traceEvents array in its first "
                                            f"{_HEAD_LIMIT >> 20} MB")
        self.state = "whole"

    def _events(self, eof: bool) -> None:
        """Decode the buffered events a piece (about PIECE bytes) at a time."""
        buf = self._take()
        off = 0
        while True:
            i = _WS.match(buf, off).end()
            ch = buf[i:i + 1]
            if self.after_value and ch == b",":
                i = _WS.match(buf, i + 1).end()
                self.after_value, ch = False, buf[i:i + 1]
            elif self.after_value and ch not in (b"]", b""):
                raise TraceError(self.path, f"not valid JSON (expected ',' or ']' (byte {self.pos + i}))")
            if ch == b"]":
                self._drop(i + 1)
                return self._array_closed(self.pos)
            off = i
            if off == len(buf) or (len(buf) - off < PIECE and not eof):
                self._drop(off)
                if eof and off == len(buf):
                    self._cut_off(self.last_end)
                self.need = PIECE
                return
            got = self._cut(buf, off, eof)
            if got is None:                    # no complete event in all we have
                self._drop(off)
                if eof:
                    return self._cut_off(self.last_end)
                self.need = 2 * len(self.buf)    # a long event: wait for (much) more
                return
            end, closed = got
            if closed:                         # the array's ']' lies before buf[end]
                close_at = self.pos + buf.rfind(b"]", off, end) + 1
                self._drop(end)
                return self._array_closed(close_at)
            self.last_end = self.pos + end
            self.after_value = True
            off = end

    def _cut(self, buf: bytes, off: int, eof: bool):
        """Decode complete events from buf[off:], cut near off + PIECE (or later: a big event).

        Returns (end, closed): buf[off:end] was decoded; closed when the events array ended in it
        (the tail starts at end). None when no cut works yet.
        """
        for end, close in self._tries(buf, off, eof):
            piece = b"".join((b"[", memoryview(buf)[off:end], close))     # one copy
            try:
                self.cols.add(decode_piece(piece, self.cols.lenient))
            except msgspec.DecodeError as exc:
                kind, at = self._classify(exc, end - off + 1)
                if kind == "cut":
                    continue
                if kind != "trailing":
                    raise self._invalid(exc, self.pos + off) from None
                # The array ended inside the piece: its events, then the rest is the tail.
                self.cols.add(decode_piece(piece[:at], self.cols.lenient))
                return off + at - 1, True
            return end, not close
        return None

    def _tries(self, buf: bytes, off: int, eof: bool):
        """Where to try cutting: the last few '}'s before off + PIECE, latest first; if none of them
        ends an event (braces inside strings, a long event), the event ends an exact scan finds. At
        the end of the file, first of all what is left as it is (the array closes in it)."""
        target = min(len(buf), off + PIECE)
        if eof and target == len(buf):
            yield len(buf), b""
        near = [m.end() for m in _CUT.finditer(buf, max(off, target - 16384), target)]
        yield from ((end, b"]") for end in near[::-1][:_NEAR_TRIES])
        yield from ((end, b"]") for end in event_ends(buf, off, target))
        if eof and target < len(buf):
            yield len(buf), b""

    def _array_closed(self, close_at: int) -> None:
        """The events array's ']' ended at text offset close_at; the buffer holds what follows it."""
        self.last_end = close_at
        self.need = 0
        if self.form == "array":
            self._junk_or_end()
        else:
            self.state = "tail"

    def _junk_or_end(self) -> None:
        rest = self._take().lstrip()
        if rest or self.parts:
            self.junk_from = self.pos + len(self.buf) - len(rest)
        self.state, self.buf, self.parts = "junk", b"", []

    def _tail(self, eof: bool) -> None:
        buf = self._take()
        stripped = buf.lstrip()
        if not stripped and not eof:
            return
        piece = b'{"_":0' + buf
        try:
            self.tail = decode_generic(piece)
        except msgspec.DecodeError as exc:
            kind, at = self._classify(exc, len(piece))
            if kind == "trailing":
                self.tail = decode_generic(piece[:at])
                self.junk_from = self.pos + at - 6
                self.state, self.buf, self.parts = "junk", b"", []
                return
            if kind == "cut" or (eof and "truncated" in str(exc)):
                if eof:
                    self._cut_off(self.last_end)
                else:
                    self.need = len(buf) + PIECE
                return
            raise self._invalid(exc) from None
        self.state, self.buf = "junk", b""

    def _whole(self) -> None:
        """No top-level traceEvents array was found: decode the (small) document as one value."""
        text = b"{" + self._take() if self.form == "object" else b"[" + self._take()
        try:
            doc = decode_generic(text)
        except msgspec.DecodeError as exc:
            kind, at = self._classify(exc, len(text))
            if kind != "trailing":
                raise self._invalid(exc) from None
            doc = decode_generic(text[:at])
            self.junk_from = self.pos + at - 1
        if not isinstance(doc, dict):
            raise TraceError(self.path, "not a Kineto trace")
        events = doc.pop("traceEvents", [])
        if not isinstance(events, list):
            raise TraceError(self.path, "not a Kineto trace: expected an object with a traceEvents array, "
                                        "or an array of events")
        self.head = doc
        self.cols.add(self.cols.lenient.events(events))

    # ---- outcomes

    def _classify(self, exc: Exception, limit: int) -> tuple[str, int]:
        """("cut", _): the cut fell inside a value (the parser failed at or after `limit`, where our
        own closing bytes begin); ("trailing", i): the value ended before index i; ("error", i): the
        data itself is malformed at index i (-1: unknown)."""
        msg = str(exc)
        if "truncated" in msg:
            return "cut", -1
        m = _BYTE.search(msg)
        if m is None:
            return "error", -1
        # msgspec gives the index of the bad byte, but one past the first extra byte for trailing data.
        if "trailing characters" in msg:
            return "trailing", int(m.group(1)) - 1
        at = int(m.group(1))
        return ("cut" if at >= limit else "error"), at

    def _invalid(self, exc: Exception, base: int | None = None) -> TraceError:
        """base: the text offset of what follows the piece's first byte (our '[' or '{')."""
        msg = str(exc)
        m = _BYTE.search(msg)
        if m:   # a byte offset in the file's JSON text, not in our piece
            at = (self.pos if base is None else base) + int(m.group(1)) - 1
            msg = msg[:m.start()] + f"(byte {at})" + msg[m.end():]
        return TraceError(self.path, f"not valid JSON ({msg})")

    def _cut_off(self, kept: int) -> None:
        if self.cols.n == 0:
            raise TraceError(self.path, "not valid JSON (Input data was truncated)")
        self.cut_off = True
        self.warnings.append(f"trace is cut off (killed mid-write?): dropped the last "
                             f"{self.total - kept:,} bytes after "
                             f"{self.cols.n:,} complete events")
        self.state, self.buf, self.parts = "done", b"", []

    # ---- result

def _top_level_object(text: bytes) -> dict | None:
    """text is '{' + what precedes a key: a dict if that key sits at the top level, else None."""
    body = text.rstrip()
    if body.endswith(b","):
        body = body[:-1]
    elif body != b"{":
        return None
    try:
        doc = decode_generic(body + b"}")
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None



def _check_nesting(path: Path, text: bytes) -> None:
    """Refuse absurdly nested input before the decoder recurses into it (the usual bomb is at the start).

    Real traces nest a few levels (args -> Input Dims -> dims); a run of a thousand openers is not one.
    """
    if re.search(rb"[\[{]\s*(?:[\[{]\s*){%d}" % _MAX_TEXT_NESTING, text):
        raise TraceError(path, f"nesting deeper than {_MAX_TEXT_NESTING} levels: not a trace")


def event_ends(buf: bytes, off: int, target: int, chunk: int = 1 << 20) -> list[int]:
    """Exact event ends around target: offsets just after the last '}' at or before target that
    closes an element of the array whose elements start at buf[off], and after the first one past
    target (strings and their escapes skipped, nesting counted; [] if none yet). A vectorised scan
    in chunks with the state carried over, stopped as soon as both are known: used only when the
    quick candidates fail (braces inside strings, events longer than a piece)."""
    before = after = None
    in_str, bs_run, depth = 0, 0, 0
    pos = off
    while pos < len(buf) and after is None:
        a = np.frombuffer(buf, dtype=np.uint8, count=min(chunk, len(buf) - pos), offset=pos)
        idx = np.arange(len(a))
        # A quote is escaped when an odd run of backslashes precedes it (runs may span chunks).
        last_plain = np.maximum.accumulate(np.where(a != 92, idx, -1))
        quote = np.flatnonzero(a == 34)
        prev = last_plain[np.maximum(quote - 1, 0)]
        run = np.where(quote == 0, bs_run, np.where(prev < 0, quote + bs_run, quote - 1 - prev))
        quote = quote[run % 2 == 0]
        toggles = np.zeros(len(a) + 1, dtype=np.int8)
        toggles[quote + 1] = 1
        inside = (np.cumsum(toggles[:-1], dtype=np.int64) + in_str) % 2 == 1
        opens = ((a == 123) | (a == 91)) & ~inside
        closes = ((a == 125) | (a == 93)) & ~inside
        level = np.cumsum(opens.astype(np.int64) - closes) + depth
        ends = np.flatnonzero(closes & (a == 125) & (level == 0)) + pos + 1
        k = int(np.searchsorted(ends, target, side="right"))
        if k:
            before = int(ends[k - 1])
        if k < len(ends):
            after = int(ends[k])
        in_str = (in_str + len(quote)) % 2
        bs_run = len(a) - 1 - int(last_plain[-1]) + (bs_run if last_plain[-1] < 0 else 0)
        depth = int(level[-1])
        pos += len(a)
    return [e for e in (before, after) if e is not None]
