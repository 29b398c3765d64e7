"""holdout17_loader_text_python: pure-Python tokenisation per sample in DataLoader(num_workers=0) -> 2 / 8 workers.

Seventeenth held-out set (written after the DataLoader workers' uneven scaling was fitted as a serial share
per batch on dataloader_workers0, holdout4 and holdout12, all numpy image transforms of 2-5 MB batches;
pre-registered before it was recorded): a different kind of loading, Python string work with small batches.
Each sample builds a synthetic sentence, lower-cases and splits it, maps words to ids through a dict (a
hash of unknown words), truncates and pads to 128 tokens; a small bf16 embedding + 2-layer MLP classifier
trains on batches of 64 (64 x 128 int64: 64 KB a batch), fused AdamW.
before: DataLoader(num_workers=0): the tokenisation runs on the training loop's thread.
after:  DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4).
after_2_workers: the same with num_workers=2.
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout17_loader_text_python"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_2_workers")
FIX = "DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": ("pure-Python tokenisation (split, dict lookup, hash of unknown words, pad to 128) per sample, "
               "num_workers=0, batch 64, bf16 embedding + MLP classifier, fused AdamW"),
    "after": "same tokenisation in DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
    "after_2_workers": "the same with num_workers=2",
}
WARMUP_STEPS = 12

_WORDS = ("the a of to and in is it that for on with as was by at be this from or an are not have but "
          "GPU kernel launch stream tensor batch loader worker python numpy profile trace idle step").split()


class Sentences(torch.utils.data.Dataset):
    def __init__(self, length=128, vocab=4096):
        self.length, self.vocab = length, vocab
        self.table = {w.lower(): i + 2 for i, w in enumerate(_WORDS)}

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        words = [(_WORDS[(i * 7 + k * 13) % len(_WORDS)] + ("s" if (i + k) % 5 == 0 else "")) for k in range(160)]
        text = " ".join(words)
        ids = []
        for w in text.lower().split():
            t = self.table.get(w)
            if t is None:
                t = 2 + len(self.table) + (hash(w) % (self.vocab - 2 - len(self.table)))
            ids.append(t)
        ids = ids[:self.length] + [0] * max(0, self.length - len(ids))
        return torch.tensor(ids, dtype=torch.long), int(i % 4)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    d = 256 if cuda else 16
    model = nn.Sequential(nn.Embedding(4096, d), nn.Flatten(), nn.Linear(128 * d, d), nn.GELU(),
                          nn.Linear(d, d), nn.GELU(), nn.Linear(d, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    workers = {"after": 8, "after_2_workers": 2}.get(variant, 0) if cuda else (1 if variant != "before" else 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(Sentences(), batch_size=64 if cuda else 2, shuffle=False, **kw)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=lambda: st.clear(), info={"num_workers": workers})
