"""The command line: thin; one module per command, each with `register(app)` (the registry below).

Bad input never shows a traceback: it is one line on stderr naming the file, and exit code 2.
Set TRACEINSIGHT_DEBUG=1 to see the traceback of an unexpected error.
"""
from __future__ import annotations

import gc

import typer

from .. import __version__
from . import analyze, diff, record
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
    app()
