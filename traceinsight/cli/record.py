"""`traceinsight record SCRIPT [ARGS]...`: run a script under the profiler, then analyze the trace."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

import typer

from ..trace.record import EXIT_USAGE, RecordError, _say, run_record
from . import common
from .help import TidyCommand, examples


def _analyze_into(trace_path: Path, reports: dict) -> None:
    # Looked up at call time (common.analyze_and_write), so a test can make the analysis fail.
    # The verdict and the top fixes go to the terminal: a recording should answer, not only name files.
    common.analyze_and_write([trace_path], html=reports["html"], json=reports["json"], markdown=reports["markdown"],
                             show=True, brief=True)


def _exit_like_sigint() -> None:
    """End the way python ends after an uncaught KeyboardInterrupt: killed by SIGINT."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if hasattr(os, "kill") and os.name == "posix" and \
            threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the signal is delivered at once; this is not reached
    raise typer.Exit(128 + 2)




RECORD_HELP = (
    "Run SCRIPT (or -m MODULE) exactly as python would, under torch.profiler, then write a "
    "gzipped trace and the analysis report into a new folder.\n\n"
    "Options go BEFORE the script: everything after SCRIPT (or after -m MODULE) is passed to "
    "the script untouched, e.g. traceinsight record --steps 5 train.py --lr 0.1 --help\n\n"
    "The profiler schedule (--skip, --warmup, --steps) advances on each optimizer.step(); a "
    "script without an optimizer gets one step per outermost nn.Module forward call, and a "
    "script with neither is recorded whole (at most --max-seconds).\n\n"
    "Exit status: the script's, as python would give it (uncaught exception: 1; sys.exit(n): n; "
    "uncaught KeyboardInterrupt: ends by SIGINT like python, 130 in a shell); 2 for record's "
    "own errors (no torch, script not found or not Python, module not found, out-dir unusable)."
)


def record_command(
    script: str = typer.Argument(..., metavar="SCRIPT",
                                 help="The Python script to run (with -m: the module name)."),
    script_args: Optional[List[str]] = typer.Argument(
        None, metavar="SCRIPT_ARGS", help="Passed to the script as its sys.argv[1:]."),
    module: bool = typer.Option(False, "-m", "--module",
                                help="SCRIPT is a module name: run it like `python -m SCRIPT`."),
    out_dir: Optional[Path] = typer.Option(
        None, "--out-dir", "-o", metavar="DIR", show_default=False,
        help="Output folder. Default: a new folder in the current directory, named "
             "traceinsight-SCRIPT-DATE-TIME (DATE-TIME as YYYYmmdd-HHMMSS); an earlier recording is "
             "never overwritten."),
    skip: int = typer.Option(1, "--skip", min=0, metavar="N",
                             help="Steps to skip before the warmup (the profiler's 'wait'; 0 or more)."),
    warmup: int = typer.Option(1, "--warmup", min=0, metavar="N",
                               help="Warmup steps (traced, discarded; 0 or more)."),
    steps: int = typer.Option(3, "--steps", min=1, metavar="N", help="Active steps to record (1 or more)."),
    with_stack: bool = typer.Option(False, "--with-stack",
                                    help="Record Python stacks (inflates CPU time)."),
    profile_memory: bool = typer.Option(False, "--profile-memory",
                                        help="Record allocations (inflates CPU time)."),
    record_shapes: bool = typer.Option(False, "--record-shapes", help="Record op input shapes."),
    max_seconds: float = typer.Option(30.0, "--max-seconds", min=0.0, metavar="S",
                                      help="Cap of a whole-run recording, in seconds (0: no cap)."),
    unprofiled_steps: int = typer.Option(
        20, "--unprofiled-steps", min=0, metavar="N",
        help="After the profiled window, time up to N more optimizer steps with the profiler "
             "stopped (the un-profiled step time the analysis calibrates to; 0: off). The script "
             "is never lengthened: fewer steps are timed if it ends sooner."),
    analyze: bool = typer.Option(True, "--analyze/--no-analyze",
                                 help="Analyze the trace into report.html/.md/.json."),
) -> None:
    try:
        code = run_record(script, list(script_args or []), module=module, out_dir=out_dir,
                          skip=skip, warmup=warmup, steps=steps, with_stack=with_stack,
                          profile_memory=profile_memory, record_shapes=record_shapes,
                          max_seconds=max_seconds, unprofiled_steps=unprofiled_steps,
                          analyze=_analyze_into if analyze else None)
    except RecordError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    if code == -signal.SIGINT:
        _exit_like_sigint()
    raise typer.Exit(code)


record_command.__doc__ = RECORD_HELP

CONTEXT_SETTINGS = {
    # stop parsing record's options at SCRIPT: the rest, --help included, is the script's
    "allow_interspersed_args": False,
    "ignore_unknown_options": False,
}


def register(app: typer.Typer) -> None:
    """Add the ``record`` command to a typer app."""
    # (no no_args_is_help: without a script it is a one-line usage error, cli.main; it had printed 76 lines of help)
    app.command("record", cls=TidyCommand, context_settings=dict(CONTEXT_SETTINGS), help=RECORD_HELP,
                epilog=examples(
                    "traceinsight record train.py --lr 0.1",
                    "traceinsight record --steps 5 --with-stack -o run1 train.py --epochs 1",
                    "traceinsight record -m mypkg.train --config small.yaml"))(record_command)
