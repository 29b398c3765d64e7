"""holdout11_masked_select_loss: a per-token loss reduced with masked_select -> a float-mask mean.

Eleventh held-out set (written after the replay followed autograd's thread and the boolean index's fix
took the data-dependent ops' CPU time): a different model and a different data-dependent op than
holdout4_masked_seq_loss. A 2-layer token MLP with LayerNorm (batch 48 x 192 tokens, width 384, vocab
3000, 25% of the positions masked out), bf16 autocast, fused AdamW.
before: per-token cross_entropy(reduction="none"), then per_tok.masked_select(keep).mean(): the
        selection sizes its output with a sync (nonzero) and its backward scatters (masked_scatter).
after:  (per_tok * keep_f).sum() / keep_f.sum() with the float mask: no sync, no scatter.
after_graph: after, the whole step captured in one CUDA graph (capturable fused AdamW). Added on
        2026-11-26 (h*_clean4): the tool's top finding on this pair is launch_overhead, after the sync,
        and only the sync's fix had been measured.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, replay_step

NAME = "holdout11_masked_select_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "a float-mask mean ((per_tok * keep).sum() / keep.sum()) instead of per_tok.masked_select(keep).mean()"
DESCRIPTION = {
    "before": ("token MLP + LayerNorm, batch 48 x 192, width 384, vocab 3000, bf16, fused AdamW; per-token loss "
               "reduced with masked_select (nonzero sync, masked_scatter backward)"),
    "after": "same, the per-token loss reduced with a float mask (no sync)",
    "after_graph": "after, the whole step captured in one CUDA graph (capturable fused AdamW)",
}


def make(variant, device):
    cuda = is_cuda(device)
    b, t, d, v = (48, 192, 384, 3000) if cuda else (2, 8, 16, 10)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(v, d), nn.Linear(d, d), nn.LayerNorm(d), nn.SiLU(),
                          nn.Linear(d, d), nn.LayerNorm(d), nn.SiLU(), nn.Linear(d, v)).to(device)
    graph = variant == "after_graph" and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None,
                            **({"capturable": True} if graph else {}))
    g = torch.Generator().manual_seed(1)
    toks = [torch.randint(0, v, (b, t), generator=g).to(device) for _ in range(2)]
    labels = [torch.randint(0, v, (b, t), generator=g).to(device) for _ in range(2)]
    keep = [(torch.rand(b, t, generator=g) > 0.25).to(device) for _ in range(2)]
    keep_f = [k.float().view(-1) for k in keep]
    st = {"i": 0}
    if graph:
        st_toks, st_labels, st_keep = toks[0].clone(), labels[0].clone(), keep_f[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = model(st_toks)
            per_tok = F.cross_entropy(logits.float().view(-1, v), st_labels.view(-1), reduction="none")
            ((per_tok * st_keep).sum() / st_keep.sum()).backward()
            opt.step()
        cg = capture_graph(body, warmup=3)
        return Step(replay_step(cg, [(st_toks, toks), (st_labels, labels), (st_keep, keep_f)]),
                    info={"tokens": b * t, "cuda_graph": True})

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
