"""What every command shares: one-line errors with exit code 2, never clobbering what the user gave,
a progress bar for big files, and the one analyze-then-write path (analyze, record and the example
report generator all call `analyze_and_write`)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import TraceError, UsageError
from ..render import write_outputs
from ..render.format import terminal_safe
from ..report.analyze import analyze_file
from ..report.document import Report, build_report
from ..report.timeline import items_per_trace
from ..trace.load import expand


def error_line(message: str) -> None:
    """The one line on stderr that bad input gets."""
    typer.echo(f"traceinsight: error: {terminal_safe(message)}", err=True)


def fail(message: str) -> None:
    error_line(message)
    raise typer.Exit(2)


def warn(message: str) -> None:
    typer.echo(f"traceinsight: warning: {terminal_safe(message)}", err=True)


def check_writable(paths: list[Optional[Path]], inputs: list[Path], force: bool) -> None:
    """Never clobber what the user gave: inputs never, existing files only with --force (or a yes)."""
    outs = [p for p in paths if p is not None]
    if len({p.resolve() for p in outs}) < len(outs):
        raise UsageError("the same file is given for two outputs")
    existing = [p for p in inputs if p.exists()]
    for p in outs:
        # The same file, also under another name: a symbolic link, or a hard link (a review overwrote its
        # input through one).
        if p.exists() and any(_same(p, i) for i in existing):
            raise UsageError(f"{p}: is one of the input traces; refusing to overwrite it")
        if p.is_dir():
            raise UsageError(f"{p}: is a directory; give a file name to write")
        if p.exists() and not force:
            if sys.stdin.isatty() and typer.confirm(f"{p} exists. Overwrite?", default=False, err=True):
                continue
            raise UsageError(f"{p}: already exists (use --force to overwrite)")
        if not p.parent.exists():
            raise UsageError(f"{p}: directory {p.parent} does not exist")


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def run_guarded(fn):
    """Run a command body: bad input and our own errors are one line on stderr and exit code 2."""
    try:
        return fn()
    except (TraceError, UsageError) as exc:
        fail(str(exc))
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except OSError as exc:
        # Reading a trace raises TraceError: an OSError here is an output that could not be written (a full
        # disk is no fault of the input, which the catch-all below would have blamed).
        where = f" {exc.filename}" if getattr(exc, "filename", None) else " an output file"
        fail(f"could not write{where}: {exc.strerror or exc}")
    except Exception as exc:  # a bug or a trace shape we do not know: still one line, exit 2
        if os.environ.get("TRACEINSIGHT_DEBUG"):
            raise
        fail(f"could not analyze the input ({type(exc).__name__}: {exc}); "
             "set TRACEINSIGHT_DEBUG=1 for details and please report it")


def with_progress(path: Path, fn):
    """A progress bar on stderr for big files when a person is watching: the bytes of the file read
    and the events decoded, then a spinner while the analysis runs. Nothing when stderr is not a
    terminal (pipes, CI, logs)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if not (size > 20 * 2**20 and sys.stderr.isatty()):
        return fn()
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from ..trace.progress import reporting
    console = Console(stderr=True)
    bar = Progress(SpinnerColumn(), TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(),
                   TextColumn("{task.fields[events]:>12,} events"), TimeElapsedColumn(), TimeRemainingColumn(),
                   console=console, transient=True)
    task = bar.add_task(path.name, total=size, events=0)
    status = console.status(f"analyzing {path.name} ...")

    def report(done: int, total: int, events: int, finished: bool = False) -> None:
        bar.update(task, completed=done, total=total, events=events)
        if finished:
            bar.stop()
            status.start()

    try:
        with bar, reporting(report):
            return fn()
    finally:
        status.stop()


def analyze_one(path: Path, in_job: bool = False, peer_waits: tuple | None = None, step_ranges: str | None = None):
    """Analyze one file; an unexpected failure still names the file it came from."""
    try:
        return analyze_file(path, in_job, peer_waits, step_ranges)
    except (TraceError, UsageError, KeyboardInterrupt):
        raise
    except Exception as exc:
        if os.environ.get("TRACEINSIGHT_DEBUG"):
            raise
        raise TraceError(path, f"could not analyze it ({type(exc).__name__}: {exc}); "
                               "set TRACEINSIGHT_DEBUG=1 for details and please report it") from None


def analyze_and_write(paths: list[Path], html: Path | None = None, json: Path | None = None,
                      markdown: Path | None = None, show: bool = False, brief: bool = False,
                      step_ranges: str | None = None) -> list[Report]:
    """Analyze the traces (files or directories), print the summary if asked, write the outputs."""
    files = [Path(f) for f in expand(paths)]
    analyses = [with_progress(f, lambda f=f: analyze_one(f, step_ranges=step_ranges)) for f in files]
    budget = items_per_trace(len(analyses))
    reports = [build_report(a, timeline_items=budget) for a in analyses]
    # The files first: a summary piped into `head` ends in a broken pipe, and must not cost the report.
    write_outputs(reports, html=html, json=json, markdown=markdown)
    if show:  # the summary prints each trace's warnings beside it: once, not again on stderr
        from ..render import terminal
        terminal.show(reports, brief=brief)
    else:
        for r in reports:
            for w in r.warnings:
                warn(f"{r.path}: {w}")
    return reports


def said_written(outputs: dict[str, Optional[Path]]) -> None:
    for label, p in outputs.items():
        if p is not None:
            typer.echo(f"wrote {label}: {terminal_safe(str(p))}", err=True)
