"""holdout54_odd_vocab_lm_train: a GPT-2-style LM trained with its vocabulary of 50257 tokens (odd), the head tied to the
embedding -> the vocabulary padded to 50304 (a multiple of 64, as nanoGPT does; the extra rows are never a target).

Fifty-fourth held-out set (registered before it was recorded; see the matrix README). The head's product writes
[4096, 50257] bf16 logits and its two backward products read them: a row of 50257 bf16 values is not 16-byte aligned, so
all three run on cuBLAS's narrow-aligned kernels. Model: 6 layers of 768, 12 heads, learned positions, causal SDPA;
bf16 autocast, fused AdamW; batch 8 x 512 tokens already on the GPU (four batches in turn).
"""

import torch

from ._gemm_dims import GPT, lm_step
from ._util import Step, autocast, is_cuda

NAME = "holdout54_odd_vocab_lm_train"
EXPECTED_KIND = "misaligned_gemm"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the vocabulary (embedding and tied head) padded from 50257 to 50304 rows (nothing else)"
SIZE = {"batch": 8, "seq": 512, "vocab": 50257, "padded": 50304, "dim": 768, "heads": 12, "layers": 6}
DESCRIPTION = {
    "before": ("GPT-2-style LM (6 x 768, 12 heads, tied head), vocabulary 50257, batch 8 x 512, bf16 autocast, "
               "fused AdamW"),
    "after": "same, the vocabulary padded to 50304",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 2, "seq": 16, "vocab": 51, "padded": 56, "dim": 16, "heads": 2,
                           "layers": 2}
    torch.manual_seed(0)
    vocab = s["vocab"] if variant == "before" else s["padded"]
    model = GPT(vocab, s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    pool = [tuple(torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2))
            for _ in range(4)]
    return Step(lm_step(model, opt, pool, device, autocast),
                info={"batch": s["batch"], "seq": s["seq"], "vocab": vocab, "amp": "bf16"})
