"""holdout11_masked_select_loss: a per-token loss reduced with masked_select -> a float-mask mean.

Eleventh held-out set (written after the replay followed autograd's thread and the boolean index's fix
took the data-dependent ops' CPU time): a different model and a different data-dependent op than
holdout4_masked_seq_loss. A 2-layer token MLP with LayerNorm (batch 48 x 192 tokens, width 384, vocab
3000, 25% of the positions masked out), bf16 autocast, fused AdamW.
before: per-token cross_entropy(reduction="none"), then per_tok.masked_select(keep).mean(): the
        selection sizes its output with a sync (nonzero) and its backward scatters (masked_scatter).
after:  (per_tok * keep_f).sum() / keep_f.sum() with the float mask: no sync, no scatter.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout11_masked_select_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "a float-mask mean ((per_tok * keep).sum() / keep.sum()) instead of per_tok.masked_select(keep).mean()"
DESCRIPTION = {
    "before": ("token MLP + LayerNorm, batch 48 x 192, width 384, vocab 3000, bf16, fused AdamW; per-token loss "
               "reduced with masked_select (nonzero sync, masked_scatter backward)"),
    "after": "same, the per-token loss reduced with a float mask (no sync)",
}


def make(variant, device):
    cuda = is_cuda(device)
    b, t, d, v = (48, 192, 384, 3000) if cuda else (2, 8, 16, 10)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(v, d), nn.Linear(d, d), nn.LayerNorm(d), nn.SiLU(),
                          nn.Linear(d, d), nn.LayerNorm(d), nn.SiLU(), nn.Linear(d, v)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    toks = [torch.randint(0, v, (b, t), generator=g).to(device) for _ in range(2)]
    labels = [torch.randint(0, v, (b, t), generator=g).to(device) for _ in range(2)]
    keep = [(torch.rand(b, t, generator=g) > 0.25).to(device) for _ in range(2)]
    keep_f = [k.float().view(-1) for k in keep]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        k = i % 2
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(toks[k])
        per_tok = F.cross_entropy(logits.float().view(-1, v), labels[k].view(-1), reduction="none")
        if variant == "before":
            loss = per_tok.masked_select(keep[k].view(-1)).mean()
        else:
            loss = (per_tok * keep_f[k]).sum() / keep_f[k].sum()
        loss.backward()
        opt.step()
    return Step(step, info={"tokens": b * t})
