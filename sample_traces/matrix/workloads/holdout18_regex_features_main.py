"""holdout18_regex_features_main: log lines parsed with regular expressions on the main thread -> DataLoader workers.

Eighteenth held-out set (see holdout18_loader_json_records; pre-registered before it was recorded): data
preparation in the main thread without a DataLoader, a mix of C built-ins (re.match, group, str methods,
int()) and Python frames (a small parse function per line, a feature function per field).
Each step builds 512 synthetic log lines, parses each with a compiled pattern into fields, maps them to a
64-value feature row (hashed tokens, numeric fields scaled) and trains a bf16 MLP classifier (fused AdamW).
before: the parsing on the main thread, batches stacked there and copied to the GPU.
after:  the same per-line parsing in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True,
        prefetch_factor=4) workers; batches arrive pinned, copied non_blocking.
"""

import re

import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout18_regex_features_main"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "parse in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4) workers"
DESCRIPTION = {
    "before": "512 log lines per batch parsed with a compiled regex into 64 features on the main thread, "
              "bf16 MLP classifier, fused AdamW",
    "after": "same parsing in 4 DataLoader workers, pinned batches, non_blocking copies",
}
WARMUP_STEPS = 12
BATCH, F = 512, 64
LINE = re.compile(r"(?P<ts>\d+) (?P<lvl>[A-Z]+) \[(?P<mod>[\w.]+)\] (?P<msg>.*?) took=(?P<ms>\d+)ms code=(?P<code>\d+)")
LEVELS = ("INFO", "WARN", "ERROR", "DEBUG")
WORDS = "open read write flush close retry timeout connect send recv parse load store".split()


def line(i):
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12))
    return f"{1700000000 + i} {LEVELS[i % 4]} [svc.mod{i % 9}.io] {words} took={i % 977}ms code={200 + i % 5}"


def token_feature(word, k):
    return (hash(word) + k) % F


def parse(text):
    m = LINE.match(text)
    row = [0.0] * F
    row[LEVELS.index(m.group("lvl"))] = 1.0
    row[4] = int(m.group("ms")) / 1000.0
    row[5] = (int(m.group("code")) - 200) / 4.0
    for k, w in enumerate(m.group("msg").split()):
        row[token_feature(w, k)] += 1.0
    row[token_feature(m.group("mod"), 0)] += 1.0
    return row


class Lines(torch.utils.data.Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        return torch.tensor(parse(line(i)), dtype=torch.float32), i % 4


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    d = 1024 if cuda else 16
    model = nn.Sequential(nn.Linear(F, d), nn.GELU(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    data = Lines()
    bs = BATCH if cuda else 2

    def train(x, y):
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.cross_entropy(out.float(), y).backward()
        opt.step()

    if variant == "after" and cuda:
        loader = torch.utils.data.DataLoader(data, batch_size=bs, shuffle=False, num_workers=4,
                                             persistent_workers=True, pin_memory=True, prefetch_factor=4)
        st = {"it": iter(loader)}

        def step():
            x, y = next(st["it"])
            train(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
        return Step(step, close=lambda: st.clear(), info={"num_workers": 4})
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        rows = [parse(line(i * bs + k)) for k in range(bs)]
        x = torch.tensor(rows, dtype=torch.float32)
        y = torch.tensor([(i * bs + k) % 4 for k in range(bs)])
        train(x.to(device), y.to(device))
    return Step(step, info={"num_workers": 0})
