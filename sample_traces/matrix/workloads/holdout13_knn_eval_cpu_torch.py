"""holdout13_knn_eval_cpu_torch: an eval loop that scores with torch ops on CPU tensors -> on the GPU.

Thirteenth held-out set: the host work that reads a copied result is torch on the CPU this time (recorded
ops, not bare numpy): a k-NN accuracy of each batch's embeddings against a 2,048-key bank, with
torch.cdist and topk on CPU tensors, the way metric code often runs on .cpu() outputs.
before: MLP 512->1024 (3 hidden)->128 (bf16, no_grad), batch 2048; per batch emb.float().cpu() (1 MB),
        torch.cdist against the CPU key bank, topk(5, largest=False), a majority vote and a hit count on
        the CPU.
after:  the same on the GPU (cdist, topk, vote), hits accumulated in a GPU tensor; one .item() per 64
        batches.
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout13_knn_eval_cpu_torch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "cdist, topk and the vote on the GPU; hits accumulated as a tensor, one .item() per 64 batches"
DESCRIPTION = {
    "before": ("eval: MLP 512->1024 (3 hidden)->128, batch 2048, bf16, no_grad; per batch 1 MB of embeddings to the "
               "CPU, torch.cdist against a 2048-key CPU bank, topk(5), vote, hit count on the CPU"),
    "after": "same encoder; cdist, topk, vote and hit count on the GPU, one .item() per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim, dout, batch, keys, classes = (512, 1024, 128, 2048, 2048, 10) if cuda else (16, 32, 8, 16, 32, 3)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, dout).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    bank = torch.randn(keys, dout, device=device)
    bank_y = torch.randint(0, classes, (keys,), device=device)
    bank_cpu, bank_y_cpu, ys_cpu = bank.cpu(), bank_y.cpu(), [y.cpu() for y in ys]
    st = {"i": 0, "hits": 0}
    hits = torch.zeros((), dtype=torch.long, device=device)

    def embed(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    def score(e, bk, bky, y):
        idx = torch.cdist(e, bk).topk(5, dim=1, largest=False).indices
        vote = torch.mode(bky[idx], dim=1).values
        return (vote == y).sum()

    def before():
        i = st["i"] = st["i"] + 1
        e = embed(i).cpu()                                            # 1 MB, blocking, every batch
        st["hits"] += int(score(e, bank_cpu, bank_y_cpu, ys_cpu[i % pool]))

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            hits.add_(score(embed(i), bank, bank_y, ys[i % pool]))
        if i % EPOCH == 0:
            st["hits"] += int(hits.item())
            hits.zero_()
    return Step(before if variant == "before" else after, info={"batch": batch, "keys": keys})
