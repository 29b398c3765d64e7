"""`traceinsight diff BEFORE AFTER`: did the fix work?"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..render import diff_view
from ..report.diff import compare, load_side
from .common import check_writable, run_guarded, said_written, warn, with_progress


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff(
        before: Path = typer.Argument(..., help="The trace before the change (.json / .json.gz), or an earlier "
                                                "`traceinsight analyze --json` output of it."),
        after: Path = typer.Argument(..., help="The trace after the change, or an analyze --json output of it."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the HTML diff page here."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write the diff as JSON here."),
        markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown summary here."),
        force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
        quiet: bool = typer.Option(False, "-q", "--quiet", help="No terminal summary."),
    ) -> None:
        """Compare two traces of the same workload: step time change vs noise, causes, kernels, ops."""
        def go():
            check_writable([output, json_out, markdown], [before, after], force)
            sb = with_progress(before, lambda: load_side(before))
            sa = with_progress(after, lambda: load_side(after))
            for s in (sb, sa):
                for w in s.warnings:
                    warn(f"{s.path}: {w}")
            d = compare(sb, sa)
            if not quiet:
                diff_view.show(d)
            diff_view.write_outputs(d, (sb, sa), html=output, json_path=json_out, markdown=markdown)
            said_written({"diff page": output, "json": json_out, "markdown": markdown})

        run_guarded(go)
