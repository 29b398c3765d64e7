"""progress: who wants to hear how a load is going (the command line draws a bar on stderr).

The loader calls the reporter installed here, if any, after each piece it decodes, with the bytes of
the file read so far, the file's size and the events decoded so far, and once more with finished=True
when the file is read. A context variable, so the layers between the command line and the loader
need not pass it along.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Optional

Reporter = Callable[..., None]      # (bytes read, bytes in the file, events decoded, finished=False)

_REPORTER: ContextVar[Optional[Reporter]] = ContextVar("traceinsight_load_progress", default=None)


@contextmanager
def reporting(reporter: Reporter):
    """Within the block, every load_trace reports to reporter."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def current() -> Optional[Reporter]:
    return _REPORTER.get()
