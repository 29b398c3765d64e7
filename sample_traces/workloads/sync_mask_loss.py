"""Host-device sync stalls: data-dependent ops in the loss and a .item() mid-forward.

before: between the two halves of the model a statistic is logged with ``.item()``; the
        loss selects the labelled rows with boolean-mask indexing (``pred[mask]``), counts
        them with ``torch.nonzero`` and counts the classes present with ``torch.unique``.
        Each of these waits for the GPU (cudaStreamSynchronize / D2H cudaMemcpyAsync),
        so the CPU cannot run ahead and the GPU idles while the next ops are launched.
after:  same values computed without syncs: a float mask multiplies the per-row loss
        (torch.where for the ignored labels), class coverage via index_add_, and the
        logged statistics stay on the GPU as tensors.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Step, is_cuda

NAME = "sync_mask_loss"
EXPECTED_KIND = "sync_stall"
WITH_STACK = True
VARIANTS = ("before", "after")
FIX = ("mask by multiplication / torch.where instead of boolean indexing, no nonzero/unique, "
       "keep logged statistics as GPU tensors (no .item() on the hot path)")
DESCRIPTION = {
    "before": ("MLP 2x(3x Linear(2048)+GELU) + 1000-class head, 8192 rows, bf16 autocast, fused Adam; "
               ".item() between the halves; loss uses logits[mask], torch.nonzero, torch.unique"),
    "after": "same model and same loss values, computed with a float mask / torch.where, index_add_, no .item()",
}


class Net(nn.Module):
    def __init__(self, din, dim, classes):
        super().__init__()
        self.inp = nn.Linear(din, dim)
        self.half1 = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(dim, dim), nn.GELU())])
        self.half2 = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(dim, dim), nn.GELU())])
        self.head = nn.Linear(dim, classes)


def loss_before(net, x, labels, stats):
    h = net.half1(net.inp(x))
    stats["act_mean"] = h.float().abs().mean().item()          # logged statistic: sync mid-forward
    logits = net.head(net.half2(h))
    valid = labels >= 0
    stats["n_valid"] = torch.nonzero(valid).shape[0]             # sync
    sel = logits[valid]                                          # boolean-mask indexing: sync
    sel_y = labels[valid]                                        # sync
    present = torch.unique(sel_y)                                # sync
    stats["coverage"] = present.numel() / logits.shape[1]
    ce = F.cross_entropy(sel.float(), sel_y)
    z = sel.float().logsumexp(-1).pow(2).mean()
    return ce + 1e-4 * z


def loss_after(net, x, labels, stats):
    h = net.half1(net.inp(x))
    stats["act_mean"] = h.detach().float().abs().mean()         # stays on the GPU
    logits = net.head(net.half2(h))
    valid = labels >= 0
    w = valid.float()
    n_valid = w.sum()
    stats["n_valid"] = n_valid.detach()
    safe = torch.where(valid, labels, torch.zeros_like(labels))
    counts = torch.zeros(logits.shape[1], device=logits.device).index_add_(0, safe, w)
    stats["coverage"] = (counts > 0).float().mean()
    lf = logits.float()
    ce = (F.cross_entropy(lf, safe, reduction="none") * w).sum() / n_valid
    z = (lf.logsumexp(-1).pow(2) * w).sum() / n_valid
    return ce + 1e-4 * z


def _sizes(device):
    if is_cuda(device):
        return dict(rows=8192, din=1024, dim=2048, classes=1000)
    return dict(rows=64, din=32, dim=64, classes=20)


def make(variant, device, pool=4):
    sz = _sizes(device)
    torch.manual_seed(0)
    net = Net(sz["din"], sz["dim"], sz["classes"]).to(device)
    fused = is_cuda(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=fused or None)
    xs = [torch.randn(sz["rows"], sz["din"], device=device) for _ in range(pool)]
    ys = []
    for _ in range(pool):
        y = torch.randint(0, sz["classes"], (sz["rows"],), device=device)
        y[torch.rand(sz["rows"], device=device) < 0.15] = -1        # ~15% unlabelled rows
        ys.append(y)
    loss_fn = loss_before if variant == "before" else loss_after
    amp_dtype = torch.bfloat16
    state = {"i": 0}
    stats = {}

    def step():
        i = state["i"] = state["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=amp_dtype):
            loss = loss_fn(net, xs[i % pool], ys[i % pool], stats)
        loss.backward()
        opt.step()
        return loss

    return Step(step, info={"sizes": sz, "amp": "bf16", "optimizer": "Adam(fused=True)" if fused else "Adam"})


def check_equal(device="cpu"):
    """before and after compute the same loss (up to fp rounding)."""
    sz = _sizes(device)
    torch.manual_seed(0)
    net = Net(sz["din"], sz["dim"], sz["classes"]).to(device)
    x = torch.randn(sz["rows"], sz["din"], device=device)
    y = torch.randint(0, sz["classes"], (sz["rows"],), device=device)
    y[torch.rand(sz["rows"], device=device) < 0.15] = -1
    s1, s2 = {}, {}
    a = loss_before(net, x, y, s1)
    b = loss_after(net, x, y, s2)
    return float(a), float(b), s1, {k: float(v) for k, v in s2.items()}
