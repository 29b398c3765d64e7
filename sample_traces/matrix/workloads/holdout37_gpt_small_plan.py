"""holdout37_gpt_small_plan: a small GPT training step with three faults -> each fixed, then all and a CUDA graph.

Thirty-seventh held-out set (pre-registered 2026-12-01 before it was recorded): the step users bring most, with
the faults they bring together: AdamW(foreach=False) (a handful of kernels per tensor), clip_grad_norm_(foreach=
False) (two per tensor), and the loss logged with .item() every step (a sync). A decoder-only transformer: token and
position embeddings, pre-LayerNorm blocks of causal F.scaled_dot_product_attention and a 4x GELU MLP, a final
LayerNorm and a vocabulary head; cross-entropy over every token; bf16 autocast.
Small: d=256, 4 blocks, 4 heads, sequence 128, batch 8, vocabulary 4096 (launch-bound).
before:       AdamW(foreach=False), clip_grad_norm_(foreach=False), losses.append(loss.item()) each step.
after:        AdamW(fused=True), clip_grad_norm_(foreach=True); the .item() kept (unfused_optimizer's fix).
after_nosync: the loss summed into a GPU tensor instead of .item(); optimizer and clipping as before.
after_graph:  all three fixed and the whole step captured in one CUDA graph (capturable fused AdamW): the plan.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout37_gpt_small_plan"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_nosync", "after_graph")
FIX = "AdamW(fused=True) and clip_grad_norm_(foreach=True); the loss kept on the GPU; then the step in a CUDA graph"
SIZE = {"d": 256, "layers": 4, "heads": 4, "seq": 128, "batch": 8, "vocab": 4096}
DESCRIPTION = {
    "before": ("GPT d=256, 4 blocks, 4 heads, seq 128, batch 8, vocab 4096, bf16 autocast; AdamW(foreach=False), "
               "clip_grad_norm_(foreach=False), loss.item() logged each step"),
    "after": "same step; AdamW(fused=True), clip_grad_norm_(foreach=True); the .item() kept",
    "after_nosync": "the before step with the loss summed on the GPU (no .item())",
    "after_graph": "all three fixed and the whole step in one CUDA graph (capturable fused AdamW)",
}


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, d, layers, heads, seq, vocab):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def build(variant, device, size, pool=4):
    cuda = is_cuda(device)
    s = size if cuda else {"d": 32, "layers": 2, "heads": 2, "seq": 16, "batch": 2, "vocab": 128}
    torch.manual_seed(0)
    model = GPT(s["d"], s["layers"], s["heads"], s["seq"], s["vocab"]).to(device)
    params = list(model.parameters())
    graphed = variant == "after_graph" and cuda
    fixed = variant in ("after", "after_graph")
    opt = torch.optim.AdamW(params, lr=3e-4, foreach=False if not fixed else None,
                            fused=True if fixed and cuda else None, capturable=graphed)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"] + 1), device=device) for _ in range(pool)]
    dev = torch.device(device).type
    log = {"losses": [], "sum": torch.zeros((), device=device)}
    sync = variant in ("before", "after")
    info = {"param_tensors": len(params), "params": sum(p.numel() for p in params), **s,
            "optimizer": "AdamW fused" if fixed else "AdamW foreach=False",
            "clip": "foreach" if fixed else "per tensor (foreach=False)", "loss_item_per_step": sync}

    def body(tokens):
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, cache_enabled=False):
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=fixed)
        opt.step()
        if sync:
            log["losses"].append(loss.item())
        else:
            log["sum"] += loss.detach()

    if graphed:
        static = batches[0].clone()

        def captured():
            opt.zero_grad(set_to_none=False)
            body(static)

        g = capture_graph(captured, warmup=3)
        return Step(replay_step(g, [(static, batches)]), info={**info, "cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        body(batches[i % pool])

    return Step(step, info=info)


def make(variant, device, pool=4):
    return build(variant, device, SIZE, pool)
