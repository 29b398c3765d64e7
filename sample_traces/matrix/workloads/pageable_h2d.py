"""pageable_h2d: the existing sample workload ``workloads/pageable_h2d.py``, reused unchanged.

See sample_traces/workloads/pageable_h2d.py for what before/after do.
"""

from workloads import pageable_h2d as base

NAME = "pageable_h2d"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = tuple(base.VARIANTS)
DESCRIPTION = dict(base.DESCRIPTION)
FIX = base.FIX
SOURCE = "sample_traces/workloads/pageable_h2d.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    return base.make(variant, device)
