"""recompile: torch.compile compiles inside the steps the estimates read. A compiled function recompiles
when a guard fails: a new input shape under dynamic=False (or a dimension it specialised on), a Python
scalar argument that changes, a toggled train()/eval() or requires_grad. While it compiles, the GPU idles
for seconds; the attribution gives that idle to this cause (trace/compiles.py).

Where only a few steps compile (a new shape now and then, an eval's first call), those steps are left out
of the medians (trace/compiles.mark_compiling) and the report's limits say so; this finding is for a window
where compiling is what most steps do: the steady state recompiles. Its estimate replays the steps with the
compiler's CPU time taken out (fixes.NoCompiles); the kernels Inductor autotunes at their first run stay. The trace cannot tell a run whose
shapes keep changing from the first steps of one that meets a few buckets and settles: the advice says so.
"""
from __future__ import annotations

import numpy as np

from ..trace.compiles import compile_ms_by_step, compiled_versions
from .base import Context, Finding, KindSpec
from .fixes import NoCompiles

SPEC = KindSpec("recompile", "recompiling (torch.compile)", idle_cause=True, color="#e377c2")


def analyze(ctx: Context) -> list[Finding]:
    lost = ctx.per_step_median(ctx.per_step["recompile"])
    if lost <= 0:
        return []
    steps = ctx.model.steps
    full = steps[steps["step"].isin(ctx.full_steps)]
    by_step = compile_ms_by_step(ctx.model, full)
    versions = compiled_versions(ctx.model)
    seen = "; ".join(f"frame {f} ran versions {_span(v)}" for f, v in versions.items())
    ev = {"compile_ms_by_step": by_step,
          "steps_compiling": f"{len(by_step)} of {len(full)} full steps",
          "compiled_versions": {str(f): v for f, v in versions.items()},
          "idle_ms_per_step": round(lost / 1000, 3)}
    # (A frame's version counts its recompiles: "Torch-Compiled Region: 0/7" is frame 0's eighth graph.)
    title = (f"torch.compile recompiles in {len(by_step)} of {len(full)} steps "
             f"({np.median(list(by_step.values())) / 1000:.1f} s of compiling a step, median"
             f"{'; ' + seen if seen else ''})")
    fix = ("Each recompile is a guard that failed: run with TORCH_LOGS=recompiles to see which. A new input "
           "shape is the usual one: pad variable lengths to a few fixed buckets (multiples of 64), or let one "
           "graph serve every length (torch.compile(dynamic=True), or torch._dynamo.mark_dynamic(x, dim) on the "
           "varying dimension). Keep Python numbers that change every step out of the compiled function's "
           "arguments (pass a tensor), and do not toggle train()/eval() or requires_grad inside it each step. "
           "After torch._dynamo.config.recompile_limit versions of a frame (8 by default), new shapes run "
           "eagerly instead. If the shapes stop changing after the first steps (a few buckets "
           "met once), this window is warm-up: record after it. (The estimate takes the compiler's time out; what "
           "a new graph's first run costs besides, loading its kernels, stays in the step it leaves, so the saving "
           "is the figure to read, the step left an upper bound.)")
    return [Finding(kind=SPEC.kind, title=title, lost_per_step_us=lost,
                    lost_total_us=float(ctx.gaps["recompile"].sum()), fix=fix, confidence="high", evidence=ev,
                    fixes=(NoCompiles(),))]


def _span(v: list[int]) -> str:
    return f"{v[0]}-{v[-1]}" if len(v) > 1 and v[-1] - v[0] == len(v) - 1 else ", ".join(map(str, v))
