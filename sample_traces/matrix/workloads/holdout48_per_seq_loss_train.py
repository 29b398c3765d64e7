"""holdout48_per_seq_loss_train: a small transformer token tagger trained on variable-length sequences padded to 128,
its loss taken one sequence at a time (`sum(F.cross_entropy(lo[:n].float(), y[:n]) for lo, y, n in zip(logits,
targets, lengths)) / batch`, the lengths a Python list), -> one cross_entropy over the padded batch (reduction
"none") weighted by 1 / (length x batch) at the valid positions, the same loss.

Forty-eighth held-out set (registered before it was recorded; see the matrix README). Model: token embedding (vocabulary
4000) plus positions, nn.TransformerEncoder (pre-norm layers, batch_first, no dropout), a linear head over the
vocabulary; bf16 autocast, fused AdamW; batch 32 x 128 tokens already on the GPU (two batches in turn), lengths 16..128.
before: `zip(logits, targets, lengths)` (two aten::unbind, then each turn two slices, a float copy, cross_entropy and
        the running sum's add: about 6 ops forward and as many autograd nodes backward a sequence, no sync).
after:  cross_entropy(reduction="none") over the batch, times a weight made once per batch, summed (about 5 ops).
"""

import torch
import torch.nn.functional as F
from torch import nn

from ._util import Step, autocast, is_cuda

NAME = "holdout48_per_seq_loss_train"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("the loss taken once over the padded batch (cross_entropy with reduction='none' times a per-position weight) "
       "instead of a Python loop over the batch's sequences")
SIZE = {"batch": 32, "seq": 128, "vocab": 4000, "dim": 256, "heads": 4, "layers": 2, "min_len": 16}
DESCRIPTION = {
    "before": ("transformer tagger (2 x 256, 4 heads, vocabulary 4000), batch 32 x 128 (lengths 16..128), bf16 "
               "autocast, fused AdamW; the loss one sequence at a time in a Python loop over the batch"),
    "after": "same, one cross_entropy over the padded batch weighted per position",
}


def sizes(device, size=SIZE):
    return size if is_cuda(device) else {**size, "batch": 3, "seq": 16, "vocab": 50, "dim": 16, "heads": 2,
                                         "min_len": 4}


class Tagger(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, dim), nn.Parameter(torch.zeros(seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.body(self.emb(tokens) + self.pos))


def loss_loop(logits, targets, lengths):
    return sum(F.cross_entropy(lo[:n].float(), y[:n]) for lo, y, n in zip(logits, targets, lengths)) / len(lengths)


def loss_batch(logits, targets, weight):
    ce = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
    return (ce * weight.flatten()).sum()


def batches(s, device, pool=2):
    """`pool` batches in turn: tokens, targets, each sequence's length (a Python list) and the batched loss's weight
    (1 / (length x batch) at the valid positions, 0 past them)."""
    g = torch.Generator().manual_seed(1)
    b, t = s["batch"], s["seq"]
    xs = [torch.randint(0, s["vocab"], (b, t), generator=g).to(device) for _ in range(pool)]
    ys = [torch.randint(0, s["vocab"], (b, t), generator=g).to(device) for _ in range(pool)]
    lens = [torch.randint(s["min_len"], t + 1, (b,), generator=g).tolist() for _ in range(pool)]
    weights = [((torch.arange(t)[None, :] < torch.tensor(n)[:, None]).float() / (torch.tensor(n)[:, None] * b))
               .to(device) for n in lens]
    return xs, ys, lens, weights


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    cuda = is_cuda(device)
    torch.manual_seed(0)
    model = Tagger(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    b, t = s["batch"], s["seq"]
    xs, ys, lens, weights = batches(s, device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(xs[i % 2])
        if variant == "before":
            loss = loss_loop(logits, ys[i % 2], lens[i % 2])
        else:
            loss = loss_batch(logits, ys[i % 2], weights[i % 2])
        loss.backward()
        opt.step()
    return Step(step, info={"batch": b, "seq": t, "loss": "per sequence" if variant == "before" else "batch"})
