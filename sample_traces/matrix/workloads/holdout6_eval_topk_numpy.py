"""holdout6_eval_topk_numpy: an eval loop that copies logits to numpy for top-5 accuracy every batch.

Sixth held-out set (written after the sync fix learned that a result kept on the GPU is not read by
numpy either): another eval loop, a different model, size and numpy consumer than eval_to_numpy.

before: MLP 512->1024 (4 hidden)->1000 classes, batch 2048, bf16 autocast, no_grad; per batch
        logits.float().cpu().numpy() (8 MB), np.argpartition top-5 and a top-5 hit count in numpy.
after:  torch.topk(logits, 5) and the hit count on the GPU, accumulated in a GPU tensor; one .item()
        per 64 batches ("end of the eval pass").
"""

import numpy as np
import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout6_eval_topk_numpy"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "top-5 and the hit count on the GPU (torch.topk), accumulated as a tensor; one .item() per 64 batches"
DESCRIPTION = {
    "before": ("eval: MLP 512->1024 (4 hidden)->1000, batch 2048, bf16, no_grad; per batch 8 MB of logits "
               "to numpy, np.argpartition top-5 and hit count"),
    "after": "same model; torch.topk and the hit count on the GPU, one .item() per 64 batches",
}
EPOCH = 64


def make(variant, device, pool=8):
    cuda = is_cuda(device)
    din, dim, classes, batch = (512, 1024, 1000, 2048) if cuda else (16, 32, 20, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 4, classes).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    ys_np = [y.cpu().numpy() for y in ys]
    st = {"i": 0, "hits": 0, "seen": 0}
    hits = torch.zeros((), dtype=torch.long, device=device)

    def logits(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    def before():
        i = st["i"] = st["i"] + 1
        z = logits(i).cpu().numpy()                                   # 8 MB, blocking, every batch
        top5 = np.argpartition(-z, 5, axis=1)[:, :5]
        st["hits"] += int((top5 == ys_np[i % pool][:, None]).any(axis=1).sum())
        st["seen"] += len(z)

    def after():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            top5 = logits(i).topk(5, dim=1).indices
            hits.add_((top5 == ys[i % pool][:, None]).any(dim=1).sum())
        if i % EPOCH == 0:                                            # end of the eval pass
            st["hits"] += int(hits.item())
            hits.zero_()
    return Step(before if variant == "before" else after, info={"batch": batch, "classes": classes})
