"""holdout43_timm_resnet18_infer_compile: a timm ResNet-18 serving batches of 16 in fp16 eagerly -> the model under
torch.compile.

Forty-third held-out set (pre-registered 2026-12-04 before it was recorded; see holdout43_hf_gpt2_small_compile).
Model: timm's resnet18 built without weights, eval mode, fp16 weights (model.half()), channels_last, batch 16 images
160 x 160 from a pool of GPU inputs, under torch.inference_mode; each step keeps the top-5 classes on the GPU (no copy
to the host).
before: eager forward.
after:  the model under torch.compile (default mode: Inductor's fused Triton kernels, no CUDA graphs).
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout43_timm_resnet18_infer_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile(model) (default mode)"
SIZE = {"model": "resnet18", "batch": 16, "img": 160}
DESCRIPTION = {
    "before": "timm resnet18 (no weights), eval, fp16, channels_last, batch 16 at 160 x 160, inference_mode, eager",
    "after": "same, the model under torch.compile (default mode)",
}
WARMUP_STEPS = 10     # (after compiles in the first of them)


def make(variant, device, pool=4):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "resnet18", "batch": 1, "img": 32}
    dtype = torch.float16 if cuda else torch.float32
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000).to(device).eval()
    model = model.to(dtype=dtype, memory_format=torch.channels_last)
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device, dtype)
          .contiguous(memory_format=torch.channels_last) for _ in range(pool)]
    top5 = torch.zeros(s["batch"], 5, dtype=torch.long, device=device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            top5.copy_(fwd(xs[i % pool]).topk(5, dim=-1).indices)

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={**s, "compiled": compiled})
