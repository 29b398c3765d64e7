"""item_logging: ``loss.item()`` logged every step of a launch-bound training loop.

before: each step formats ``f"step {i} loss {loss.item():.4f}"`` into the log (a device sync
        per step: the host cannot queue the next step while the GPU finishes this one).
after:  the loss is accumulated on the GPU and logged (one .item()) every 50 steps.
after_graph: after, with the training step (and the accumulation) captured in one CUDA graph
        (AdamW(fused=True, capturable=True)): the plan "remove the sync, then a graph", measured.
after_graph_only: before's per-step log line kept (loss.item() after each replay), the training step in one
        CUDA graph (added 2026-11-26 18:00Z, before it was recorded: the .item() comes after the step's last
        launch, so the tool no longer calls it what the graph needs first; this measures the graph alone).
after_compile (item_logging_large only): before, with the model in torch.compile (default mode) and the
        per-step .item() kept: the fusion fix alone, measured (the tool ranked fusion_candidates first on
        the large variant's H100 trace; committed before it is recorded).
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, cpu_mode, is_cuda, mlp, replay_step

NAME = "item_logging"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph", "after_graph_only")
FIX = "accumulate the loss on the GPU; call .item() / log every 50 steps"
DESCRIPTION = {
    "before": ("MLP 512->512 (4 hidden, LayerNorm)->10, batch 64, bf16 autocast, fused AdamW; "
               "log line with loss.item() every step"),
    "after": "same; loss summed on the GPU, one .item() + log line every 50 steps",
    "after_graph": "after, with the step and the loss accumulation in one CUDA graph (capturable fused AdamW)",
    "after_graph_only": "before's per-step loss.item() log line kept, the training step in one CUDA graph",
    "after_compile": "before (log line with loss.item() every step), the model in torch.compile (default mode)",
}
LOG_EVERY = 50


def make(variant, device, pool=8, d=512, batch=64):
    cuda = is_cuda(device)
    if not cuda:
        d, batch = 32, 8
    torch.manual_seed(0)
    model = mlp(d, d, 4, 10, norm=True).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, d, device=device) for _ in range(pool)]
    ys = [torch.randint(0, 10, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0, "log": []}
    acc = torch.zeros((), device=device)
    every = variant in ("before", "after_compile", "after_graph_only")   # (a graph only on a GPU)
    if variant in ("after_graph", "after_graph_only") and cuda:
        return graphed(model, xs, ys, acc, st, device, pool, every_step=variant == "after_graph_only")
    compiled = variant == "after_compile" and not cpu_mode()
    fn = model
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model)

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = fn(xs[i % pool])
        loss = F.cross_entropy(logits.float(), ys[i % pool])
        loss.backward()
        opt.step()
        if every:
            st["log"].append(f"step {i} loss {loss.item():.4f}")
        else:
            acc.add_(loss.detach())
            if i % LOG_EVERY == 0:
                st["log"].append(f"step {i} mean loss {(acc / LOG_EVERY).item():.4f}")
                acc.zero_()
        if len(st["log"]) > 1000:
            st["log"].clear()
    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "log_every": 1 if every else LOG_EVERY, "compiled": compiled})


def graphed(model, xs, ys, acc, st, device, pool, every_step=False):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True, capturable=True)
    sx, sy = xs[0].clone(), ys[0].clone()

    def body():
        opt.zero_grad(set_to_none=False)
        # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            logits = model(sx)
        loss = F.cross_entropy(logits.float(), sy)
        loss.backward()
        opt.step()
        last.copy_(loss.detach())
        acc.add_(loss.detach())

    last = torch.zeros((), device=device)
    g = capture_graph(body, warmup=3)
    acc.zero_()

    def log(i):
        if every_step:
            st["log"].append(f"step {i} loss {last.item():.4f}")
        elif i % LOG_EVERY == 0:
            st["log"].append(f"step {i} mean loss {(acc / LOG_EVERY).item():.4f}")
            acc.zero_()
        if len(st["log"]) > 1000:
            st["log"].clear()
    return Step(replay_step(g, [(sx, xs), (sy, ys)], after=log), info={"batch": len(sx), "log_every": LOG_EVERY, "cuda_graph": True})
