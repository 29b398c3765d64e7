"""holdout24_empty_cache_eval: torch.cuda.empty_cache() after every batch of an inference loop.

Twenty-fourth held-out set (pre-registered 2026-11-29 before it was recorded, after the twenty-third set taught
sync_stall that a cudaFree it unblocks also takes the next step's cudaMalloc calls with it): the same habit in
inference, where the activations are freed as the forward goes and the allocator's churn differs from a
training step's. An 8-layer transformer encoder (width 768, 12 heads, MLP 3072, nn.TransformerEncoderLayer,
norm_first), batch 32 of 256 tokens, bf16 autocast, eval under torch.inference_mode; the logits' argmax stays on
the GPU.
before: each batch's forward, then torch.cuda.empty_cache().
after:  the same forward without empty_cache.
after_graph: no empty_cache, the forward captured in one CUDA graph.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout24_empty_cache_eval"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "drop the per-batch torch.cuda.empty_cache() (the caching allocator reuses its blocks)"
DESCRIPTION = {
    "before": ("8-layer transformer encoder (768 wide, 12 heads, MLP 3072), batch 32 x 256 tokens, bf16, "
               "inference_mode; torch.cuda.empty_cache() after each batch"),
    "after": "same forward, no empty_cache",
    "after_graph": "no empty_cache, the forward in one CUDA graph",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    d, heads, h, layers, batch, seq = (768, 12, 3072, 8, 32, 256) if cuda else (32, 4, 64, 2, 2, 8)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d, heads, h, dropout=0.0, batch_first=True, norm_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, layers, enable_nested_tensor=False), nn.Linear(d, 1000))
    model = model.to(device).eval()
    xs = [torch.randn(batch, seq, d, device=device) for _ in range(pool)]
    st = {"i": 0, "pred": None}
    if variant == "after_graph" and cuda:
        sx, out = xs[0].clone(), {}

        def body():
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                out["pred"] = model(sx).argmax(-1)
        return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs)]),
                    info={"batch": batch, "seq": seq, "cuda_graph": True, "inference": True})
    free = variant == "before" and cuda

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode(), autocast(device):
            st["pred"] = model(xs[i % pool]).argmax(-1)
        if free:
            torch.cuda.empty_cache()
    return Step(step, info={"batch": batch, "seq": seq, "empty_cache": free, "inference": True})
