"""nonzero_unique_sync: torch.nonzero / torch.unique inside a training step's loss.

before: the loss selects labelled tokens with ``valid.nonzero()`` + indexing and builds
        inverse-frequency class weights from ``torch.unique(..., return_counts=True)``: both
        have data-dependent output sizes, so each waits for the GPU (cudaStreamSynchronize).
after:  fixed-size equivalents: counts with ``scatter_add_`` into a [classes] buffer (note:
        torch.bincount on CUDA also syncs, it reads max() to size its output, even with
        minlength), masking by multiplication.  Same loss value.
after_graph: after, with the whole step in one CUDA graph (Adam(fused=True, capturable=True)): the
        plan "remove the syncs, then a graph", measured.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "nonzero_unique_sync"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "fixed-size ops: scatter_add_ counts into a [classes] buffer, mask by multiplication (no nonzero/unique)"
DESCRIPTION = {
    "before": ("token classifier: Embedding(8192,512) + 2x[Linear(512)+GELU] + Linear(512,1024), 8192 tokens, bf16 "
               "autocast, fused Adam; loss uses valid.nonzero(), indexing and torch.unique(return_counts=True)"),
    "after": "same model and loss value via scatter_add_ class counts and a float mask (no syncs)",
    "after_graph": "after, the whole step captured in one CUDA graph (capturable fused Adam)",
}


class Net(nn.Module):
    def __init__(self, vocab, d, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.body = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d), nn.GELU())
        self.head = nn.Linear(d, classes)

    def forward(self, t):
        return self.head(self.body(self.emb(t)))


def loss_before(logits, labels):
    valid = labels >= 0
    idx = valid.nonzero(as_tuple=True)[0]                          # sync
    sel, y = logits[idx].float(), labels[idx]
    cls, counts = torch.unique(y, return_counts=True)              # sync
    w = torch.zeros(logits.shape[1], device=logits.device)
    w[cls] = 1.0 / counts.float()
    return F.cross_entropy(sel, y, weight=w)


def loss_after(logits, labels):
    valid = labels >= 0
    m = valid.float()
    y = torch.where(valid, labels, torch.zeros_like(labels))
    counts = torch.zeros(logits.shape[1], device=logits.device).scatter_add_(0, y, m)
    w = torch.where(counts > 0, 1.0 / counts.clamp_min(1.0), torch.zeros_like(counts))
    wy = w[y] * m
    per = F.cross_entropy(logits.float(), y, reduction="none")
    return (per * wy).sum() / wy.sum()


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    vocab, d, classes, tokens = (8192, 512, 1024, 8192) if cuda else (256, 32, 20, 64)
    torch.manual_seed(0)
    net = Net(vocab, d, classes).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=True if cuda else None)
    ts = [torch.randint(0, vocab, (tokens,), device=device) for _ in range(pool)]
    ys = []
    for _ in range(pool):
        y = torch.randint(0, classes, (tokens,), device=device)
        y[torch.rand(tokens, device=device) < 0.2] = -1
        ys.append(y)
    loss_fn = loss_before if variant == "before" else loss_after
    st = {"i": 0}
    if variant == "after_graph" and cuda:
        opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=True, capturable=True)
        sx, sy = ts[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = net(sx)
            loss_after(logits, sy).backward()
            opt.step()

        graph_step = replay_step(capture_graph(body, warmup=3), [(sx, ts), (sy, ys)])
        return Step(graph_step, info={"tokens": tokens, "classes": classes, "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = net(ts[i % pool])
        loss = loss_fn(logits, ys[i % pool])
        loss.backward()
        opt.step()
    return Step(step, info={"tokens": tokens, "classes": classes})


def check_equal():
    torch.manual_seed(0)
    logits = torch.randn(64, 20)
    y = torch.randint(0, 20, (64,))
    y[torch.rand(64) < 0.2] = -1
    return float(loss_before(logits, y)), float(loss_after(logits, y))
