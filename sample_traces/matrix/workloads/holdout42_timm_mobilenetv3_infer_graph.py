"""holdout42_timm_mobilenetv3_infer_graph: a timm MobileNetV3-Large serving batches of 8 in fp16 -> the forward in a
CUDA graph.

Forty-second held-out set (pre-registered 2026-12-04 before it was recorded; see holdout42_hf_llama_loss_item_accum).
Model: timm's mobilenetv3_large_100 built without weights, eval mode, fp16 weights (model.half()), channels_last,
batch 8 images 224 x 224 from a pool of GPU inputs, under torch.inference_mode; each step keeps the top-5 classes on
the GPU (no copy to the host).
before: eager forward: its small depthwise and pointwise convolutions each launched by their own op.
after:  the same forward captured once in a CUDA graph (torch.cuda.graph, warmed up on a side stream as its docs
        say) and replayed each step after copying the input into the static one.
"""

import torch

from ._util import Step, capture_graph, cpu_mode, is_cuda

NAME = "holdout42_timm_mobilenetv3_infer_graph"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "capture the forward once in a CUDA graph (torch.cuda.graph) and replay it per batch"
SIZE = {"model": "mobilenetv3_large_100", "batch": 8, "img": 224}
DESCRIPTION = {
    "before": "timm mobilenetv3_large_100 (no weights), eval, fp16, channels_last, batch 8, inference_mode, eager",
    "after": "same, the forward captured in a CUDA graph and replayed",
}
WARMUP_STEPS = 10


def make(variant, device, pool=4):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "mobilenetv3_large_100", "batch": 1, "img": 32}
    dtype = torch.float16 if cuda else torch.float32
    torch.manual_seed(0)
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000).to(device).eval()
    model = model.to(dtype=dtype, memory_format=torch.channels_last)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device, dtype)
          .contiguous(memory_format=torch.channels_last) for _ in range(pool)]
    top5 = torch.zeros(s["batch"], 5, dtype=torch.long, device=device)
    st = {"i": 0}
    graphed = variant == "after" and cuda and not cpu_mode()
    if not graphed:
        def step():
            i = st["i"] = st["i"] + 1
            with torch.inference_mode():
                top5.copy_(model(xs[i % pool]).topk(5, dim=-1).indices)
        return Step(step, info={**s, "graphed": False})

    sx = xs[0].clone()

    def body():
        with torch.inference_mode():
            top5.copy_(model(sx).topk(5, dim=-1).indices)
    graph = capture_graph(body, warmup=3)

    def step():
        i = st["i"] = st["i"] + 1
        sx.copy_(xs[i % pool])
        graph.replay()
    return Step(step, info={**s, "graphed": True})
