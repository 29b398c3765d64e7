"""holdout22_sync_step_timer: a training loop that times each step with torch.cuda.synchronize() and logs.

Twenty-second held-out set: a pattern users bring that no earlier pair had, an explicit device-wide
synchronize (not .item(), not a copy) at the end of every step, for a wall-clock step timer, followed by
Python bookkeeping of the timings (a rolling window's quantiles and a JSON log line). The sync drains the GPU's
queue, so that bookkeeping and the next step's first launches run while the GPU idles; without it they
overlap the GPU's work. 8 residual MLP blocks [LayerNorm(2048), Linear(2048, 2048), GELU], batch 4096,
bf16 autocast, fused AdamW.
before: step, torch.cuda.synchronize(), then the timer's bookkeeping.
after:  the same step and the same bookkeeping, no synchronize (the timer measures dispatch, not the GPU; a
        user would read CUDA events a step late or sync every N steps).
after_graph (added once the set was read, 2026-11-29: the tool ranked launch_overhead first, after the sync,
        which nobody had measured): no synchronize, the step in one CUDA graph (capturable fused AdamW), the
        same bookkeeping.
"""

import io
import json
import statistics
import time

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda

NAME = "holdout22_sync_step_timer"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "drop the per-step torch.cuda.synchronize() (time with CUDA events read a step late, or sync every N steps)"
DESCRIPTION = {
    "before": ("8 residual blocks (LayerNorm(2048), Linear(2048, 2048), GELU), batch 4096, bf16 autocast, fused "
               "AdamW; torch.cuda.synchronize() after each step, then a step timer's bookkeeping in Python "
               "(quantiles of the last 512 step times, a JSON log line)"),
    "after": "same step and bookkeeping, no torch.cuda.synchronize()",
    "after_graph": "no torch.cuda.synchronize(), the step in one CUDA graph (capturable fused AdamW), same bookkeeping",
}


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.lin = nn.LayerNorm(d), nn.Linear(d, d)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.lin(self.norm(x)))


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, nblocks = (2048, 4096, 8) if cuda else (32, 8, 2)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d) for _ in range(nblocks)]).to(device)
    graph = variant == "after_graph" and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None, capturable=graph)
    xs = [torch.randn(batch, d, device=device) for _ in range(2)]
    sx = xs[0].clone()
    st = {"i": 0, "t": time.perf_counter(), "times": [0.001 * (1 + (k % 7)) for k in range(512)]}
    log = io.StringIO()
    synced = variant == "before"

    def body(x):
        opt.zero_grad(set_to_none=not graph)
        # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
        with autocast(device) if not graph else torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = model(x)
        out.float().pow(2).mean().backward()
        opt.step()
    g = capture_graph(lambda: body(sx), warmup=3) if graph else None

    def step():
        i = st["i"] = st["i"] + 1
        if g is not None:
            sx.copy_(xs[i % 2])
            g.replay()
        else:
            body(xs[i % 2])
        if synced and cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        times = st["times"]
        times.append(now - st["t"])
        del times[0]
        st["t"] = now
        q = statistics.quantiles(times, n=20)
        rec = {"step": i, "step_s": times[-1], "p50": q[9], "p95": q[18], "mean": statistics.fmean(times),
               "stdev": statistics.pstdev(times)}
        log.write(json.dumps(rec) + "\n")
        if log.tell() > 1 << 20:
            log.seek(0)
            log.truncate()

    return Step(step, info={"batch": batch, "width": d, "blocks": nblocks, "synchronize_each_step": synced,
                            "cuda_graph": graph})
