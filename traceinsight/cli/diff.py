"""`traceinsight diff BEFORE AFTER`: did the fix work? With --fail-on-regression, a CI gate."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..trace.load import spooled
from .common import check_writable, run_guarded, said_written, warn, with_progress
from .help import TidyCommand, examples

GATE = "--fail-on-regression"


def _number(s: str) -> bool:
    try:
        float(s.removesuffix("%"))
        return True
    except ValueError:
        return False


def _meant_as_percent(s: str) -> bool:
    """A word after the gate that is no option and no trace: a mistyped percentage (`abc`, `five`), which would
    otherwise read as a third trace ("unexpected extra argument")."""
    return not (s.startswith("-") or Path(s).exists() or s.lower().endswith((".json", ".gz")))


class DiffCommand(TidyCommand):
    """--fail-on-regression takes an optional PCT: given alone (or before a trace or an option) it means 0;
    `5%` reads as 5."""

    def parse_args(self, ctx, args):
        import click
        args = list(args)
        out = []
        for i, a in enumerate(args):
            if i and args[i - 1] == GATE and _number(a):
                a = a.removesuffix("%")
            elif a.startswith(GATE + "=") and _number(a.split("=", 1)[1]):
                a = a.removesuffix("%")
            out.append(a)
            if a == GATE:
                if i + 1 < len(args) and not _number(args[i + 1]) and _meant_as_percent(args[i + 1]):
                    raise click.UsageError(f"{GATE}: '{args[i + 1]}' is not a percentage (give a number, 0 or "
                                           "more, or nothing)", ctx=ctx)
                if i + 1 == len(args) or not _number(args[i + 1]):
                    out.append("0")
        return super().parse_args(ctx, out)


HELP = ("Compare two traces of the same workload: step time change vs noise, causes, kernels, ops.\n\n"
        "With --fail-on-regression [PCT] the exit status is 1 when the after trace is slower than the before "
        "trace beyond the noise band (2 x the step-to-step noise, at least 5% of the step: one program's "
        "run-to-run variation) and by more than PCT percent, if given; where the profiler options differ, the "
        "un-profiled steps the analysis estimated are compared. The JSON's `regression` block says why.")


def register(app: typer.Typer) -> None:
    @app.command("diff", cls=DiffCommand, help=HELP, epilog=examples(
        "traceinsight diff before.json.gz after.json.gz -o diff.html",
        "traceinsight diff before.json.gz after.json.gz --json diff.json --fail-on-regression 5",
        "traceinsight diff findings_before.json findings_after.json   (earlier analyze --json outputs)"))
    def diff(
        before: Path = typer.Argument(..., metavar="BEFORE",
                                      help="The trace before the change (.json / .json.gz), or an earlier "
                                           "`traceinsight analyze --json` output of it."),
        after: Path = typer.Argument(..., metavar="AFTER",
                                     help="The trace after the change, or an analyze --json output of it."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE",
                                              help="Write the HTML diff page here."),
        json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Write the diff as JSON here."),
        markdown: Optional[Path] = typer.Option(None, "--markdown", metavar="FILE",
                                                help="Write a Markdown summary here."),
        fail_on_regression: Optional[float] = typer.Option(
            None, GATE, metavar="[PCT]",
            help="Exit 1 when the after trace is slower beyond the noise band (and by more than PCT% if given). "
                 "Put it after the traces, or write --fail-on-regression=PCT."),
        force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
        quiet: bool = typer.Option(False, "-q", "--quiet", help="No terminal summary."),
    ) -> None:
        if fail_on_regression is not None and not (0 <= fail_on_regression < float("inf")):   # (nan too)
            typer.echo(f"traceinsight: error: {GATE}: the percentage must be a number, 0 or more", err=True)
            raise typer.Exit(2)

        def go():
            from ..render import diff_view
            from ..report.diff import compare, load_side
            from ..report.diff_regression import regression
            check_writable([output, json_out, markdown], [before, after], force)
            if str(before) != "-" and before.exists() and after.exists() and before.samefile(after):
                warn(f"{before}: is both the before and the after trace: the diff compares a trace with itself")
            b, a = Path(spooled(str(before))), Path(spooled(str(after)))
            sb = with_progress(before, lambda: load_side(b))
            sa = with_progress(after, lambda: load_side(a))
            for s in (sb, sa):
                for w in s.warnings:
                    warn(f"{s.path}: {w}")
            d = compare(sb, sa)
            if d["profiler_options_differ"]:
                warn(f"the profiler options differ ({d['before']['profiler_options']} before, "
                     f"{d['after']['profiler_options']} after): " + (
                         "the step change is judged on the un-profiled steps" if d["step_time"]["delta_ms"] is not None
                         else "the profiled steps are not comparable"))
            d["regression"] = regression(d["step_time"], fail_on_regression)
            diff_view.write_outputs(d, (sb, sa), html=output, json_path=json_out, markdown=markdown)
            if not quiet:     # (after the files: a summary piped into `head` must not cost them)
                diff_view.show(d)
            said_written({"diff page": output, "json": json_out, "markdown": markdown})
            return d["regression"]

        gate = run_guarded(go)
        if gate["checked"]:
            typer.echo(f"traceinsight: {'REGRESSION' if gate['regressed'] else 'no regression'}: {gate['reason']}",
                       err=True)
            if gate["regressed"]:
                raise typer.Exit(1)
