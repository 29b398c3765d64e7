"""holdout19_sync_finite_check: a training step that checks its loss is finite and logs it every step -> on the GPU.

Nineteenth held-out set (written after every estimate got a likely range from our measured fixes,
estimate/likely.py; pre-registered before it was recorded): a guard many training loops carry, read on the
host between the forward and the backward, so the CPU waits for the forward before it can launch the rest.
before: MLP 1024->2048 (3 hidden)->1024, batch 512, bf16 autocast, fused AdamW, MSE; per step
        `if not torch.isfinite(loss).item(): skip` before backward, and `loss.item()` appended to a log after
        the optimizer.
after:  the same step with the loss accumulated in a GPU tensor and a non-finite count kept on the GPU
        (torch.where zeroes a non-finite loss), both read once every 50 steps.
after_graph (added after the first recording, committed before it was recorded: the tool ranked
        launch_overhead, with the syncs as its prerequisite, above the sync fix, which measured 0.89-1.01x):
        "after"'s step captured in one CUDA graph (capturable fused AdamW), the reads every 50 steps outside it.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, mlp, replay_step

NAME = "holdout19_sync_finite_check"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "keep the finite check and the loss log on the GPU; read them once every 50 steps"
DESCRIPTION = {
    "before": ("training: MLP 1024->2048 (3 hidden)->1024, batch 512, bf16, fused AdamW; isfinite(loss).item() "
               "before backward and loss.item() after the optimizer, every step"),
    "after": "same step; loss and non-finite count accumulated on the GPU, read once every 50 steps",
    "after_graph": "after's step in one CUDA graph, the reads every 50 steps outside it",
}
EVERY = 50


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, dout = (512, 1024, 2048, 1024) if cuda else (8, 16, 32, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, dout).to(device)
    graph = variant == "after_graph" and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None,
                            **({"capturable": True} if graph else {}))
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randn(batch, dout, device=device) for _ in range(pool)]
    acc = torch.zeros(2, device=device)
    st = {"i": 0, "log": [], "skipped": 0}
    if graph:
        sx, sy = xs[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(sx)
            loss = F.mse_loss(out.float(), sy)
            ok = torch.isfinite(loss)
            loss = torch.where(ok, loss, torch.zeros_like(loss))
            loss.backward()
            opt.step()
            with torch.no_grad():
                acc[0] += loss.detach()
                acc[1] += (~ok).float()

        def read(i):
            if i % EVERY == 0:
                st["log"].append(acc.tolist())
                acc.zero_()
                if len(st["log"]) > 500:
                    st["log"].clear()
        g = capture_graph(body, warmup=3, before_capture=acc.zero_)
        return Step(replay_step(g, [(sx, xs), (sy, ys)], after=read), info={"cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % pool])
        loss = F.mse_loss(out.float(), ys[i % pool])
        if variant == "before":
            if not torch.isfinite(loss).item():
                st["skipped"] += 1
                return
            loss.backward()
            opt.step()
            st["log"].append(loss.item())
        else:
            ok = torch.isfinite(loss)
            loss = torch.where(ok, loss, torch.zeros_like(loss))
            loss.backward()
            opt.step()
            with torch.no_grad():
                acc[0] += loss.detach()
                acc[1] += (~ok).float()
            if i % EVERY == 0:
                st["log"].append(acc.tolist())
                acc.zero_()
        if len(st["log"]) > 500:
            st["log"].clear()
    return Step(step, info={"sync": variant == "before"})
