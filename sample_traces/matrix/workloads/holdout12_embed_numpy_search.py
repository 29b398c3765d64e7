"""holdout12_embed_numpy_search: a retrieval eval loop that searches its embeddings in numpy -> on the GPU.

Twelfth held-out set (written after a blocking copy to pageable memory kept its staging tail in the
replay and host work on a copied result went with the sync's fix): a different consumer again, a
nearest-neighbour search of each query embedding against a bank of 4,096 keys, in numpy.
before: an MLP encoder 768->1024 (3 hidden)->256 (bf16, no_grad) embeds 4,096 queries per batch;
        per batch q.float().cpu().numpy() (4 MB), L2-normalised in numpy, a 4096 x 4096 similarity
        matmul against the (numpy) key bank and an argmax per row, scored against the labels in numpy.
after:  normalisation, the similarity matmul (bf16), argmax and the hit count on the GPU, accumulated in a
        GPU tensor; one .item() per 64 batches (the end of the eval pass).
"""

import numpy as np
import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout12_embed_numpy_search"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "normalise, search (similarity matmul + argmax) and count hits on the GPU; one .item() per 64 batches"
DESCRIPTION = {
    "before": ("retrieval eval: MLP 768->1024 (3 hidden)->256, 4096 queries per batch, bf16, no_grad; per batch "
               "4 MB of embeddings to numpy, normalise, 4096x4096 similarity against a numpy key bank, argmax"),
    "after": "same encoder; normalise, similarity, argmax and hit count on the GPU, one .item() per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim, dout, batch, keys = (768, 1024, 256, 4096, 4096) if cuda else (16, 32, 8, 16, 32)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, dout).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, keys, (batch,), device=device) for _ in range(pool)]
    ys_np = [y.cpu().numpy() for y in ys]
    bank = F.normalize(torch.randn(keys, dout, device=device), dim=1)
    bank_np = bank.cpu().numpy()
    st = {"i": 0, "hits": 0, "seen": 0}
    hits = torch.zeros((), dtype=torch.long, device=device)

    def embed(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool])

    def before():
        i = st["i"] = st["i"] + 1
        q = embed(i).float().cpu().numpy()                             # 4 MB, blocking, every batch
        q /= np.linalg.norm(q, axis=1, keepdims=True) + 1e-6
        best = (q @ bank_np.T).argmax(axis=1)
        st["hits"] += int((best == ys_np[i % pool]).sum())
        st["seen"] += len(q)

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad(), autocast(device):
            q = F.normalize(embed(i).float(), dim=1)
            best = (q @ bank.T).argmax(dim=1)
            hits.add_((best == ys[i % pool]).sum())
        if i % EPOCH == 0:                                             # end of the eval pass
            st["hits"] += int(hits.item())
            hits.zero_()
    return Step(before if variant == "before" else after, info={"batch": batch, "keys": keys})
