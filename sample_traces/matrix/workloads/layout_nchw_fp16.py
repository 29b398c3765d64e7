"""layout_nchw_fp16: fp16-autocast ResNet-ish conv net, NCHW -> channels_last.

Reuses sample_traces/workloads/layout_nchw_fp16.py (config A: fp16 autocast, cudnn.benchmark
off, 64 channels, which showed nchwToNhwc/nhwcToNchw kernels on the H200) at batch 64 instead
of 128.  The probe (prepare()) of the original is not run.
"""

from workloads import layout_nchw_fp16 as base

NAME = "layout_nchw_fp16"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after")
BATCH = 64
DESCRIPTION = {k: v.replace("batch 128", f"batch {BATCH}") for k, v in base.DESCRIPTION.items()}
FIX = base.FIX
SOURCE = "sample_traces/workloads/layout_nchw_fp16.py (config A, batch=64)"


def make(variant, device):
    return base.build(dict(base.CONFIGS[0]), variant, device, batch=BATCH)
