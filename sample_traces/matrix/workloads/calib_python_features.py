"""calib_python_features: per-step feature hashing in pure Python on the main thread -> features computed once.

For the profiler-cost calibration (calibrate.py: the *_calib runs), written after the tokenizer's with_stack
traces showed the fitted cost per Python event (2.1 us on H100, from steps with a few hundred Python events)
does not hold for steps with tens of thousands of small Python calls (0.9 us measured): a step dense in
Python calls, different code from the tokenizer (helper functions, dict and string built-ins), so that the
fit sees such a step. Also a pair (host_bound).
before: each step hashes 192 records (dicts of strings and numbers) into 2**16 buckets with small Python
        helper functions (~25 calls a record), builds index/offset lists, then an EmbeddingBag + MLP
        training step (bf16, fused AdamW).
after:  the same records' features hashed once before the loop; each step takes its precomputed batch.
after_graph_only: the hashing stays in the step; the training step is captured in one CUDA graph (the index
        list padded to the batch's most features with a padding row, capturable fused AdamW). Added on
        2026-11-26 (h*_clean4): the tool's top finding on this pair is often launch_overhead, and only
        the hashing's removal had been measured.
"""

import random

import torch
import torch.nn as nn

from ._util import Step, autocast, capture_graph, is_cuda

NAME = "calib_python_features"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "hash the features once (or in DataLoader workers), not in the step"
DESCRIPTION = {
    "before": "192 records a step feature-hashed in pure Python helpers (~25 calls each), EmbeddingBag + MLP, bf16",
    "after": "the same features hashed once before the loop",
    "after_graph_only": "the hashing kept in the step, the training step in one CUDA graph (padded indices)",
}
BUCKETS, BATCH, RECORDS = 2 ** 16, 192, 1536
FIELDS = ("user", "item", "query", "country", "device")


def _record(k):
    rng = random.Random(k)
    return {"user": f"u{rng.randint(0, 10**6)}", "item": f"i{rng.randint(0, 10**5)}",
            "query": " ".join(f"t{rng.randint(0, 5000)}" for _ in range(rng.randint(3, 8))),
            "country": rng.choice(("us", "de", "fr", "jp", "br")), "device": rng.choice(("ios", "and", "web")),
            "price": rng.random() * 100, "age": rng.randint(18, 80)}


def _bucket(name, value):
    return hash(f"{name}={value}") % BUCKETS


def _tokens(text):
    return [t.strip() for t in text.split(" ") if t]


def _features(r):
    out = [_bucket(f, r[f]) for f in FIELDS if f != "query"]
    out += [_bucket("q", t) for t in _tokens(r["query"])]
    out.append(_bucket("price", int(r["price"] // 10)))
    out.append(_bucket("age", r["age"] // 5))
    return out


def _batch(records):
    idx, offsets = [], []
    for r in records:
        offsets.append(len(idx))
        idx.extend(_features(r))
    return idx, offsets


def _graphed(device, recs, n):
    """after_graph_only: hashing per step as before; the padded index list copied into static tensors and the
    step replayed as one graph."""
    d = 256
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, 1)).to(device)
    emb = nn.EmbeddingBag(BUCKETS + 1, d, mode="sum", padding_idx=BUCKETS).to(device)
    opt = torch.optim.AdamW([*model.parameters(), *emb.parameters()], lr=1e-4, fused=True, capturable=True)
    most = max(len(_batch(recs[k * BATCH:(k + 1) * BATCH])[0]) for k in range(n))
    ys = torch.rand(BATCH, 1, device=device)
    s_idx = torch.full((most,), BUCKETS, dtype=torch.long, device=device)
    s_off = torch.zeros(BATCH, dtype=torch.long, device=device)

    def body():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = model(emb(s_idx, s_off))
        nn.functional.mse_loss(out.float(), ys).backward()
        opt.step()
    cg = capture_graph(body, warmup=3)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        k = i % n
        idx, offsets = _batch(recs[k * BATCH:(k + 1) * BATCH])
        # Pad to the static length: the padding row adds nothing to the last bag's sum.
        s_idx.copy_(torch.tensor(idx + [BUCKETS] * (most - len(idx))))
        s_off.copy_(torch.tensor(offsets))
        cg.replay()
    return Step(step, info={"records": BATCH, "cuda_graph": True})


def make(variant, device):
    cuda = is_cuda(device)
    if variant == "after_graph_only" and cuda:
        return _graphed(device, [_record(k) for k in range(RECORDS)], RECORDS // BATCH)
    torch.manual_seed(0)
    d = 256 if cuda else 16
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, 1)).to(device)
    emb = nn.EmbeddingBag(BUCKETS, d, mode="sum").to(device)
    opt = torch.optim.AdamW([*model.parameters(), *emb.parameters()], lr=1e-4, fused=True if cuda else None)
    recs = [_record(k) for k in range(RECORDS)]
    ys = torch.rand(BATCH, 1, device=device)
    st = {"i": 0}
    n = RECORDS // BATCH
    pre = [_batch(recs[k * BATCH:(k + 1) * BATCH]) for k in range(n)] if variant == "after" else None

    def step():
        i = st["i"] = st["i"] + 1
        k = i % n
        idx, offsets = pre[k] if pre is not None else _batch(recs[k * BATCH:(k + 1) * BATCH])
        idx_t = torch.tensor(idx, device=device)
        off_t = torch.tensor(offsets, device=device)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(emb(idx_t, off_t))
        nn.functional.mse_loss(out.float(), ys).backward()
        opt.step()
    return Step(step, info={"records": BATCH})
