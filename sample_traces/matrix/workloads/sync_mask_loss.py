"""sync_mask_loss: the existing sample workload ``workloads/sync_mask_loss.py``, reused unchanged.

See sample_traces/workloads/sync_mask_loss.py for what before/after do.
after_graph: after, the whole step captured in one CUDA graph.
after_compile: after, the model and the loss under torch.compile(mode="default") (added 2026-11-26,
        h*_clean5: on some H100 hosts the tool ranks fusion_candidates first once the syncs are gone, and
        the compiler's fusion had never been measured).
"""

import torch

from workloads import sync_mask_loss as base

from ._util import Step, capture_graph, cpu_mode, is_cuda, replay_step

NAME = "sync_mask_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = tuple(base.VARIANTS) + ("after_graph", "after_compile")
DESCRIPTION = dict(base.DESCRIPTION, after_graph="after, the whole step captured in one CUDA graph (capturable fused Adam)",
                   after_compile='after, model and loss under torch.compile(mode="default")')
FIX = base.FIX
SOURCE = "sample_traces/workloads/sync_mask_loss.py"
WARMUP_STEPS = getattr(base, "WARMUP_STEPS", 5)


def make(variant, device):
    if variant == "after_graph" and is_cuda(device):
        return graphed(device)
    if variant == "after_compile" and is_cuda(device) and not cpu_mode():
        return compiled(device)
    return base.make("after" if variant in ("after_graph", "after_compile") else variant, device)


def _setup(device, pool, **adam):
    """The model, fused Adam, and a pool of batches (15% unlabelled rows), as base.make builds them."""
    sz = base._sizes(device)
    torch.manual_seed(0)
    net = base.Net(sz["din"], sz["dim"], sz["classes"]).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=True, **adam)
    xs = [torch.randn(sz["rows"], sz["din"], device=device) for _ in range(pool)]
    ys = []
    for _ in range(pool):
        y = torch.randint(0, sz["classes"], (sz["rows"],), device=device)
        y[torch.rand(sz["rows"], device=device) < 0.15] = -1
        ys.append(y)
    return sz, net, opt, xs, ys


def compiled(device, pool=4):
    sz, net, opt, xs, ys = _setup(device, pool)
    torch._dynamo.reset()

    def fwd(x, y):
        stats = {}
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = base.loss_after(net, x, y, stats)
        return loss, stats["act_mean"], stats["n_valid"], stats["coverage"]
    fn = torch.compile(fwd, mode="default")
    st = {"i": 0}
    kept = {}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss, *logged = fn(xs[i % pool], ys[i % pool])
        kept["logged"] = logged                  # stays on the GPU, as in "after"
        loss.backward()
        opt.step()

    def close():
        torch._dynamo.reset()
    return Step(step, close=close, info={"sizes": sz, "amp": "bf16", "compiled": True})


def graphed(device, pool=4):
    sz, net, opt, xs, ys = _setup(device, pool, capturable=True)
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
