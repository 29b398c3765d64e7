"""holdout18_loader_json_records: JSON records parsed per sample in DataLoader(num_workers=0) -> 4 workers.

Eighteenth held-out set (written after with_stack's Python events were split into frames and C built-ins,
each with its own profiler cost, on the matrix's tokenizers; pre-registered before it was recorded): loading
whose Python time is mostly inside a few C calls that do real work (json.loads, str.join, float()), where
the profiler records few events and most of the time is the program's own.
Each sample formats a record of 48 numeric fields as JSON text, parses it back with json.loads, reads the
fields through dict lookups into floats and normalises them (a 48-feature row); a bf16 MLP regressor
trains on batches of 256 (256 x 48 fp32: 48 KB a batch), fused AdamW.
before: DataLoader(num_workers=0): the parsing runs on the training loop's thread.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4).
"""

import json

import torch
import torch.nn as nn

from ._util import Step, autocast, is_cuda

NAME = "holdout18_loader_json_records"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
DESCRIPTION = {
    "before": ("a 48-field JSON record per sample formatted, json.loads-parsed and read into floats, "
               "num_workers=0, batch 256, bf16 MLP regressor, fused AdamW"),
    "after": "same parsing in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)",
}
WARMUP_STEPS = 12
FIELDS = [f"f{k:02d}" for k in range(48)]


class Records(torch.utils.data.Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        text = json.dumps({f: (i * 31 + k * 17) % 1000 / 7.0 for k, f in enumerate(FIELDS)})
        rec = json.loads(text)
        row = [float(rec[f]) for f in FIELDS]
        m = sum(row) / len(row)
        return torch.tensor([v - m for v in row], dtype=torch.float32), float(m)


def make(variant, device):
    cuda = is_cuda(device)
    torch.manual_seed(0)
    d = 1024 if cuda else 16
    model = nn.Sequential(nn.Linear(48, d), nn.GELU(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    workers = (4 if variant == "after" else 0) if cuda else (1 if variant != "before" else 0)
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(Records(), batch_size=256 if cuda else 2, shuffle=False, **kw)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True)
        y = y.to(device, dtype=torch.float32, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        nn.functional.mse_loss(out.float().squeeze(1), y).backward()
        opt.step()
    return Step(step, close=lambda: st.clear(), info={"num_workers": workers})
