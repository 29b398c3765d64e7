"""holdout39_fp32_moe_bmm_train: fp32 training of mixture-of-experts layers computed with batched matmuls -> TF32.

Thirty-ninth held-out set (pre-registered 2026-12-01 before it was recorded): the second test of fp32_matmul's
per-GEMM law (see holdout39_fp32_mlp_infer), on kernels none of the fitted programs ran: batched GEMMs
(torch.bmm over 8 experts at once, forward and backward), ~410 us in FP32 (8 x 512 x 768 x 3072; 70.5 us in TF32 on
an H200, timed alone before registering; 5.9x predicted).
Model: 4 residual layers of LayerNorm, then 8 experts (768 -> 3072, GELU, 3072 -> 768) applied to 8 equal groups
of 512 tokens each (the routing fixed, so no host read: tokens [8, 512, 768] @ weights [8, 768, 3072] by
torch.bmm), mean-squared error to a target; fp32 weights and data, fused AdamW, a pool of GPU batches.
before: set_float32_matmul_precision("highest").
after:  set_float32_matmul_precision("high") (TF32 tensor cores); model and data stay fp32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout39_fp32_moe_bmm_train"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
SIZE = {"experts": 8, "tokens": 512, "d": 768, "hidden": 3072, "layers": 4}
DESCRIPTION = {
    "before": "fp32 training, 4 residual MoE layers (8 experts 768 -> 3072 -> 768 by torch.bmm on 8 x 512 tokens), "
              'fused AdamW, set_float32_matmul_precision("highest")',
    "after": 'same, set_float32_matmul_precision("high") (TF32)',
}
WARMUP_STEPS = 8


class Experts(nn.Module):
    def __init__(self, e, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.w1 = nn.Parameter(torch.randn(e, d, hidden) * d ** -0.5)
        self.b1 = nn.Parameter(torch.zeros(e, 1, hidden))
        self.w2 = nn.Parameter(torch.randn(e, hidden, d) * hidden ** -0.5)
        self.b2 = nn.Parameter(torch.zeros(e, 1, d))

    def forward(self, x):                      # x: [experts, tokens, d]
        h = F.gelu(torch.bmm(self.norm(x), self.w1) + self.b1)
        return x + torch.bmm(h, self.w2) + self.b2


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    s = SIZE if cuda else {"experts": 2, "tokens": 4, "d": 16, "hidden": 32, "layers": 2}
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
    torch.manual_seed(0)
    model = nn.Sequential(*[Experts(s["experts"], s["d"], s["hidden"]) for _ in range(s["layers"])]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    shape = (s["experts"], s["tokens"], s["d"])
    xs = [torch.randn(shape, device=device) for _ in range(pool)]
    ys = [torch.randn(shape, device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(xs[i % pool]), ys[i % pool]).backward()
        opt.step()

    def close():
        torch.set_float32_matmul_precision(prev)
    return Step(step, close=close, info={**s, "matmul_precision": torch.get_float32_matmul_precision()})
