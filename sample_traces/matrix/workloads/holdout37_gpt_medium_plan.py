"""holdout37_gpt_medium_plan: the small GPT plan's program at a size where the GPU has more to do.

Thirty-seventh held-out set (pre-registered 2026-12-01 before it was recorded): holdout37_gpt_small_plan's step and
variants, d=768, 8 blocks, 12 heads, sequence 512, batch 16, vocabulary 8192. The fused optimizer should leave the
step near GPU-bound, so the sync and the graph should measure little on top: a check that the tool does not
claim for them what the small model's step has.
"""

from .holdout37_gpt_small_plan import DESCRIPTION as _SMALL, VARIANTS as _VARIANTS, build

NAME = "holdout37_gpt_medium_plan"
VARIANTS = _VARIANTS
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
FIX = "AdamW(fused=True) and clip_grad_norm_(foreach=True); the loss kept on the GPU; then the step in a CUDA graph"
SIZE = {"d": 768, "layers": 8, "heads": 12, "seq": 512, "batch": 16, "vocab": 8192}
DESCRIPTION = {k: v.replace("GPT d=256, 4 blocks, 4 heads, seq 128, batch 8, vocab 4096",
                            "GPT d=768, 8 blocks, 12 heads, seq 512, batch 16, vocab 8192") for k, v in _SMALL.items()}


def make(variant, device, pool=4):
    return build(variant, device, SIZE, pool)
