"""launch_tiny_conv: the existing sample workload ``workloads/launch_tiny_conv.py``, reused unchanged.

See sample_traces/workloads/launch_tiny_conv.py for what before/after do.
"""

from workloads import launch_tiny_conv as base

NAME = "launch_tiny_conv"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = tuple(base.VARIANTS)
DESCRIPTION = dict(base.DESCRIPTION)
FIX = base.FIX
SOURCE = "sample_traces/workloads/launch_tiny_conv.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    return base.make(variant, device)
