"""How much confidence the window can support: a fix's own confidence (its analysis's) lowered where the steps it
was read from cannot show that what they measured is typical."""
from __future__ import annotations

from ..analyses import spec
from ..analyses.base import Context, Finding
from ..trace.coverage import lazy_loads_in_full_steps
from ..trace.dispatch_pace import slow_dispatch
from ..trace.steps import STEP_SOURCES


def hedge(ctx: Context, findings: list[Finding], info: dict, steady: bool, erratic: bool) -> None:
    """Low where the window is no steady state or holds one complete step; at most medium where it holds two, loads
    kernels lazily (info["lazy_loads"]: how many, which the verdict says), its steps are erratic, or (for a fix of
    CPU-side idle) the host runs ops slowly."""
    # Every estimate rests on steps a disturbed host may still have slowed; on a host that runs ops slowly (a stated
    # limit: check the host first) so does every fix of CPU-side idle (a review: HTA's a100 DDP rank, views at
    # 27 us, its launch fix "high" at 3.9x).
    slow = slow_dispatch(ctx.model)
    # One complete step cannot show that what it measured repeats (a review: HTA's a100_cuda_event_sync, 17x
    # "medium" from one aten::empty stall in its only step); two, not that it is typical; nor can a window that
    # loads kernels lazily (a B200 vLLM prefill with 8 lazy loads: its launch fix "high" at 2.3x), unless the
    # program recompiles: new kernels load with each new graph, which is its finding.
    full = ctx.n_full if ctx.model.step_source in STEP_SOURCES else 3
    # (cuDNN searching every new shape loads new kernels as well: cudnn_benchmark's finding.)
    recompiles = any(f.kind in ("recompile", "cudnn_benchmark") for f in findings)
    cold = info["lazy_loads"] = 0 if recompiles else lazy_loads_in_full_steps(ctx.model)
    for f in findings:
        if not steady or full < 2:
            f.confidence = "low"
        elif f.confidence == "high" and (erratic or full < 3 or cold or (slow and spec(f.kind).idle_cause)):
            f.confidence = "medium"
