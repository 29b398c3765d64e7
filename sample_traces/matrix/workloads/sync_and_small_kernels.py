"""sync_and_small_kernels: a launch-bound training step that also syncs every step.

before:       6x Linear(256)+ReLU MLP, batch 32, SGD(momentum); each step logs the accuracy with
              ``.item()`` and counts confident rows with ``nonzero()`` (two device syncs).
after_nosync: the same statistics kept as GPU tensors (no syncs) - still launch-bound.
after_graph:  after_nosync, with the whole step (fwd+bwd+SGD+stats) captured in one CUDA graph.

Expected: launch_overhead is the top finding; the syncs must be named as a prerequisite
(a step with .item()/nonzero cannot be captured in a CUDA graph).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "sync_and_small_kernels"
EXPECTED_KIND = "launch_overhead"
EXPECTED_ALSO = ["sync_stall (prerequisite: remove syncs before CUDA-graph capture)"]
ROLE = "pair"
VARIANTS = ("before", "after_nosync", "after_graph")
FIX = "remove the per-step .item()/nonzero syncs (keep stats on the GPU), then capture the step in a CUDA graph"
DESCRIPTION = {
    "before": "6x Linear(256,256)+ReLU MLP, batch 32, fp32, SGD(momentum); per step .item() accuracy + nonzero() count",
    "after_nosync": "same step, statistics kept as GPU tensors (no .item(), sum() instead of nonzero())",
    "after_graph": "after_nosync with the whole step captured in one CUDA graph (static input/target)",
}


def make(variant, device, pool=8):
    cuda = is_cuda(device)
    hidden, batch = 256, 32
    torch.manual_seed(0)
    mods = []
    for _ in range(6):
        mods += [nn.Linear(hidden, hidden), nn.ReLU()]
    model = nn.Sequential(*mods, nn.Linear(hidden, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.randn(batch, hidden, device=device) for _ in range(pool)]
    ys = [torch.randint(0, 10, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0}
    stats = {}

    def body(x, y, sync):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        conf = logits.detach().softmax(-1).amax(-1) > 0.2
        acc = (logits.detach().argmax(-1) == y).float().mean()
        if sync:
            stats["n_conf"] = conf.nonzero().shape[0]     # sync
            stats["acc"] = acc.item()                     # sync
        else:
            stats["n_conf"] = conf.sum()
            stats["acc"] = acc
        loss.backward()
        opt.step()
        return loss

    if variant != "after_graph" or not cuda:
        sync = variant == "before"

        def step():
            i = st["i"] = st["i"] + 1
            body(xs[i % pool], ys[i % pool], sync)
        return Step(step, info={"batch": batch, "syncs_per_step": 2 if sync else 0, "cuda_graph": False})

    sx, sy = xs[0].clone(), ys[0].clone()

    def graph_body():
        body(sx, sy, False)

    g = capture_graph(graph_body, warmup=3, before_capture=lambda: opt.zero_grad(set_to_none=True))
    return Step(replay_step(g, [(sx, xs), (sy, ys)]), info={"batch": batch, "syncs_per_step": 0, "cuda_graph": True})
