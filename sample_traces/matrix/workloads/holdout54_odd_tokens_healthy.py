"""holdout54_odd_tokens_healthy: the fifty-fourth set's GPT-style LM with a vocabulary of 32000 (a multiple of 64) trained
on an odd batch of a prime sequence length: 15 x 509 = 7635 tokens.

Fifty-fourth held-out set (registered before it was recorded; see the matrix README): the control. The token count is
odd, but no matrix has it as its contiguous dimension (the activations' rows are 768 or 32000 values long), so every
product can take cuBLAS's aligned kernels; no finding may claim misaligned dimensions. Model: 6 layers of 768, 12
heads, tied head; bf16 autocast, fused AdamW; batches already on the GPU (four in turn).
"""

import torch

from ._gemm_dims import GPT, lm_step
from ._util import Step, autocast, is_cuda

NAME = "holdout54_odd_tokens_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"batch": 15, "seq": 509, "vocab": 32000, "dim": 768, "heads": 12, "layers": 6}
DESCRIPTION = {
    "before": ("GPT-2-style LM (6 x 768, 12 heads, tied head), vocabulary 32000, batch 15 x 509 (7635 tokens), bf16 "
               "autocast, fused AdamW"),
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 3, "seq": 13, "vocab": 64, "dim": 16, "heads": 2, "layers": 2}
    torch.manual_seed(0)
    model = GPT(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    pool = [tuple(torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2))
            for _ in range(4)]
    return Step(lm_step(model, opt, pool, device, autocast),
                info={"batch": s["batch"], "seq": s["seq"], "tokens": s["batch"] * s["seq"], "amp": "bf16"})
