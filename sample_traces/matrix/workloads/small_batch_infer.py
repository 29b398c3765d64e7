"""small_batch_infer: the existing sample workload ``workloads/launch_small_mlp.py``, reused unchanged.

See sample_traces/workloads/launch_small_mlp.py for what before/after do.
"""

from workloads import launch_small_mlp as base

NAME = "small_batch_infer"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = tuple(base.VARIANTS)
DESCRIPTION = dict(base.DESCRIPTION)
FIX = base.FIX
SOURCE = "sample_traces/workloads/launch_small_mlp.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    return base.make(variant, device)
