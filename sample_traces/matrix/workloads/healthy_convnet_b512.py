"""healthy_convnet_b512: healthy_convnet at batch 512.

On the H100 machine's slower host CPU, healthy_convnet at batch 256 measured 11.05 ms un-profiled
against 9.95 ms of GPU work: 10% idle, so it is not healthy there. At batch 512 the GPU work per
step is about twice the host's enqueue time on both machines.
"""

from . import healthy_convnet as base

NAME = "healthy_convnet_b512"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": base.DESCRIPTION["before"].replace("batch 256", "batch 512")}


def make(variant, device):
    return base.make(variant, device, batch=512)
