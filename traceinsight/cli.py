"""The command line: thin; every decision lives in the pipeline modules.

Bad input never shows a traceback: it is one line on stderr naming the file, and exit code 2.
Set TRACEINSIGHT_DEBUG=1 to see the traceback of an unexpected error.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import TraceError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Why does the GPU sit idle? Diagnose PyTorch profiler (Kineto) traces and rank the fixes.")


@app.callback()
def _root() -> None:
    """Why does the GPU sit idle? Diagnose PyTorch profiler (Kineto) traces and rank the fixes."""


def fail(message: str) -> None:
    typer.echo(f"traceinsight: error: {message}", err=True)
    raise typer.Exit(2)


def check_writable(paths: list[Optional[Path]], inputs: list[Path], force: bool) -> None:
    """Never clobber what the user gave: inputs never, existing files only with --force (or a yes)."""
    resolved_inputs = {p.resolve() for p in inputs if p.exists()}
    for p in paths:
        if p is None:
            continue
        if p.resolve() in resolved_inputs:
            raise UsageError(f"{p}: is one of the input traces; refusing to overwrite it")
        if p.exists() and not force:
            if sys.stdin.isatty() and typer.confirm(f"{p} exists. Overwrite?", default=False, err=True):
                continue
            raise UsageError(f"{p}: already exists (use --force to overwrite)")
        if not p.parent.exists():
            raise UsageError(f"{p}: directory {p.parent} does not exist")


def run_guarded(fn):
    try:
        return fn()
    except TraceError as exc:
        fail(str(exc))
    except UsageError as exc:
        fail(str(exc))
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug or a trace shape we do not know: still one line, exit 2
        if os.environ.get("TRACEINSIGHT_DEBUG"):
            raise
        fail(f"could not analyze the input ({type(exc).__name__}: {exc}); "
             "set TRACEINSIGHT_DEBUG=1 for details and please report it")


@app.command()
def analyze(
    traces: List[Path] = typer.Argument(..., help="Kineto trace files (.json / .json.gz) or directories of per-rank traces."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the HTML report here."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the findings as JSON here."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a short Markdown summary here."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No terminal summary."),
) -> None:
    """Diagnose why the GPU idles in a trace and rank the fixes."""
    from . import pipeline
    from .render import terminal

    def go():
        files = pipeline.expand_paths(traces)
        check_writable([output, json_out, markdown], files, force)
        analyses = []
        for f in files:
            analyses.append(_with_progress(f, lambda f=f: _analyze_one(pipeline, f)))
        for a in analyses:
            for w in a.model.warnings:
                typer.echo(f"traceinsight: warning: {a.model.path}: {w}", err=True)
        if not quiet:
            terminal.show(analyses)
        pipeline.write_outputs(analyses, html=output, json=json_out, markdown=markdown)
        for label, p in (("report", output), ("json", json_out), ("markdown", markdown)):
            if p is not None:
                typer.echo(f"wrote {label}: {p}", err=True)

    run_guarded(go)


def _analyze_one(pipeline, path: Path):
    """Analyze one file; an unexpected failure still names the file it came from."""
    try:
        return pipeline.analyze_file(path)
    except (TraceError, UsageError, KeyboardInterrupt):
        raise
    except Exception as exc:
        if os.environ.get("TRACEINSIGHT_DEBUG"):
            raise
        raise TraceError(path, f"could not analyze it ({type(exc).__name__}: {exc}); "
                               "set TRACEINSIGHT_DEBUG=1 for details and please report it") from None


def _with_progress(path: Path, fn):
    """A spinner on stderr for big files when a person is watching."""
    try:
        big = path.stat().st_size > 20 * 2**20
    except OSError:
        big = False
    if big and sys.stderr.isatty():
        from rich.console import Console
        with Console(stderr=True).status(f"analyzing {path} ..."):
            return fn()
    return fn()


def _register_optional() -> None:
    for mod in ("record", "diff_cli"):
        try:
            m = __import__(f"traceinsight.{mod}", fromlist=["register"])
        except ImportError:
            continue
        m.register(app)


_register_optional()


def main() -> None:
    app()
