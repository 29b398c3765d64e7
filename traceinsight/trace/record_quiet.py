"""Kineto's chatter held back around the profiler's own calls, for ``traceinsight record``'s child.

Loaded by path from record_boot.py (never as ``traceinsight.trace.record_quiet``), like record_profiler: it
imports only the standard library.
"""
import os
import sys


class QuietKineto:
    """Hold back Kineto's STAGE:/USDT: chatter that each profiler start/stop prints on fd 2.

    fd 2 goes to a temporary file for the duration of one profiler call; everything else
    written meanwhile (errors, warnings, other threads) is passed on right after. The
    KINETO_LOG_LEVEL variable would do it too, but it must be in the environment from
    the process's start and then the script would see it.
    """

    _NOISE = (b"STAGE:", b"USDT:")

    def __init__(self):
        self._tmp = None

    # torch.profiler's own warnings about how it is driven, not about the script:
    # --warmup 0 is the user's choice; torch 2.11 warns about acc_events on any first start
    _WARNINGS = (r"Profiler won't be using warmup", r"(Warning: )?Profiler clears events")

    def __enter__(self):
        import warnings
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        for message in self._WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        self._saved = None
        try:
            sys.stderr.flush()
        except Exception:
            pass
        try:
            if self._tmp is None:
                import tempfile
                self._tmp = tempfile.TemporaryFile()
            self._tmp.seek(0)
            self._tmp.truncate()
            saved = os.dup(2)
            os.dup2(self._tmp.fileno(), 2)
            self._saved = saved
        except Exception:
            self._saved = None
        return self

    def __exit__(self, *exc):
        self._warnings.__exit__(*exc)
        if self._saved is None:
            return False
        try:
            sys.stderr.flush()
        except Exception:
            pass
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        try:
            self._tmp.seek(0)
            data = self._tmp.read()
            kept = b"".join(line for line in data.splitlines(True)
                            if not line.startswith(self._NOISE))
            while kept:
                kept = kept[os.write(2, kept):]
        except Exception:
            pass
        return False
