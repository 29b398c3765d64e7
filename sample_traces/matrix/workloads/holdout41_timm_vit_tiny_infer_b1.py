"""holdout41_timm_vit_tiny_infer_b1: a timm ViT-Ti/16 serving one image at a time -> the forward in a CUDA graph.

Forty-first held-out set (pre-registered 2026-12-04 before it was recorded; see holdout41_hf_gpt2_eager_attention).
Model: timm's vit_tiny_patch16_224 built without weights, eval mode, fp32, batch 1 image 224 x 224 from a pool of
GPU inputs, under torch.no_grad; each step keeps the predicted class on the GPU (no copy to the host).
before: eager forward: about 200 small kernels, each launched by its own op.
after:  the same forward captured once in a CUDA graph (torch.cuda.graph, warmed up on a side stream as its docs
        say) and replayed each step after copying the input into the static one.
"""

import torch

from ._util import Step, capture_graph, cpu_mode, is_cuda

NAME = "holdout41_timm_vit_tiny_infer_b1"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "capture the forward once in a CUDA graph (torch.cuda.graph) and replay it per request"
SIZE = {"model": "vit_tiny_patch16_224", "batch": 1, "img": 224}
DESCRIPTION = {
    "before": "timm vit_tiny_patch16_224 (no weights), eval, fp32, batch 1, no_grad, eager",
    "after": "same, the forward captured in a CUDA graph and replayed",
}
WARMUP_STEPS = 10


def make(variant, device, pool=4):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "vit_tiny_patch16_224", "batch": 1, "img": 32}
    torch.manual_seed(0)
    kw = {} if cuda else {"img_size": s["img"]}
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000, **kw).to(device).eval()
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device) for _ in range(pool)]
    pred = torch.zeros(s["batch"], dtype=torch.long, device=device)
    st = {"i": 0}
    graphed = variant == "after" and cuda and not cpu_mode()
    if not graphed:
        def step():
            i = st["i"] = st["i"] + 1
            with torch.no_grad():
                pred.copy_(model(xs[i % pool]).argmax(-1))
        return Step(step, info={**s, "graphed": False})

    sx = xs[0].clone()

    def body():
        with torch.no_grad():
            pred.copy_(model(sx).argmax(-1))
    graph = capture_graph(body, warmup=3)

    def step():
        i = st["i"] = st["i"] + 1
        sx.copy_(xs[i % pool])
        graph.replay()
    return Step(step, info={**s, "graphed": True})
