"""``traceinsight record``: profile a user's own script, unchanged, then analyze the trace.

    traceinsight record [OPTIONS] SCRIPT [SCRIPT_ARGS]...
    traceinsight record [OPTIONS] -m MODULE [ARGS]...

The script runs in a child interpreter (``traceinsight/trace/record_boot.py``) exactly as
``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would run it (same ``sys.argv``,
``__name__ == "__main__"``, working directory and ``sys.path[0]``), under ``torch.profiler``.
Options belong to ``record`` only when they come before SCRIPT (or before ``-m MODULE``);
everything after is the script's, untouched.

Windowing (recorded as ``window`` in the trace's ``traceinsight_record`` key):

``optimizer_steps``
    a global optimizer step post-hook advances the profiler schedule (skip, warmup, steps)
    on each ``optimizer.step()`` of the first optimizer on the main thread;
``forward_calls``
    no optimizer stepped before the window: each outermost ``nn.Module`` forward call
    (of a module with parameters or buffers) on the main thread is a step;
``whole_run``
    neither happened: everything from the script's start, capped at ``--max-seconds``
    (also the fallback when the script ends before the step window is reached).

Exit status: the script's, as python gives it -- 0, ``sys.exit(n)`` -> n, an uncaught
exception -> 1 (traceback printed as python prints it), an uncaught KeyboardInterrupt ->
like python, the process ends by SIGINT (a shell shows 130; ``subprocess`` shows -2;
where a process cannot signal itself, 130). A script killed by another signal N gives
128 + N. ``record``'s own errors (no torch, script or module not found, not a Python
script, out-dir unusable) give 2 with one line on stderr. Analysis failures only warn.

Where the script's world still differs from plain python: ``torch`` is already imported
when the script starts; torch.profiler and its hooks are there (global module forward
hooks only until the window is decided); ``sys.orig_argv`` shows the recorder's command
line; ``-mMODULE`` must be written ``-m MODULE``. A script that ends through
``os._exit()`` or a hard crash leaves no trace. Recording starts with the script (the
whole-run candidate) and is replaced by the step window at the first step, so the
iteration before the first optimizer step (or the first forward call) is never in a
step window; with ``--skip 0 --warmup 0`` one more step waits (a new profiler session
must not record from inside record_function ranges the previous session opened).

After an ``optimizer_steps`` window, the profiler is stopped and up to ``--unprofiled-steps``
further optimizer steps are timed without it (``unprofiled_step_ms`` in the trace's
``traceinsight_record`` key, which ``analyze`` calibrates to; see record_unprofiled.py).

This module does not import torch (``analyze`` must work without it).
"""
from __future__ import annotations

import datetime as _dt
import gzip
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, List, Optional

from .record_unprofiled import summarize as _summarize_unprofiled

PROG = "traceinsight record"
EXIT_USAGE = 2
BOOT = Path(__file__).resolve().with_name("record_boot.py")
TRACE_SUFFIX = ".pt.trace.json.gz"
REPORT_NAMES = {"html": "report.html", "markdown": "report.md", "json": "report.json"}
INSTALL_HINT = ("traceinsight record needs PyTorch, which is not importable here: "
                "pip install 'traceinsight-gpu[record]' (or install torch for your platform)")
_STEP_RE = re.compile(rb'"name":\s*"ProfilerStep#(\d+)"')


class RecordError(Exception):
    """A problem of record's own (exit 2, one line on stderr, no traceback)."""


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


# -- checks before anything runs ------------------------------------------------------------

def _torch_importable() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _check_script(script: str) -> None:
    """Refuse what python could not run as a script: one line each, no traceback."""
    path = Path(script)
    if not path.exists():
        raise RecordError(f"script not found: {script}")
    if path.is_dir():
        raise RecordError(f"{script} is a directory, not a Python script")
    if not path.is_file():
        raise RecordError(f"{script} is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordError(f"cannot read {script}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise RecordError(f"{script} is not a Python script (binary file)")
    try:
        source = importlib.util.decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        raise RecordError(f"{script} is not a Python script (not readable text: {exc})") from None
    try:
        with warnings.catch_warnings():  # SyntaxWarnings are the script's, python shows them
            warnings.simplefilter("ignore")
            compile(source, str(path.resolve()), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "?"
        raise RecordError(f"{script} is not valid Python ({where}: {type(exc).__name__}: "
                          f"{exc.msg})") from None
    except ValueError as exc:
        raise RecordError(f"{script} is not a Python script ({exc})") from None


def _check_module_name(name: str) -> None:
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise RecordError(f"not a module name: {name!r}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "script"


def _torchrun_rank() -> Optional[str]:
    """'rank3' for one rank of a distributed launch (torchrun sets RANK and WORLD_SIZE), else None: each rank
    names its files after itself, so that the ranks' traces land side by side in one folder (`-o DIR`) and
    `traceinsight analyze DIR` reads them as one job."""
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ.get("WORLD_SIZE", "1"))
    except (KeyError, ValueError):
        return None
    return f"rank{rank}" if world > 1 else None


def _report_names(rank: Optional[str]) -> dict:
    return {k: v.replace("report.", f"report.{rank}.") if rank else v for k, v in REPORT_NAMES.items()}


def _prepare_out_dir(out_dir: Optional[Path], stem: str, trace_name: str,
                     reports: Optional[dict] = None) -> tuple[Path, bool]:
    """Make the out-dir (a new one by default). Returns (dir, created_by_us)."""
    if out_dir is None:
        base = f"traceinsight-{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        for n in range(1, 1000):
            candidate = Path(base if n == 1 else f"{base}-{n}")
            try:
                candidate.mkdir()
                return candidate, True
            except FileExistsError:
                continue
            except OSError as exc:
                raise RecordError(f"cannot create the output folder {candidate} in "
                                  f"{os.getcwd()}: {exc.strerror or exc}") from None
        raise RecordError(f"cannot find a new output folder name like {base}")
    created = not out_dir.exists()
    if out_dir.exists() and not out_dir.is_dir():
        raise RecordError(f"--out-dir {out_dir} exists and is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecordError(f"cannot create --out-dir {out_dir}: {exc.strerror or exc}") from None
    taken = [name for name in (trace_name, *(reports or REPORT_NAMES).values()) if (out_dir / name).exists()]
    if taken:
        raise RecordError(f"--out-dir {out_dir} already holds {taken[0]}, which a recording would overwrite; "
                          "choose another folder")
    return out_dir, created


def _make_work_dir(out_dir: Path) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=".traceinsight-record-", dir=out_dir)).resolve()
    except OSError as exc:
        raise RecordError(f"the output folder {out_dir} is not writable: "
                          f"{exc.strerror or exc}") from None


# -- running the child ----------------------------------------------------------------------

def _interpreter_flags() -> list[str]:
    try:  # -X, -W, -O, -B, ... the interpreter running traceinsight was given
        return list(subprocess._args_from_interpreter_flags())  # type: ignore[attr-defined]
    except Exception:
        return []


def _run_child(config: dict) -> int:
    cmd = [sys.executable, *_interpreter_flags(), str(BOOT), json.dumps(config)]
    in_main = threading.current_thread() is threading.main_thread()
    saved = {}
    try:
        proc = subprocess.Popen(cmd, close_fds=False)
    except OSError as exc:
        raise RecordError(f"cannot start {sys.executable}: {exc}") from None
    try:
        while True:
            try:
                if in_main and not saved:
                    # Ctrl-C reaches the child too (same process group): it keeps its trace
                    # and ends as python would; we wait for it. (Not ignored before Popen:
                    # an ignored SIGINT is inherited, and python would then never raise
                    # KeyboardInterrupt in the script.)
                    saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
                    if hasattr(signal, "SIGTERM"):  # `kill` of record reaches the script
                        saved[signal.SIGTERM] = signal.signal(
                            signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
                return proc.wait()
            except KeyboardInterrupt:  # only before SIGINT was ignored: the child got it too
                continue
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _read_status(work_dir: Path) -> Optional[dict]:
    try:
        return json.loads((work_dir / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# -- the trace file ---------------------------------------------------------------------------

def _count_steps(raw: Path) -> int:
    steps = set()
    with open(raw, "rb") as f:
        for line in f:
            if b"ProfilerStep#" in line:
                steps.update(_STEP_RE.findall(line))
    return len(steps)


def _write_trace(raw: Path, dest: Path, meta: dict) -> Path:
    """Gzip the exported Chrome trace with a top-level "traceinsight_record" key spliced in
    (streamed: traces can be far larger than memory would like). Never overwrites: a
    taken name gets a -2, -3, ... suffix."""
    meta_bytes = json.dumps(meta, indent=1, ensure_ascii=True).encode()
    with open(raw, "rb") as src:
        head = src.read(1 << 16)
        start = len(head) - len(head.lstrip())
        if head[start:start + 1] != b"{":
            raise RecordError("the profiler wrote a trace that is not a JSON object")
        rest = head[start + 1:]
        while not rest.strip():
            more = src.read(1 << 16)
            if not more:
                break
            rest += more
        sep = b"" if rest.lstrip().startswith(b"}") else b","
        name = dest.name[:-len(TRACE_SUFFIX)] if dest.name.endswith(TRACE_SUFFIX) else dest.name
        suffix = TRACE_SUFFIX if dest.name.endswith(TRACE_SUFFIX) else ""
        for n in range(1, 1000):
            target = dest if n == 1 else dest.with_name(f"{name}-{n}{suffix}")
            try:
                out = gzip.open(target, "xb", compresslevel=6)
            except FileExistsError:
                continue
            with out:
                out.write(b'{"traceinsight_record": ' + meta_bytes + sep + b"\n" + rest)
                shutil.copyfileobj(src, out, 1 << 20)
            return target
    raise RecordError(f"cannot find a free trace file name next to {dest}")


def _overhead_notes(with_stack: bool, profile_memory: bool, record_shapes: bool,
                    window: Optional[str]) -> list[str]:
    notes = []
    if with_stack:
        notes.append("with_stack: Python stacks were captured for every op; CPU-side op times "
                     "and the gaps between GPU work are inflated")
    if profile_memory:
        notes.append("profile_memory: every allocation was recorded; CPU-side op times are inflated")
    if record_shapes:
        notes.append("record_shapes: op input shapes were recorded; small extra CPU overhead per op")
    if window == "forward_calls":
        notes.append("forward_calls window: a global nn.Module hook ran on every module call "
                     "during the window (a few microseconds of Python each)")
    return notes


# -- the command ------------------------------------------------------------------------------

def run_record(script: str, script_args: List[str], *, module: bool = False,
               out_dir: Optional[Path] = None, skip: int = 1, warmup: int = 1, steps: int = 3,
               with_stack: bool = False, profile_memory: bool = False,
               record_shapes: bool = False, max_seconds: float = 30.0, unprofiled_steps: int = 20,
               analyze: Optional[Callable[[Path, dict], None]] = None) -> int:
    """Record one run; returns the exit status to leave with (-SIGINT: die by SIGINT).

    `analyze(trace_path, outputs)` (from the CLI) turns the trace into the reports named in
    `outputs` ({"html": path, ...}); this layer only records.
    """
    if not _torch_importable():
        raise RecordError(INSTALL_HINT)
    if module:
        _check_module_name(script)
        stem = _slug(script)
    else:
        _check_script(script)
        stem = _slug(Path(script).stem)
    rank = _torchrun_rank()
    trace_name = stem + (f".{rank}" if rank else "") + TRACE_SUFFIX
    report_names = _report_names(rank)
    out_dir, created = _prepare_out_dir(out_dir, stem + (f"-{rank}" if rank else ""), trace_name, report_names)
    work_dir = None
    try:
        work_dir = _make_work_dir(out_dir)
        config = {"script": script, "module": module, "args": list(script_args),
                  "skip": skip, "warmup": warmup, "steps": steps, "with_stack": with_stack,
                  "profile_memory": profile_memory, "record_shapes": record_shapes,
                  "max_seconds": max_seconds, "unprofiled_steps": unprofiled_steps,
                  "work_dir": str(work_dir)}
        started = time.time()
        returncode = _run_child(config)
        elapsed = time.time() - started
        status = _read_status(work_dir)
        if status and status.get("setup_error"):
            raise RecordError(status["setup_error"])
        if returncode < 0:
            signum = -returncode
            exit_code = 128 + signum
        else:
            signum, exit_code = 0, returncode
        interrupted = signum == signal.SIGINT or bool(status and status.get("interrupted"))
        final = -signal.SIGINT if signum == signal.SIGINT else exit_code
        if not status or not status.get("trace"):
            why = "ended" if not signum else f"was killed by signal {signum}"
            if status and status.get("yielded"):
                _say(f"nothing was recorded: the script runs its own torch.profiler (exit status "
                     f"{exit_code}), and one thread holds one profiler; analyze the trace it writes: "
                     "traceinsight analyze FILE")
            elif status:
                _say(f"nothing was recorded: the script {why} (exit status {exit_code}) "
                     "before the profiler captured anything")
            else:
                _say(f"no trace: the script {why} (exit status {exit_code}) without letting "
                     "the profiler finish (os._exit() or a hard crash?)")
            return final

        raw = work_dir / status["trace"]
        window = status.get("window")
        try:
            steps_recorded = _count_steps(raw) if window != "whole_run" else 0
        except OSError as exc:
            _say(f"error: the profiler's trace could not be read: {exc}")
            return final
        argv = status.get("argv") or [script, *script_args]
        unprofiled, unprofiled_line = _summarize_unprofiled(status.get("unprofiled"), window,
                                                            unprofiled_steps)
        meta = {
            "script": script,
            "module": module,
            "argv": argv,
            "window": window,
            "window_detail": status.get("window_detail"),
            "steps_recorded": steps_recorded,
            "skip": skip, "warmup": warmup, "steps_requested": steps,
            "with_stack": with_stack,
            "profile_memory": profile_memory,
            "record_shapes": record_shapes,
            "cuda": bool(status.get("cuda")),
            "activities": ["CPU", "CUDA"] if status.get("cuda") else ["CPU"],
            "torch_version": status.get("torch_version"),
            "python_version": sys.version.split()[0],
            "exit_code": exit_code,
            "interrupted": interrupted,
            "exception": status.get("exception"),
            "max_seconds": max_seconds,
            "capped": bool(status.get("capped")),
            "optimizer": status.get("optimizer"),
            "forward_module": status.get("forward_module"),
            "overhead_notes": _overhead_notes(with_stack, profile_memory, record_shapes, window),
            "warnings": status.get("warnings") or [],
            **unprofiled,
            "recorded_at": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "wall_seconds": round(elapsed, 3),
        }
        old_int = None
        if threading.current_thread() is threading.main_thread():
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # finish writing it
        try:
            trace_path = _write_trace(raw, out_dir / trace_name, meta)
        except (OSError, RecordError) as exc:  # the script's exit status still stands
            _say(f"error: the trace could not be written: {exc}")
            return final
        finally:
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
        what = {"optimizer_steps": f"{steps_recorded} optimizer step(s)",
                "forward_calls": f"{steps_recorded} forward call(s)",
                "whole_run": "whole run" + (f", first {max_seconds:g} s" if meta["capped"] else "")}
        device = "CPU + CUDA" if meta["cuda"] else "CPU only"
        _say(f"trace ({what.get(window, window)}, {device}) -> {trace_path}")
        if window == "whole_run" and "before the step window" in (meta["window_detail"] or ""):
            _say("the script ended before the step window; lower --skip/--warmup to record steps")
        if unprofiled_line:
            _say(unprofiled_line)

        if analyze is not None:
            reports = {key: out_dir / name for key, name in report_names.items()}
            try:
                analyze(trace_path, reports)
            except KeyboardInterrupt:
                _say(f"warning: analysis interrupted; the trace is kept at {trace_path}")
            except BaseException as exc:  # noqa: B902 - analysis must not change the exit status
                detail = " ".join(f"{type(exc).__name__}: {exc}".split())
                if len(detail) > 200:
                    detail = detail[:197] + "..."
                if "no complete ('X') CPU or GPU events" in str(exc):
                    # (the trace is ours: what is missing is the script's torch work, not a format)
                    _say("warning: the profiler recorded no torch op and no GPU work: nothing to analyze (does "
                         f"the script run any?); the trace is kept at {trace_path}")
                else:
                    _say(f"warning: analysis failed ({detail}); the trace is kept at {trace_path}")
            else:
                made = [str(p) for p in reports.values() if p.exists()]
                if made:
                    _say("report -> " + ", ".join(made))
        return final
    finally:
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)
        if created:
            try:
                out_dir.rmdir()  # only if nothing was written
            except OSError:
                pass


