"""analyses: one module per finding kind, each with its SPEC (analyses.base.KindSpec) and an
`analyze(ctx)` that returns findings with evidence and typed fixes; attribution.py splits idle time
by cause. This registry is the one place that lists the kinds: every other layer reads it.
"""
from __future__ import annotations

from . import (activation_checkpointing, anomaly_detection, attribution, collective_wait, cuda_startup, cudnn_benchmark, dependency_wait, exposed_communication, float64_compute,
               fp32_matmul, fusion_candidates, graph_capture, host_bound, host_built_tensors, launch_overhead, layout_permute, misaligned_gemm, pageable_memcpy,
               profiler_overhead, recompile, sync_stall, unfused_optimizer)
from .base import Context, Finding, KindSpec

_MODULES = (graph_capture, cuda_startup, recompile, cudnn_benchmark, anomaly_detection, launch_overhead, sync_stall, host_built_tensors, pageable_memcpy, layout_permute, host_bound,
            fp32_matmul, float64_compute, misaligned_gemm, unfused_optimizer, activation_checkpointing, fusion_candidates, collective_wait, dependency_wait,
            exposed_communication, profiler_overhead)

# kind -> analyze(ctx), in the order they run.
ANALYZERS = {m.SPEC.kind: m.analyze for m in _MODULES}
# kind or idle cause -> its spec.
KINDS: dict[str, KindSpec] = {m.SPEC.kind: m.SPEC for m in _MODULES} | {s.kind: s for s in attribution.CAUSE_ONLY}
# The idle causes, in the order reports show them, and their colours.
CAUSES: tuple[str, ...] = attribution.CAUSES
CAUSE_COLORS: dict[str, str] = {c: KINDS[c].color for c in CAUSES}
assert all(KINDS[c].idle_cause and KINDS[c].color for c in CAUSES), "every idle cause needs a spec with a colour"


def spec(kind: str) -> KindSpec:
    """The spec of a kind; an unknown kind (an old JSON, a newer tool) gets a plain one."""
    return KINDS.get(kind) or KindSpec(kind, kind.replace("_", " "))


def needs(f: Finding, g: Finding) -> bool:
    """Whether fix `f` needs finding `g` fixed first (a CUDA graph cannot capture a sync inside the step):
    the one test the plan's order, the ranking and the report's wording all use."""
    return g is not f and g.kind in spec(f.kind).prerequisites and g.is_prerequisite


__all__ = ["ANALYZERS", "CAUSES", "CAUSE_COLORS", "KINDS", "Context", "Finding", "KindSpec", "needs", "spec"]
