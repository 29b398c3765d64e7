"""The child side of ``traceinsight record``: run one user script under torch.profiler.

This file is executed by path in a fresh interpreter (``python _record_boot.py CONFIG``) by
:mod:`traceinsight.record`; it must not import ``traceinsight`` (the script should see an
interpreter that is as close to ``python script.py`` as possible) and it imports nothing of
the script's before the script itself does, except ``torch``.

What it does, in order:

1. Makes ``sys.argv``, ``sys.path[0]`` and ``__main__`` what plain ``python script.py`` /
   ``python -m module`` would give the script.
2. Starts a *probe* profiler with no schedule: it records from the script's start, so a
   script that never steps still yields a trace (the ``whole_run`` window, capped in time).
3. Installs a global optimizer step post-hook and global module forward (pre-)hooks. The
   first main-thread optimizer step (or, failing that, the end of the first outermost
   ``nn.Module`` forward call) replaces the probe by a scheduled profiler
   (wait=skip, warmup, active=steps, repeat=1) that the same hooks advance. Optimizer
   steps win: the first one restarts the schedule even if forward calls were driving it.
   Once an optimizer-step window is exported and the profiler stopped, the same hook times
   up to ``unprofiled_steps`` more steps (the un-profiled step time, see record_unprofiled).
4. Runs the script. However it ends (normal end, exception, ``sys.exit``, Ctrl-C), prints
   the traceback the way python would, stops the profiler, exports what was recorded,
   writes ``status.json`` for the parent, and then leaves with the exit status python
   would have given (re-raising the script's exception at top level with a silent
   ``sys.excepthook``, so CPython itself does the exit: 1, ``sys.exit`` code, or death by
   SIGINT after an uncaught KeyboardInterrupt).
"""
import os
import sys

_BOOT_DIR = os.path.dirname(os.path.realpath(__file__))
# python put this file's folder (the traceinsight package) first on sys.path: never let the
# script import traceinsight's modules (cli, pipeline, errors, ...) by accident.
if sys.path and sys.path[0] and os.path.realpath(sys.path[0]) == _BOOT_DIR:
    del sys.path[0]

import builtins  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

_RUNPY_FILE = None  # filled lazily: runpy's frames are trimmed from tracebacks


class SetupError(Exception):
    """The script could not be started at all (module not found, torch missing, ...)."""


class _ModuleNotFound(ImportError):
    pass


def _describe(exc):
    """'TypeName: message' on one line (module-qualified for non-builtins, like python)."""
    try:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    except Exception:  # a broken __str__
        text = type(exc).__name__
    return " ".join(text.split()) or type(exc).__name__


def _adds_path0():
    """Whether python would prepend the script's folder / cwd to sys.path (-P and -I don't)."""
    return not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated)



def _load(name):
    """A module beside this file (record_profiler, record_laps, record_quiet), loaded by path so that no traceinsight
    module is imported into the user's script."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_traceinsight_" + name, os.path.join(_BOOT_DIR, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trim_traceback(tb):
    """Drop this file's and runpy's frames: python shows the script's frames only."""
    global _RUNPY_FILE
    if _RUNPY_FILE is None:
        import runpy
        _RUNPY_FILE = runpy.__file__
    skip = {__file__, _RUNPY_FILE, "<frozen runpy>"}
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename in skip:
        first = first.tb_next
    return first


def _print_exception(exc):
    """Print the script's uncaught exception the way python does (through sys.excepthook)."""
    tb = _trim_traceback(exc.__traceback__)
    try:
        exc.__traceback__ = tb  # the default hook prints the exception's own traceback
    except Exception:
        pass
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException:
        traceback.print_exception(type(exc), exc, tb)
    try:
        sys.stderr.flush()
    except Exception:
        pass


def _fresh_main():
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main  # stays: atexit handlers, pickle and multiprocessing see it
    return main


def _load_script(script):
    path = os.path.join(os.getcwd(), script)  # like python: cwd + path, not normalized
    with io.open_code(path) as f:
        source = f.read()
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise SetupError("%s is not a Python script (%s)" % (script, _describe(exc))) from None

    def run():
        from importlib.machinery import SourceFileLoader
        main = _fresh_main()
        main.__dict__.update(__file__=path, __cached__=None, __package__=None, __spec__=None,
                             __loader__=SourceFileLoader("__main__", path))
        exec(code, main.__dict__)
    return run


def _load_module(name):
    import runpy
    sys.argv[0] = "-m"  # what python shows while it searches for the module
    try:
        mod_name, spec, code = runpy._get_module_details(name, _ModuleNotFound)
    except _ModuleNotFound as exc:
        raise SetupError(str(exc) or "No module named %s" % name) from None
    sys.argv[0] = spec.origin

    def run():
        main = _fresh_main()
        main.__dict__.update(__file__=spec.origin, __cached__=spec.cached, __doc__=None,
                             __loader__=spec.loader, __package__=spec.parent, __spec__=spec)
        exec(code, main.__dict__)
    return run


def _write_status(work_dir, status):
    path = os.path.join(work_dir, "status.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(status, f)
    os.replace(path + ".tmp", path)


def main():
    """Returns the exception to re-raise at top level (None: ends normally)."""
    cfg = json.loads(sys.argv[1])
    work_dir = cfg["work_dir"]
    status = {"setup_error": None, "trace": None, "window": None, "window_detail": None,
              "exception": None, "interrupted": False, "argv": None, "cuda": False,
              "torch_version": None, "capped": False, "optimizer": None,
              "forward_module": None, "warnings": [], "unprofiled": None}
    script = cfg["script"]
    sys.argv = [script] + list(cfg["args"])
    if _adds_path0():
        sys.path.insert(0, os.getcwd() if cfg["module"]
                        else os.path.dirname(os.path.realpath(script)))

    def setup_error(exc):
        status["setup_error"] = str(exc)
        _write_status(work_dir, status)
        return SystemExit(2)

    def script_failed(exc):
        if not isinstance(exc, SystemExit):
            status["exception"] = _describe(exc)
            status["interrupted"] = isinstance(exc, KeyboardInterrupt)
            _print_exception(exc)  # before the (slow) export: python prints it first too

    # Find and compile the code first, as python does before running any of it (-m imports
    # the parent packages here): a module that is not there costs no torch import.
    try:
        run = _load_module(script) if cfg["module"] else _load_script(script)
    except SetupError as exc:
        return setup_error(exc)
    except BaseException as exc:  # noqa: B902 - a parent package's own error
        script_failed(exc)
        _write_status(work_dir, status)
        return exc
    status["argv"] = list(sys.argv)

    try:
        import torch
    except BaseException as exc:  # noqa: B902
        return setup_error("PyTorch could not be imported (%s): pip install "
                           "'traceinsight-gpu[record]'" % _describe(exc))
    status["torch_version"] = str(torch.__version__)
    _tear_down_cupti(torch)
    recorder = _load("record_profiler").Recorder(torch, cfg, work_dir, _load("record_laps").Laps,
                                                 _load("record_quiet").QuietKineto, _describe)
    status["cuda"] = recorder.cuda
    try:
        recorder.start()
    except Exception as exc:
        return setup_error("torch.profiler could not start: %s" % _describe(exc))

    outcome = None
    try:
        run()
    except BaseException as exc:  # noqa: B902 - SystemExit, KeyboardInterrupt too, like python
        outcome = exc
        script_failed(exc)

    if os.getpid() != recorder.pid:  # a fork of the script came back through here
        return outcome
    old_int = None
    if threading.current_thread() is threading.main_thread():
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a 2nd Ctrl-C: keep the trace
    try:
        window, trace, detail = recorder.finish()
        status.update(window=window, window_detail=detail,
                      trace=os.path.basename(trace) if trace else None,
                      capped=recorder.capped, yielded=recorder.yielded, optimizer=recorder.optimizer_name,
                      forward_module=recorder.forward_module, warnings=recorder.warnings,
                      unprofiled=recorder.timing())
        _write_status(work_dir, status)
    finally:
        if old_int is not None:
            signal.signal(signal.SIGINT, old_int)
    return outcome


def _tear_down_cupti(torch):
    """Ask Kineto to detach CUPTI when the profiler stops (TEARDOWN_CUPTI=1), unless the user chose.

    Left attached (pytorch/pytorch#144455), CUPTI slows every later launch: the steps timed after the
    window, our un-profiled figure, ran up to 45% slow where launch-bound (an H100 and an H200,
    benchmarks/sync_removal_probe.py) and not slower torn down. Only with CUDA >= 12.6: before it,
    re-attaching CUPTI after a teardown crashed with CUDA graphs (torch turns teardown off there).
    Kineto reads the variable when the profiler stops, so setting it here is in time."""
    if "TEARDOWN_CUPTI" in os.environ:
        return
    try:
        cuda = tuple(int(x) for x in str(torch.version.cuda).split(".")[:2])
    except (AttributeError, TypeError, ValueError):  # a CPU-only or ROCm build: nothing to detach
        return
    if cuda >= (12, 6):
        os.environ["TEARDOWN_CUPTI"] = "1"


def _silent_excepthook(*_args):
    pass


if __name__ == "__main__":
    _outcome = main()
    if _outcome is not None:
        if not isinstance(_outcome, SystemExit):
            # already printed (trimmed to the script's frames); let CPython pick the exit
            # status itself: 1, or death by SIGINT for an uncaught KeyboardInterrupt
            sys.excepthook = _silent_excepthook
        raise _outcome.with_traceback(None)
