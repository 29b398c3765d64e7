"""holdout41_timm_vit_base_bf16_healthy: a timm ViT-B/16 trained in bf16 with a fused AdamW: must be called healthy.

Forty-first held-out set (pre-registered 2026-12-04 before it was recorded; see holdout41_hf_gpt2_eager_attention).
Model: timm's vit_base_patch16_224 built without weights (12 blocks, width 768, attention through SDPA), batch 64
images 224 x 224 from a pool of GPU batches, bf16 autocast, cross entropy, AdamW(fused=True); GPU-bound.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout41_timm_vit_base_bf16_healthy"
EXPECTED_KIND = None
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"model": "vit_base_patch16_224", "batch": 64, "img": 224}
DESCRIPTION = {"before": "timm vit_base_patch16_224 (no weights), bf16 autocast, batch 64, AdamW(fused=True)"}
WARMUP_STEPS = 8


def make(variant, device, pool=2, compile_model=False):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "vit_tiny_patch16_224", "batch": 2, "img": 32}
    torch.manual_seed(0)
    kw = {} if cuda else {"img_size": s["img"]}
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000, **kw).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    fwd = torch.compile(model) if compile_model else model      # (holdout41_timm_vit_base_bf16_compile's after)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device) for _ in range(pool)]
    ys = [torch.randint(0, 1000, (s["batch"],), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = fwd(xs[i % pool])
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, info=s)
