"""holdout41_timm_vit_base_bf16_compile: the forty-first set's healthy ViT-B, and the same under torch.compile.

Added once the forty-first set was read (2026-12-04), so not held out: the tool's top finding on 5 of the 8 traces
of holdout41_timm_vit_base_bf16_healthy was fusion_candidates at 15-17% of the un-profiled step (136 chains a step
of about 3 elementwise kernels: LayerNorm's and GELU's backward pieces, bias and residual adds), unmeasured. This
measures it. The model, batch and optimizer are holdout41_timm_vit_base_bf16_healthy's.
before: as holdout41_timm_vit_base_bf16_healthy.
after:  the model under torch.compile (default mode: Inductor's fused Triton kernels, no CUDA graphs).
"""

from ._util import Step, cpu_mode
from . import holdout41_timm_vit_base_bf16_healthy as base

NAME = "holdout41_timm_vit_base_bf16_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile(model) (default mode)"
SIZE = dict(base.SIZE)
DESCRIPTION = {"before": base.DESCRIPTION["before"], "after": "same, the model under torch.compile (default mode)"}
WARMUP_STEPS = 8      # (after compiles in the first of them)


def make(variant, device, pool=2):
    import torch

    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    st = base.make("before", device, pool=pool, compile_model=compiled)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(st, close=close, info={**st.info, "compiled": compiled})
