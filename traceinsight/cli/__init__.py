"""The command line: thin; one module per command, each with `register(app)` (the registry below).

Bad input never shows a traceback: it is one line on stderr naming the file, and exit code 2.
Set TRACEINSIGHT_DEBUG=1 to see the traceback of an unexpected error.
"""
from __future__ import annotations

import typer

from . import analyze, diff, record

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Why does the GPU sit idle? Diagnose PyTorch profiler (Kineto) traces and rank the fixes.")


@app.callback()
def _root() -> None:
    """Why does the GPU sit idle? Diagnose PyTorch profiler (Kineto) traces and rank the fixes."""


# The commands, in the order `--help` lists them.
COMMANDS = (analyze, record, diff)
for _command in COMMANDS:
    _command.register(app)


def main() -> None:
    app()
