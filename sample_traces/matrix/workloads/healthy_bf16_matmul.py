"""healthy_bf16_matmul: the existing sample workload ``workloads/healthy_bf16_matmul.py``, reused unchanged.

See sample_traces/workloads/healthy_bf16_matmul.py for what before/after do.
"""

from workloads import healthy_bf16_matmul as base

NAME = "healthy_bf16_matmul"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = tuple(base.VARIANTS)
DESCRIPTION = dict(base.DESCRIPTION)
FIX = base.FIX
SOURCE = "sample_traces/workloads/healthy_bf16_matmul.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    return base.make(variant, device)
