"""holdout20_fp32_two_tower: an fp32 two-tower retrieval model trained with full-fp32 matmuls -> TF32.

Twentieth held-out set (written after the likely range was refitted on every clean set with its coverage
cross-validated by program; pre-registered before it was recorded): a third fp32 program, unlike the MLP
and the transformer encoder before it, with an in-batch similarity matmul (queries x documents) and a
softmax over it.
before: query and document towers, each MLP 1024 -> 2048 -> 2048 -> 512 (ReLU), batch 2048 pairs, fp32
        model and data, logits = q @ d.T / 0.05 (2048 x 2048), cross-entropy over in-batch negatives,
        Adam (foreach); set_float32_matmul_precision("highest") (allow_tf32=False).
after:  set_float32_matmul_precision("high") (TF32 tensor cores); model and data stay fp32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, is_cuda

NAME = "holdout20_fp32_two_tower"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.set_float32_matmul_precision("high") (TF32 tensor cores); model and data remain fp32'
DESCRIPTION = {
    "before": ("two fp32 towers MLP 1024->2048->2048->512, batch 2048, in-batch softmax over q @ d.T, Adam, "
               'set_float32_matmul_precision("highest")'),
    "after": 'same, set_float32_matmul_precision("high") (TF32)',
}


def _tower(din, dim, dout):
    return nn.Sequential(nn.Linear(din, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dout))


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim, dout, batch = (1024, 2048, 512, 2048) if cuda else (32, 64, 16, 8)
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
    torch.manual_seed(0)
    query, doc = _tower(din, dim, dout).to(device), _tower(din, dim, dout).to(device)
    opt = torch.optim.Adam(list(query.parameters()) + list(doc.parameters()), lr=1e-4)
    qs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ds = [torch.randn(batch, din, device=device) for _ in range(pool)]
    target = torch.arange(batch, device=device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        q = F.normalize(query(qs[i % pool]), dim=-1)
        d = F.normalize(doc(ds[i % pool]), dim=-1)
        F.cross_entropy(q @ d.T / 0.05, target).backward()
        opt.step()

    def close():
        torch.set_float32_matmul_precision(prev)
    return Step(step, close=close, info={"matmul_precision": torch.get_float32_matmul_precision(), "batch": batch})
