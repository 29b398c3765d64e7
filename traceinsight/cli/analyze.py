"""`traceinsight analyze TRACE...`: diagnose why the GPU idles and rank the fixes."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..report.analyze import expand_paths
from .common import analyze_and_write, check_writable, run_guarded, said_written


def analyze(
    traces: List[Path] = typer.Argument(..., help="Kineto trace files (.json / .json.gz) or directories of per-rank traces."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the HTML report here."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the findings as JSON here."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a short Markdown summary here."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No terminal summary."),
) -> None:
    """Diagnose why the GPU idles in a trace and rank the fixes."""
    def go():
        check_writable([output, json_out, markdown], expand_paths(traces), force)
        analyze_and_write(traces, html=output, json=json_out, markdown=markdown, show=not quiet)
        said_written({"report": output, "json": json_out, "markdown": markdown})

    run_guarded(go)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
