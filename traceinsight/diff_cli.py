"""`traceinsight diff BEFORE AFTER`: did the fix work? (registered by cli._register_optional)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


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
        from .cli import _with_progress, check_writable, run_guarded
        from .errors import UsageError

        def go():
            from . import diff as diff_mod
            from .render import diff_render

            outs = [p for p in (output, json_out, markdown) if p is not None]
            if len({p.resolve() for p in outs}) < len(outs):
                raise UsageError("the same file is given for two outputs")
            check_writable([output, json_out, markdown], [before, after], force)
            sb = _with_progress(before, lambda: diff_mod.load_side(before))
            sa = _with_progress(after, lambda: diff_mod.load_side(after))
            for s in (sb, sa):
                for w in s.warnings:
                    typer.echo(f"traceinsight: warning: {s.path}: {w}", err=True)
            d = diff_mod.compare(sb, sa)
            if not quiet:
                diff_render.show(d)
            diff_render.write_outputs(d, (sb, sa), html=output, json_path=json_out, markdown=markdown)
            for label, p in (("diff page", output), ("json", json_out), ("markdown", markdown)):
                if p is not None:
                    typer.echo(f"wrote {label}: {p}", err=True)

        run_guarded(go)
