"""holdout19_pageable_feature_upload: precomputed features uploaded from pageable numpy every step -> pinned, non_blocking.

Nineteenth held-out set (written after every estimate got a likely range from our measured fixes,
estimate/likely.py; pre-registered before it was recorded): features computed offline and kept in host
memory as numpy arrays, uploaded batch by batch the plainest way.
before: four (512, 4096) fp32 numpy arrays (8 MB each) in pageable memory; per step
        torch.from_numpy(feats[i]).to(device) (a blocking pageable copy), then a bf16 MLP head
        4096->1024->1024->16, fused AdamW, cross-entropy.
after:  the same arrays copied once into pinned tensors; per step .to(device, non_blocking=True).
after_graph (added after the first recording, committed before it was recorded: the tool ranked
        launch_overhead above the pinning, a fix nobody had measured): "after"'s pinned non_blocking copy into the
        static input of the training step, captured in one CUDA graph (capturable fused AdamW).
"""

import numpy as np
import torch
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, mlp

NAME = "holdout19_pageable_feature_upload"
EXPECTED_KIND = "pageable_memcpy"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "pin the host arrays once (torch.from_numpy(a).pin_memory()) and copy with non_blocking=True"
DESCRIPTION = {
    "before": ("8 MB of fp32 features a step from pageable numpy, torch.from_numpy(...).to(device); bf16 MLP "
               "head 4096->1024->1024->16, fused AdamW"),
    "after": "same features from pinned tensors, .to(device, non_blocking=True)",
    "after_graph": "after's pinned non_blocking copy into a static input, the training step in one CUDA graph",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, classes = (512, 4096, 1024, 16) if cuda else (8, 32, 16, 4)
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((batch, din), dtype=np.float32) for _ in range(pool)]
    labels = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    pinned = variant in ("after", "after_graph") and cuda
    if pinned:
        host = [torch.from_numpy(f).pin_memory() for f in feats]
    else:
        host = [torch.from_numpy(f) for f in feats]
    torch.manual_seed(0)
    model = mlp(din, dim, 1, classes).to(device)
    graph = variant == "after_graph" and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None,
                            **({"capturable": True} if graph else {}))
    st = {"i": 0}
    if graph:
        sx, sl = torch.zeros(batch, din, device=device), labels[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(sx)
            F.cross_entropy(out.float(), sl).backward()
            opt.step()
        g = capture_graph(body, warmup=3)

        def graph_step():
            i = st["i"] = st["i"] + 1
            sx.copy_(host[i % pool], non_blocking=True)
            sl.copy_(labels[i % pool])
            g.replay()
        return Step(graph_step, info={"bytes_per_step": batch * din * 4, "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        x = host[i % pool].to(device, non_blocking=pinned)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), labels[i % pool]).backward()
        opt.step()
    return Step(step, info={"bytes_per_step": batch * din * 4})
