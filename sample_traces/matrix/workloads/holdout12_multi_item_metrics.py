"""holdout12_multi_item_metrics: four .item() metric reads per training step -> read every 50 steps.

Twelfth held-out set: the pattern of a training loop that logs loss, accuracy, gradient norm and the
learning-rate-scaled update norm each step with .item() (tqdm postfix style), each read a sync that
drains the queue, in a mid-size step (a 6-layer bf16 MLP 2048 wide, batch 256, fused AdamW).
before: four .item() per step, spread through the step (after the loss, after backward, after
        clip_grad_norm_, after the optimizer step).
after:  the four metrics are stacked into a GPU buffer each step; one .cpu() of the buffer per 50 steps.
after_graph: added after recording (the tool's top finding was launch_overhead, which the set did not
        measure): the after step, its metrics written at a GPU-side position, captured in one CUDA graph
        (fused AdamW capturable); the .cpu() of the buffer every 50 steps stays outside the graph.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, mlp, replay_step

NAME = "holdout12_multi_item_metrics"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "stack the four metrics into a GPU buffer each step; one .cpu() of the buffer every 50 steps"
DESCRIPTION = {
    "before": ("MLP 2048 wide, 6 hidden, 1000 classes, batch 256, bf16 autocast, fused AdamW, clip_grad_norm_; "
               "loss, accuracy, grad norm and update norm read with .item() every step"),
    "after": "same step; the four metrics kept in a GPU buffer, read with one .cpu() every 50 steps",
    "after_graph": "the after step captured in one CUDA graph (capturable fused AdamW); the buffer read outside it",
}
EVERY = 50


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, classes = (256, 1024, 2048, 1000) if cuda else (8, 16, 32, 10)
    torch.manual_seed(0)
    model = mlp(din, dim, 6, classes).to(device)
    params = list(model.parameters())
    graphed = variant == "after_graph" and cuda
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True if cuda else None, capturable=graphed)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0, "log": []}
    buf = torch.zeros(EVERY, 4, device=device)
    last = params[-2]

    def step():
        i = st["i"] = st["i"] + 1
        x, y = xs[i % pool], ys[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        acc = (logits.argmax(1) == y).float().mean()
        if variant == "before":
            st["log"].append(loss.item())
            st["log"].append(acc.item())
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        if variant == "before":
            st["log"].append(gnorm.item())
        w0 = last.detach().clone()
        opt.step()
        upd = (last.detach() - w0).norm()
        if variant == "before":
            st["log"].append(upd.item())
        else:
            buf[i % EVERY] = torch.stack([loss.detach(), acc, gnorm, upd])
            if i % EVERY == 0:
                st["log"].append(buf.cpu())
        if len(st["log"]) > 400:
            st["log"].clear()
    if not graphed:
        return Step(step, info={"batch": batch, "reads_per_step": 4 if variant == "before" else 1 / EVERY})
    sx, sy = xs[0].clone(), ys[0].clone()
    pos = torch.zeros((), dtype=torch.long, device=device)

    def graph_body():
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(sx)
        loss = F.cross_entropy(logits.float(), sy)
        acc = (logits.argmax(1) == sy).float().mean()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        w0 = last.detach().clone()
        opt.step()
        upd = (last.detach() - w0).norm()
        buf.index_copy_(0, pos.view(1), torch.stack([loss.detach(), acc, gnorm, upd]).view(1, 4))
        pos.add_(1).remainder_(EVERY)

    g = capture_graph(graph_body, warmup=3, before_capture=lambda: opt.zero_grad(set_to_none=True))

    def read(i):
        if i % EVERY == 0:
            st["log"].append(buf.cpu())
        if len(st["log"]) > 400:
            st["log"].clear()
    return Step(replay_step(g, [(sx, xs), (sy, ys)], after=read),
                info={"batch": batch, "reads_per_step": 1 / EVERY, "cuda_graph": True})
