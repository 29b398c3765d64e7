"""holdout49_thread_tokenize_train: a transformer text classifier trained on batches tokenised in pure Python on a
background thread of the training process (a hand-written prefetcher: threading.Thread and a queue of depth 2) ->
the same tokenisation in DataLoader worker processes (num_workers=4).

Forty-ninth held-out set (registered before it was recorded; see the matrix README). Each sample is 256 words of a
synthetic sentence, each word hashed to an id (FNV-1a over its bytes, in Python bytecode: no call per word); the
thread holds the GIL while it hashes, so the training loop waits for the interpreter between its ops. Model: token
embedding (vocabulary 8192) plus positions, nn.TransformerEncoder (4 pre-norm layers of 512, 8 heads, batch_first, no
dropout), mean over tokens, a 4-class head; bf16 autocast, fused AdamW; batch 128 x 256 tokens.
before: threading.Thread producer (tokenise, torch.tensor, pin_memory), queue depth 2.
after:  DataLoader(IterableDataset of the same batches, batch_size=None, num_workers=4, persistent_workers=True,
        pin_memory=True, prefetch_factor=2).
"""

import torch
import torch.nn.functional as F
from torch import nn

from ._threads import source
from ._util import Step, autocast, is_cuda

NAME = "holdout49_thread_tokenize_train"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("the tokenisation moved from a threading.Thread of the training process to DataLoader worker processes "
       "(num_workers=4, persistent_workers=True, pin_memory=True)")
SIZE = {"batch": 128, "seq": 256, "vocab": 8192, "dim": 512, "heads": 8, "layers": 4, "workers": 4}
DESCRIPTION = {
    "before": ("transformer classifier (4 x 512, 8 heads, vocabulary 8192), batch 128 x 256, bf16 autocast, fused "
               "AdamW; batches tokenised in pure Python on a background threading.Thread (queue depth 2)"),
    "after": "same tokenisation in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True) processes",
}
WARMUP_STEPS = 8
WORDS = tuple(w.encode() for w in (
    "the a of to and in is it that for on with as was by at be this from or an are not have but GPU kernel launch "
    "stream tensor batch loader worker python numpy profile trace idle step gradient optimizer checkpoint attention "
    "embedding transformer sequence vocabulary").split())


def sizes(device, size=SIZE):
    return size if is_cuda(device) else {**size, "batch": 3, "seq": 16, "vocab": 64, "dim": 16, "heads": 2,
                                         "layers": 1, "workers": 1}


def tokenize(i, length, vocab):
    """Sample i's token ids: its words hashed in Python bytecode (one store per word, no call per word)."""
    ids = [0] * length
    n = len(WORDS)
    for k in range(length):
        h = 2166136261
        for c in WORDS[(i * 7 + k * 13 + (i * k) % 5) % n]:
            h = ((h ^ c) * 16777619) & 0xFFFFFFFF
        ids[k] = 2 + h % (vocab - 2)
    return ids


class Tokenised:
    """Batch j: (token ids, labels), made on the CPU only (DataLoader workers are forked)."""

    def __init__(self, s):
        self.s = s

    def __call__(self, j):
        b, t, v = self.s["batch"], self.s["seq"], self.s["vocab"]
        rows = [tokenize(j * b + r, t, v) for r in range(b)]
        return torch.tensor(rows, dtype=torch.long), torch.tensor([(j * b + r) % 4 for r in range(b)])


class Classifier(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, dim), nn.Parameter(torch.zeros(seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 4)

    def forward(self, tokens):
        return self.head(self.body(self.emb(tokens) + self.pos).mean(1))


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    cuda = is_cuda(device)
    torch.manual_seed(0)
    model = Classifier(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    get, close = source(variant, Tokenised(s), cuda, s["workers"])

    def step():
        x, y = get()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, close=close, info={"batch": s["batch"], "seq": s["seq"],
                                         "loader": "thread" if variant == "before" else f"{s['workers']} workers"})
