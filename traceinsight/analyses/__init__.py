"""analyses: one module per finding kind; each `analyze(ctx)` returns findings with evidence."""
from __future__ import annotations

from . import (collective_wait, fp32_matmul, fusion_candidates, host_bound, launch_overhead,
               layout_permute, pageable_memcpy, profiler_overhead, sync_stall, unfused_optimizer)
from .base import Context, Finding

ANALYZERS = {
    "launch_overhead": launch_overhead.analyze,
    "sync_stall": sync_stall.analyze,
    "pageable_memcpy": pageable_memcpy.analyze,
    "layout_permute": layout_permute.analyze,
    "host_bound": host_bound.analyze,
    "fp32_matmul": fp32_matmul.analyze,
    "unfused_optimizer": unfused_optimizer.analyze,
    "fusion_candidates": fusion_candidates.analyze,
    "collective_wait": collective_wait.analyze,
    "profiler_overhead": profiler_overhead.analyze,
}

__all__ = ["ANALYZERS", "Context", "Finding"]
