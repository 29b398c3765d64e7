"""sync_mask_loss: the existing sample workload ``workloads/sync_mask_loss.py``, reused unchanged.

See sample_traces/workloads/sync_mask_loss.py for what before/after do.
"""

import torch

from workloads import sync_mask_loss as base

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "sync_mask_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = tuple(base.VARIANTS) + ("after_graph",)
DESCRIPTION = dict(base.DESCRIPTION, after_graph="after, the whole step captured in one CUDA graph (capturable fused Adam)")
FIX = base.FIX
SOURCE = "sample_traces/workloads/sync_mask_loss.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    if variant == "after_graph" and is_cuda(device):
        return graphed(device)
    return base.make("after" if variant == "after_graph" else variant, device)


def graphed(device, pool=4):
    sz = base._sizes(device)
    torch.manual_seed(0)
    net = base.Net(sz["din"], sz["dim"], sz["classes"]).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=True, capturable=True)
    xs = [torch.randn(sz["rows"], sz["din"], device=device) for _ in range(pool)]
    ys = []
    for _ in range(pool):
        y = torch.randint(0, sz["classes"], (sz["rows"],), device=device)
        y[torch.rand(sz["rows"], device=device) < 0.15] = -1
        ys.append(y)
    sx, sy = xs[0].clone(), ys[0].clone()
    stats = {}

    def body():
        opt.zero_grad(set_to_none=False)
        # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = base.loss_after(net, sx, sy, stats)
        loss.backward()
        opt.step()

    step = replay_step(capture_graph(body, warmup=3), [(sx, xs), (sy, ys)])
    return Step(step, info={"sizes": sz, "amp": "bf16", "cuda_graph": True})
