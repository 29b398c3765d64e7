"""`traceinsight analyze TRACE...`: diagnose why the GPU idles and rank the fixes."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..job.discover import looks_like_job
from ..errors import UsageError
from ..trace.load import expand
from .common import analyze_and_write, check_writable, run_guarded, said_written, warn
from .help import TidyCommand, examples

HELP = ("Diagnose why the GPU idles in a trace and rank the fixes.\n\n"
        "Prints the verdict and the ranked fixes. Nothing is written unless you ask for a file with "
        "-o/--output (HTML), --json or --markdown; existing files are kept unless --force.")


def analyze(
    traces: List[str] = typer.Argument(..., metavar="TRACE...",
                                       help="Kineto trace files (.json / .json.gz), directories or quoted globs of "
                                            "per-rank traces (ranks of one job get one report)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE", help="Write the HTML report here."),
    json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Write the findings as JSON here."),
    markdown: Optional[Path] = typer.Option(
        None, "--markdown", metavar="FILE",
        help="Write a Markdown summary here (for a ticket), and the step's timeline as a PNG beside it."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No terminal summary."),
    engine: str = typer.Option("local", "--engine", metavar="local|dask|ray",
                               help="Multi-rank jobs: where ranks are analyzed (local processes, a Dask or a Ray cluster)."),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDR",
                                          help="Multi-rank jobs: an existing Dask scheduler or Ray cluster."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N",
                                          help="Multi-rank jobs: parallel workers (default: by cores and memory)."),
    steps: Optional[str] = typer.Option(None, "--steps", metavar="LIST",
                                        help="Multi-rank jobs: the steps to compare, e.g. 5-8,10 (default: those all ranks share)."),
    full_ranks: Optional[str] = typer.Option(None, "--full-ranks", metavar="LIST",
                                             help="Multi-rank jobs: ranks that also get the full single-rank analysis "
                                                  "in the JSON (default: the straggler and the median rank; the HTML "
                                                  "and Markdown show the straggler's, or the median rank's)."),
    step_ranges: Optional[str] = typer.Option(
        None, "--step-ranges", metavar="REGEX",
        help="Take as the steps the program's own ranges (record_function, user annotations) whose names match "
             "REGEX, the outermost of them: for a trace without ProfilerStep markers, or with the wrong ones."),
) -> None:
    def go():
        if step_ranges:
            _check_regex(step_ranges)
        skipped: list[str] = []
        files = expand(traces, skipped)
        for s in skipped:
            warn(s)
        # One file of a multi-rank run gets its own report (with a note that its partners are missing).
        if len(files) > 1 and looks_like_job(files):
            from ..render.markdown import picture_paths
            from .job import analyze_job_and_write
            pictures = picture_paths(markdown, 1) if markdown is not None else []   # (the focus rank's)
            check_writable([output, json_out, markdown, *pictures], [Path(f) for f in files], force)
            if step_ranges:     # (said, not silently ignored)
                warn("--step-ranges applies to single traces for now; the job's ranks keep their own steps")
            analyze_job_and_write(files, engine, workers, address, steps, full_ranks, html=output, json=json_out,
                                  markdown=markdown, show=not quiet)
            said_written({"report": output, "json": json_out, "markdown": markdown})
            return
        inputs = [Path(f) for f in files]
        for name, given in (("--steps", steps), ("--full-ranks", full_ranks)):
            if given:     # (said, not silently ignored)
                warn(f"{name} applies to multi-rank jobs; these traces are not one, so it is ignored")
        pictures = []
        if markdown is not None:
            from ..render.markdown import picture_paths
            pictures = picture_paths(markdown, len(inputs))
        check_writable([output, json_out, markdown, *pictures], inputs, force)
        analyze_and_write(inputs, html=output, json=json_out, markdown=markdown, show=not quiet,
                          step_ranges=step_ranges)
        said_written({"report": output, "json": json_out, "markdown": markdown})

    run_guarded(go)


def _check_regex(pattern: str) -> None:
    import re
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--step-ranges '{pattern}' is not a regular expression ({exc})") from None


analyze.__doc__ = HELP


def register(app: typer.Typer) -> None:
    app.command("analyze", cls=TidyCommand, help=HELP, epilog=examples(
        "traceinsight analyze trace.json.gz",
        "traceinsight analyze trace.json.gz -o report.html --json findings.json --markdown ticket.md",
        "traceinsight analyze traces/   (a directory of per-rank traces: one report for the job)",
        "traceinsight analyze 'run/rank*.json.gz' --engine dask --address tcp://scheduler:8786"))(analyze)
