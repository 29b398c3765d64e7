"""holdout14_auc_sort_cpu_torch: an eval loop that computes a ranking AUC with torch ops on CPU tensors -> on the GPU.

Fourteenth held-out set (written after the reading of a copied result by torch ops on CPU tensors was
priced as those ops' kernel launches once on the GPU, reads.replacement_launches): different ops than
the k-NN eval (a sort, cumulative sums and a trapezoid rule), none of them in KERNELS_PER_CALL.
before: MLP 512->1024 (3 hidden)->1 scorer (bf16, no_grad), batch 16384; per batch the scores go to the
        CPU (64 KB), argsort descending, labels gathered in that order, cumsum of positives and negatives,
        torch.trapezoid of the ROC curve; the AUC read with float() every batch.
after:  the same ops on the GPU, AUCs summed in a GPU tensor; one .item() per 64 batches.
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout14_auc_sort_cpu_torch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "argsort, cumsum and trapezoid on the GPU; AUCs summed as a tensor, one .item() per 64 batches"
DESCRIPTION = {
    "before": ("eval: MLP 512->1024 (3 hidden)->1 scorer, batch 16384, bf16, no_grad; per batch scores to the CPU, "
               "argsort, cumsum of positives/negatives and trapezoid AUC with torch ops on CPU tensors"),
    "after": "same scorer; the AUC computed on the GPU, summed as a tensor, one .item() per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim, batch = (512, 1024, 16384) if cuda else (16, 32, 64)
    torch.manual_seed(0)
    model = mlp(din, dim, 3, 1).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [(torch.rand(batch, device=device) < 0.3).float() for _ in range(pool)]
    ys_cpu = [y.cpu() for y in ys]
    st = {"i": 0, "auc": 0.0}
    total = torch.zeros((), device=device)

    def score(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float().squeeze(1)

    def auc(s, y):
        order = torch.argsort(s, descending=True)
        y = y[order]
        tps = torch.cumsum(y, 0)
        fps = torch.cumsum(1.0 - y, 0)
        return torch.trapezoid(tps / tps[-1].clamp_min(1.0), fps / fps[-1].clamp_min(1.0))

    def before():
        i = st["i"] = st["i"] + 1
        s = score(i).cpu()                                            # 64 KB, blocking, every batch
        st["auc"] += float(auc(s, ys_cpu[i % pool]))

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            total.add_(auc(score(i), ys[i % pool]))
        if i % EPOCH == 0:
            st["auc"] += float(total.item())
            total.zero_()
    return Step(before if variant == "before" else after, info={"batch": batch})
