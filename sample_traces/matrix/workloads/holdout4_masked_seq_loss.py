"""holdout4_masked_seq_loss: a padded-sequence loss by boolean indexing -> ignore_index.

Fourth held-out set: a token classifier over padded sequences (embedding + 3 MLP layers, batch 32 x 256
tokens, 20% padding), bf16 autocast, fused Adam.
before: loss = cross_entropy(logits[mask], labels[mask]): the boolean index runs nonzero (a sync) and an
        index_put backward.
after:  labels with -100 at the padding, loss = cross_entropy(logits.view(-1, V), labels.view(-1),
        ignore_index=-100): no sync, no indexing kernels.
after_graph: after, with the whole step captured in one CUDA graph (added after the held-out run: the tool
        ranked launch_overhead above the sync on every row).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout4_masked_seq_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "cross_entropy(..., ignore_index=-100) on the full tensors instead of boolean-mask indexing"
DESCRIPTION = {
    "before": "token classifier, batch 32 x 256, 20% padding, bf16, loss on logits[mask] (nonzero sync)",
    "after": "same, padding labelled -100 and ignore_index (no sync)",
    "after_graph": "after, the whole step in one CUDA graph (capturable fused Adam)",
}


def make(variant, device):
    cuda = is_cuda(device)
    b, t, d, v = (32, 256, 512, 1000) if cuda else (2, 8, 16, 10)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(v, d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, d), nn.GELU(),
                          nn.Linear(d, v)).to(device)
    graph = variant == "after_graph" and cuda
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True if cuda else None, capturable=graph)
    g = torch.Generator().manual_seed(0)
    toks = [torch.randint(0, v, (b, t), generator=g).to(device) for _ in range(2)]
    labels = [torch.randint(0, v, (b, t), generator=g).to(device) for _ in range(2)]
    masks = [(torch.rand(b, t, generator=g) > 0.2).to(device) for _ in range(2)]
    ignored = [torch.where(m, y, torch.full_like(y, -100)) for m, y in zip(masks, labels)]
    if graph:
        st_tok, st_lab = toks[0].clone(), ignored[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = model(st_tok)
            F.cross_entropy(logits.float().view(-1, v), st_lab.view(-1), ignore_index=-100).backward()
            opt.step()
        return Step(replay_step(capture_graph(body, warmup=3), [(st_tok, toks), (st_lab, ignored)]),
                    info={"tokens": b * t, "cuda_graph": True})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        k = i % 2
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(toks[k])
        if variant == "before":
            loss = F.cross_entropy(logits[masks[k]].float(), labels[k][masks[k]])
        else:
            loss = F.cross_entropy(logits.float().view(-1, v), ignored[k].view(-1), ignore_index=-100)
        loss.backward()
        opt.step()
    return Step(step, info={"tokens": b * t})
