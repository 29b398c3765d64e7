"""holdout40_timm_vit_fp32: a timm ViT-S/16 trained in full fp32 -> TF32 matmuls.

Fortieth held-out set (pre-registered 2026-12-03 before it was recorded; see holdout40_hf_gpt2_unfused_adamw).
Model: timm's vit_small_patch16_224 built without weights (12 blocks, width 384, its own attention through SDPA),
batch 128 images 224 x 224 from a pool of GPU batches, cross entropy, fused AdamW; fp32 weights and data.
before: torch.set_float32_matmul_precision("highest") (PyTorch's default: no TF32 for matmuls).
after:  torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data stay fp32.
"""

import torch
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout40_timm_vit_fp32"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32); model and data remain fp32'
SIZE = {"model": "vit_small_patch16_224", "batch": 128, "img": 224}
DESCRIPTION = {
    "before": "timm vit_small_patch16_224 (no weights), batch 128, fp32, fused AdamW, matmul precision highest",
    "after": 'same, set_float32_matmul_precision("high") (TF32)',
}
WARMUP_STEPS = 8


def make(variant, device, pool=2):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "vit_tiny_patch16_224", "batch": 2, "img": 32}
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
    torch.manual_seed(0)
    kw = {} if cuda else {"img_size": s["img"]}
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000, **kw).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device) for _ in range(pool)]
    ys = [torch.randint(0, 1000, (s["batch"],), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xs[i % pool]), ys[i % pool]).backward()
        opt.step()

    def close():
        torch.set_float32_matmul_precision(prev)
    return Step(step, close=close, info={**s, "matmul_precision": torch.get_float32_matmul_precision()})
