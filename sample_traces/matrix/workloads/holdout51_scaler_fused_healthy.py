"""holdout51_scaler_fused_healthy: a mid-size transformer trained in fp16 with a GradScaler and fused AdamW, whose
inf/NaN check stays on the GPU (the fused optimizer takes the scaler's found_inf tensor and skips the update itself;
no `.item()` in GradScaler.step), and nothing to fix.

Fifty-first held-out set (registered before it was recorded; see the matrix README). Expected healthy: a NaN guard
with no sync, beside the set's pairs whose NaN checks sync after every backward node. Model: holdout48's tagger,
6 layers of 768, 12 heads, vocabulary 8000; batch 32 x 512 tokens already on the GPU (two batches in turn); fp16
autocast, torch.amp.GradScaler, AdamW(fused=True).
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda
from .holdout48_per_seq_loss_train import Tagger

NAME = "holdout51_scaler_fused_healthy"
# Registered "healthy" (89bb8b1b). after_compile, added once the set was read: the model in torch.compile (default
# mode), fusion_candidates' advice, which the tool ranked on 7 of its 8 clean62 traces (4.97 ms a step, 21%, likely
# 1.0-1.6x). It measured 24.07 -> 17.71 and 24.05 -> 17.78 ms (1.36x, h100_clean63A-B): the step was not healthy, and
# the tool's finding was the right one; scored as a pair where the variant was recorded (clean63).
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after_compile")
FIX = "torch.compile(model) (default mode): Inductor fuses the pointwise work"
SIZE = {"batch": 32, "seq": 512, "vocab": 8000, "dim": 768, "heads": 12, "layers": 6}
DESCRIPTION = {"before": ("transformer tagger (6 x 768, 12 heads, vocabulary 8000), batch 32 x 512, fp16 autocast, "
                          "GradScaler, fused AdamW (the scaler's inf check on the GPU, no sync)"),
               "after_compile": "same, the model in torch.compile (default mode)"}
WARMUP_STEPS = 8


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 2, "seq": 16, "vocab": 50, "dim": 16, "heads": 2, "layers": 1}
    torch.manual_seed(0)
    model = Tagger(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
    fwd = torch.compile(model) if variant == "after_compile" and cuda else model   # (not compiled in the CPU smoke)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=cuda)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    ys = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device, dtype=torch.float16):
            logits = fwd(xs[i % 2])
        scaler.scale(F.cross_entropy(logits.float().flatten(0, 1), ys[i % 2].flatten())).backward()
        scaler.step(opt)
        scaler.update()
    return Step(step, info={"batch": s["batch"], "seq": s["seq"], "amp": "fp16", "grad_scaler": True,
                            "optimizer": "AdamW(fused=True)"})
