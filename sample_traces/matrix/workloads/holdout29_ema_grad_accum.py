"""holdout29_ema_grad_accum: a per-tensor weight EMA under gradient accumulation -> one foreach lerp.

Twenty-ninth held-out set (pre-registered 2026-11-29 before it was recorded): the twenty-seventh set's EMA loop
(timm ModelEmaV2 style, ``ema_v.copy_(decay * ema_v + (1 - decay) * model_v)`` over both state_dicts) in a step
that accumulates gradients over four micro-batches, as diffusion and LLM training do: each backward accumulates
every parameter once, so a step holds four times as many AccumulateGrad calls as the model has tensors, and the
EMA runs once per optimizer step. Model: token embedding + 8 nn.TransformerEncoderLayer (d 256, 4 heads, ff 1024,
pre-norm, batch_first, no dropout) + head, 101 tensors; micro-batch 16 x 128 tokens, 4 micro-batches a step,
bf16 autocast, fused AdamW.
before: the state_dict EMA loop after every optimizer step.
after:  ``torch._foreach_lerp_(ema_tensors, model_tensors, 1 - decay)``.
after_graph_only: the before step (4 micro-batches, the step, the EMA loop) in one CUDA graph, capturable fused
        AdamW: the launch fix alone, so the ranking of the two can be checked.
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step
from .holdout27_ema_state_dict import ema_foreach, ema_loop

NAME = "holdout29_ema_grad_accum"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "torch._foreach_lerp_(ema, model, 1 - decay) in place of the per-tensor state_dict EMA loop"
DESCRIPTION = {
    "before": ("embedding + 8 pre-norm TransformerEncoderLayers (d 256, ff 1024) + head, 101 tensors, 4 micro-batches "
               "of 16 x 128 tokens a step (gradient accumulation), bf16 autocast, fused AdamW; weight EMA over "
               "state_dict() per tensor after each optimizer step (timm ModelEmaV2 style)"),
    "after": "same step; the EMA as one torch._foreach_lerp_ over the state_dict tensors",
    "after_graph_only": "the before step (per-tensor EMA kept) captured in one CUDA graph, capturable fused AdamW",
}
ACCUM = 4


class LM(nn.Module):
    def __init__(self, vocab, d, layers, heads, ff):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    vocab, d, layers, heads, ff, batch, seq = (1024, 256, 8, 4, 1024, 16, 128) if cuda else (64, 16, 2, 2, 32, 2, 8)
    torch.manual_seed(0)
    model = LM(vocab, d, layers, heads, ff).to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    params = list(model.parameters())
    graphed = variant == "after_graph_only" and cuda
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True if cuda else None, capturable=graphed)
    update = ema_foreach if variant == "after" else ema_loop
    toks = [torch.randint(0, vocab, (ACCUM, batch, seq + 1), device=device) for _ in range(pool)]
    info = {"param_tensors": len(params), "params": sum(p.numel() for p in params), "micro_batches": ACCUM,
            "ema": "foreach_lerp" if variant == "after" else "state_dict loop (4 kernels a tensor)"}

    def micro(t):
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False):
            logits = model(t[:, :-1])
        (F.cross_entropy(logits.float().flatten(0, 1), t[:, 1:].flatten()) / ACCUM).backward()

    if graphed:
        st_ = toks[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            for k in range(ACCUM):
                micro(st_[k])
            opt.step()
            ema_loop(ema, model)

        g = capture_graph(body, warmup=3)
        return Step(replay_step(g, [(st_, toks)]), info={**info, "cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        t = toks[i % pool]
        for k in range(ACCUM):
            micro(t[k])
        opt.step()
        update(ema, model)

    return Step(step, info=info)
