"""holdout14_retrieval_mm_cpu_torch: a retrieval eval that searches with torch ops on CPU tensors -> on the GPU.

Fourteenth held-out set (written after the reading of a copied result by torch ops on CPU tensors was
priced as those ops' kernel launches once on the GPU, reads.replacement_launches): single-kernel ops this
time (normalize, a matmul, argmax, a hit count), and host work long enough for the warm rule.
before: MLP 768->1024 (3 hidden)->256 encoder (bf16, no_grad), batch 2048; per batch the embeddings go
        to the CPU (2 MB), F.normalize, a matmul against a 4,096-key CPU bank, argmax and a hit count,
        read with int() every batch.
after:  the same on the GPU, hits accumulated in a GPU tensor; one .item() per 64 batches.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout14_retrieval_mm_cpu_torch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "normalize, the bank matmul, argmax and the hit count on the GPU; one .item() per 64 batches"
DESCRIPTION = {
    "before": ("eval: MLP 768->1024 (3 hidden)->256, batch 2048, bf16, no_grad; per batch 2 MB of embeddings to "
               "the CPU, F.normalize, matmul with a 4096-key CPU bank, argmax, hit count, with torch on CPU tensors"),
    "after": "same encoder; the search and the hit count on the GPU, one .item() per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim, dout, batch, keys = (768, 1024, 256, 2048, 4096) if cuda else (16, 32, 8, 16, 32)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, dout).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, keys, (batch,), device=device) for _ in range(pool)]
    bank = F.normalize(torch.randn(keys, dout, device=device), dim=1)
    bank_cpu, ys_cpu = bank.cpu(), [y.cpu() for y in ys]
    st = {"i": 0, "hits": 0}
    hits = torch.zeros((), dtype=torch.long, device=device)

    def embed(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    def search(q, bk, y):
        best = (F.normalize(q, dim=1) @ bk.T).argmax(dim=1)
        return (best == y).sum()

    def before():
        i = st["i"] = st["i"] + 1
        q = embed(i).cpu()                                            # 2 MB, blocking, every batch
        st["hits"] += int(search(q, bank_cpu, ys_cpu[i % pool]))

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            hits.add_(search(embed(i), bank, ys[i % pool]))
        if i % EPOCH == 0:
            st["hits"] += int(hits.item())
            hits.zero_()
    return Step(before if variant == "before" else after, info={"batch": batch, "keys": keys})
