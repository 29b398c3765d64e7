"""`traceinsight analyze TRACE...`: diagnose why the GPU idles and rank the fixes."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..render.markdown import picture_paths
from ..report.analyze import expand_paths
from .common import analyze_and_write, check_writable, run_guarded, said_written
from .help import TidyCommand, examples

HELP = ("Diagnose why the GPU idles in a trace and rank the fixes.\n\n"
        "Prints the verdict and the ranked fixes. Nothing is written unless you ask for a file with "
        "-o/--output (HTML), --json or --markdown; existing files are kept unless --force.")


def analyze(
    traces: List[Path] = typer.Argument(..., metavar="TRACE...",
                                        help="Kineto trace files (.json / .json.gz) or directories of per-rank traces."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE", help="Write the HTML report here."),
    json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Write the findings as JSON here."),
    markdown: Optional[Path] = typer.Option(
        None, "--markdown", metavar="FILE",
        help="Write a Markdown summary here (for a ticket), and the step's timeline as a PNG beside it."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No terminal summary."),
) -> None:
    def go():
        inputs = expand_paths(traces)
        pictures = picture_paths(markdown, len(inputs)) if markdown is not None else []
        check_writable([output, json_out, markdown, *pictures], inputs, force)
        analyze_and_write(traces, html=output, json=json_out, markdown=markdown, show=not quiet)
        said_written({"report": output, "json": json_out, "markdown": markdown})

    run_guarded(go)


analyze.__doc__ = HELP


def register(app: typer.Typer) -> None:
    app.command("analyze", cls=TidyCommand, help=HELP, epilog=examples(
        "traceinsight analyze trace.json.gz",
        "traceinsight analyze trace.json.gz -o report.html --json findings.json --markdown ticket.md",
        "traceinsight analyze traces/   (a directory of per-rank traces)"))(analyze)
