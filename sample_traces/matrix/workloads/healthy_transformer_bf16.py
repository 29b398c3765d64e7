"""healthy_transformer_bf16: a mid-size bf16 Transformer encoder training step (GPU-bound).

4x nn.TransformerEncoderLayer(d_model=1024, nhead=16, ffn 4096, pre-norm, no dropout),
batch 48 x seq 512, bf16 parameters, fused AdamW, no syncs: tens of ms of GPU work per step
against a few ms of host enqueue time.
"""

import torch
import torch.nn as nn

from ._util import Step, is_cuda

NAME = "healthy_transformer_bf16"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("4x TransformerEncoderLayer(d=1024, 16 heads, ffn 4096, norm_first, dropout 0), "
                          "batch 48 x seq 512, bf16 params, fused AdamW, no syncs")}


def make(variant, device):
    cuda = is_cuda(device)
    d, heads, ff, layers, batch, seq = (1024, 16, 4096, 4, 48, 512) if cuda else (64, 4, 128, 2, 2, 16)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, norm_first=True,
                                       activation="gelu")
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, seq, d, device=device, dtype=torch.bfloat16) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss = model(xs[i % 2]).float().pow(2).mean()
        loss.backward()
        opt.step()
    return Step(step, info={"d_model": d, "layers": layers, "batch": batch, "seq": seq,
                            "params": sum(p.numel() for p in model.parameters())})
