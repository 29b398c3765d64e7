"""holdout43_timm_convnext_train_compile: a timm ConvNeXt-Atto trained eagerly in bf16 -> the model under
torch.compile.

Forty-third held-out set (pre-registered 2026-12-04 before it was recorded; see holdout43_hf_gpt2_small_compile).
Model: timm's convnext_atto built without weights, 100 classes, channels_last, bf16 autocast, fused AdamW, batch 32
images 128 x 128 from a pool of GPU batches; the loss (cross-entropy) computed eagerly outside the model. Its blocks
run LayerNorm, GELU and a layer scale as separate kernels eagerly.
before: eager.
after:  the model (not the loss) under torch.compile (default mode: Inductor's fused Triton kernels, no CUDA graphs).
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout43_timm_convnext_train_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile(model) (default mode)"
SIZE = {"model": "convnext_atto", "classes": 100, "batch": 32, "img": 128}
DESCRIPTION = {
    "before": "timm convnext_atto (no weights), channels_last, batch 32 at 128 x 128, bf16 autocast, fused AdamW, "
              "eager cross-entropy, eager",
    "after": "same, the model (not the loss) under torch.compile (default mode)",
}
WARMUP_STEPS = 8      # (after compiles in the first of them)


def make(variant, device, pool=2):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "convnext_atto", "classes": 10, "batch": 2, "img": 32}
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    model = timm.create_model(s["model"], pretrained=False, num_classes=s["classes"]).to(device).train()
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device)
          .contiguous(memory_format=torch.channels_last) for _ in range(pool)]
    ys = [torch.randint(0, s["classes"], (s["batch"],), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = fwd(xs[i % pool])
        loss = F.cross_entropy(logits.float(), ys[i % pool])
        loss.backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={**s, "compiled": compiled,
                                         "params": sum(p.numel() for p in model.parameters())})
