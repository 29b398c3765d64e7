"""The command line: thin; one module per command, each with `register(app)` (the registry below).

Bad input never shows a traceback: it is one line on stderr naming the file, and exit code 2.
Set TRACEINSIGHT_DEBUG=1 to see the traceback of an unexpected error.
"""
from __future__ import annotations

import gc
import sys

import typer

from .. import __version__
from . import analyze, diff, record
from .common import error_line
from .help import TidyGroup, examples

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, cls=TidyGroup,
                  help="Why does the GPU sit idle? Diagnose PyTorch profiler (Kineto) traces and rank the fixes.",
                  epilog=examples("traceinsight analyze trace.json.gz -o report.html",
                                  "traceinsight record train.py --lr 0.1",
                                  "traceinsight diff before.json.gz after.json.gz --fail-on-regression 5"))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"traceinsight {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print the version and exit.")) -> None:
    """Why does the GPU sit idle? Diagnose PyTorch profiler (Kineto) traces and rank the fixes."""


# The commands, in the order `--help` lists them.
COMMANDS = (analyze, record, diff)
for _command in COMMANDS:
    _command.register(app)


def main() -> None:
    # What the imports made (pandas, numpy, networkx: some 100k objects) lives as long as the process:
    # frozen, the collector's full passes during an analysis do not walk it again (about 50 ms on a
    # trace of a million events).
    gc.freeze()
    try:
        rv = app(standalone_mode=False)
    except Exception as e:
        if _is(e, "UsageError"):
            sys.exit(_usage_error(e))
        if _is(e, "ClickException"):
            error_line(e.format_message())
            sys.exit(e.exit_code)
        if _is(e, "Abort"):       # (Ctrl-C: 130, as a shell gives; Ctrl-D at a prompt: 1)
            if not isinstance(e.__context__, KeyboardInterrupt):
                error_line("aborted")
            sys.exit(130 if isinstance(e.__context__, KeyboardInterrupt) else 1)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)


def _is(e: BaseException, name: str) -> bool:
    """Click's exception of that name (by name and module: typer vendors its own copy of click in newer releases;
    traceinsight's own UsageError is run_guarded's)."""
    return any(k.__name__ == name and "click" in k.__module__ for k in type(e).__mro__)


def _usage_error(e) -> int:
    """A command line the commands cannot take: one line on stderr, exit 2, as bad input is (typer's own is a
    usage line and a box; a user's `traceinsight record` with no script printed 76 lines of help to stdout).
    The bare `traceinsight` still prints its help."""
    ctx = getattr(e, "ctx", None)
    path = ctx.command_path if ctx is not None else "traceinsight"
    if type(e).__name__ == "NoArgsIsHelpError":
        if ctx is not None and ctx.parent is None:      # (the program alone: its help)
            typer.echo(ctx.get_help())
            return 2
        message = "no arguments given"
    else:
        message = e.format_message()
    error_line(f"{path}: {message} (see '{path} --help')")
    return 2
