"""holdout2_tokenize_main: text batches tokenized in Python on the main thread -> DataLoader workers.

Second held-out set: data preparation in the main thread without a DataLoader (pure Python string work,
not numpy), against the same work in DataLoader worker processes.

before: each step builds a batch of 64 synthetic sentences, splits and maps every word through a
        vocabulary dict, pads to 128 tokens (pure Python on the main thread), then trains an
        embedding + 2-layer MLP classifier (bf16, fused AdamW).
after:  the same per-sample tokenization runs in DataLoader(num_workers=4, persistent_workers=True,
        pin_memory=True, prefetch_factor=4) workers; batches arrive pinned, copied non_blocking.
after_graph_only: the tokenization kept on the main thread; the training step in one CUDA graph
        (capturable fused AdamW). Added 2026-11-26 (h100_clean7): with with_stack the tool ranks
        launch_overhead first on some hosts, and the graph had never been measured.
"""

import random

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda

NAME = "holdout2_tokenize_main"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "tokenize in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True) workers"
DESCRIPTION = {
    "before": "64 sentences per batch tokenized in Python on the main thread (dict lookups, padding to 128), "
              "embedding + MLP classifier, bf16, fused AdamW",
    "after": "same tokenization in 4 DataLoader workers, pinned batches, non_blocking copies",
    "after_graph_only": "tokenization on the main thread as before, the training step in one CUDA graph",
}
WARMUP_STEPS = 10
SEQ, BATCH, VOCAB = 128, 64, 30000
WORDS = [f"w{i}" for i in range(VOCAB)]
INDEX = {w: i for i, w in enumerate(WORDS)}


def sentence(k):
    rng = random.Random(k)
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 160)))


def tokenize(text):
    ids = [INDEX.get(w.lower().strip(".,"), 0) for w in text.split()][:SEQ]
    ids += [0] * (SEQ - len(ids))
    return ids


class Texts(torch.utils.data.Dataset):
    def __init__(self, n):
        self.texts = [sentence(k) for k in range(n)]

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        return torch.tensor(tokenize(self.texts[i])), i % 7


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    d = 512 if cuda else 16
    model = nn.Sequential(nn.EmbeddingBag(VOCAB, d), nn.Linear(d, 4 * d), nn.GELU(),
                          nn.Linear(4 * d, 4 * d), nn.GELU(), nn.Linear(4 * d, 7)).to(device)
    graph = variant == "after_graph_only" and cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None,
                            **({"capturable": True} if graph else {}))
    data = Texts(2048)

    def train(ids, ys):
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(ids)
        nn.functional.cross_entropy(out.float(), ys).backward()
        opt.step()

    if variant == "after":
        loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=4,
                                             persistent_workers=True, pin_memory=cuda, prefetch_factor=4,
                                             drop_last=True)
        st = {"it": iter(loader)}

        def step():
            try:
                ids, ys = next(st["it"])
            except StopIteration:
                st["it"] = iter(loader)
                ids, ys = next(st["it"])
            train(ids.to(device, non_blocking=True), ys.to(device, non_blocking=True))
        return Step(step, close=lambda: st.clear(), info={"num_workers": 4})
    st = {"i": 0}

    def batch():
        """The next batch, tokenized on the main thread."""
        i = st["i"] = st["i"] + 1
        lo = (i * BATCH) % (len(data) - BATCH)
        rows = [data[k] for k in range(lo, lo + BATCH)]
        return torch.stack([r[0] for r in rows]), torch.tensor([r[1] for r in rows])

    if graph:
        s_ids = torch.zeros(BATCH, SEQ, dtype=torch.long, device=device)
        s_ys = torch.zeros(BATCH, dtype=torch.long, device=device)

        def body():
            opt.zero_grad(set_to_none=False)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(s_ids)
            nn.functional.cross_entropy(out.float(), s_ys).backward()
            opt.step()
        cg = capture_graph(body, warmup=3)

        def step():
            ids, ys = batch()
            s_ids.copy_(ids)
            s_ys.copy_(ys)
            cg.replay()
        return Step(step, info={"num_workers": 0, "cuda_graph": True})

    def step():
        ids, ys = batch()
        train(ids.to(device), ys.to(device))
    return Step(step, info={"num_workers": 0})
