"""holdout54_odd_features_tabular_train: a DLRM-style click model whose MLP takes 429 features (26 categorical fields of
16 dims and 13 dense columns) -> the dense columns padded with three zero columns, 432 features (a multiple of 8).

Fifty-fourth held-out set (registered before it was recorded; see the matrix README). The first layer's input rows and
its weight rows are 429 bf16 values, not 16-byte aligned: its forward and both backward products run on cuBLAS's
narrow-aligned kernels. Model: one embedding table of 26 x 1000 rows of 16, then 429 -> 4096 -> 512 -> 1 (ReLU);
bf16 autocast, fused Adam, BCE with logits; batch 32768 rows already on the GPU (four batches in turn).
"""

import torch
import torch.nn.functional as F

from ._gemm_dims import Tabular
from ._util import Step, autocast, is_cuda

NAME = "holdout54_odd_features_tabular_train"
EXPECTED_KIND = "misaligned_gemm"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the 13 dense columns padded with three zero columns (429 -> 432 features into the first layer; nothing else)"
SIZE = {"batch": 32768, "fields": 26, "rows": 1000, "emb": 16, "dense": 13, "hidden": 4096, "mid": 512}
DESCRIPTION = {
    "before": ("DLRM-style click model: 26 fields x 16 dims + 13 dense = 429 features -> 4096 -> 512 -> 1, "
               "batch 32768, bf16 autocast, fused Adam"),
    "after": "same, the dense columns padded to 16 (432 features)",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 64, "rows": 10, "hidden": 32, "mid": 16}
    torch.manual_seed(0)
    dense_in = s["dense"] if variant == "before" else s["dense"] + 3
    model = Tabular(s["fields"], s["rows"], s["emb"], dense_in, s["hidden"], s["mid"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    pool = []
    for _ in range(4):
        cats = torch.randint(0, s["rows"], (s["batch"], s["fields"]), generator=g)
        dense = torch.randn(s["batch"], s["dense"], generator=g)
        if dense_in > s["dense"]:
            dense = F.pad(dense, (0, dense_in - s["dense"]))
        label = torch.randint(0, 2, (s["batch"],), generator=g).float()
        pool.append((cats.to(device), dense.to(device), label.to(device)))
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        cats, dense, label = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logit = model(cats, dense)
        F.binary_cross_entropy_with_logits(logit.float(), label).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "features": s["fields"] * s["emb"] + dense_in, "amp": "bf16"})
