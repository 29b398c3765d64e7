"""holdout40_hf_gpt2_unfused_adamw: a Hugging Face GPT-2 trained with a per-tensor AdamW -> fused AdamW.

Fortieth held-out set (pre-registered 2026-12-03 before it was recorded): models as users build them, from the
libraries they use (transformers, timm), not written out by hand: their forward passes hold the libraries' own
Python, mask preparation and kernels, which no matrix program had.
Model: transformers' GPT2LMHeadModel built from a config (no weights downloaded): 8 layers, width 1024, 16 heads,
vocabulary 16384, context 512; the library's own loss (labels=input_ids), its default attention (SDPA); batch 16 x
512 tokens from a pool of GPU batches, bf16 autocast.
before: torch.optim.AdamW(foreach=False): ~100 parameter tensors updated one at a time, each by its own kernels.
after:  torch.optim.AdamW(fused=True).
after_compile (added once the set was read, 2026-12-03: the tool's top finding on 6 of its 8 before traces was
        fusion_candidates, unmeasured, at about 2.1x): the model and its loss under torch.compile (default mode), the
        optimizer still AdamW(foreach=False), to measure it.
"""

import torch

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout40_hf_gpt2_unfused_adamw"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after", "after_compile")
FIX = "torch.optim.AdamW(fused=True) instead of AdamW(foreach=False)"
SIZE = {"layers": 8, "width": 1024, "heads": 16, "vocab": 16384, "batch": 16, "seq": 512}
DESCRIPTION = {
    "before": "transformers GPT2LMHeadModel (8 x 1024, from a config), batch 16 x 512, bf16 autocast, "
              "AdamW(foreach=False)",
    "after": "same, AdamW(fused=True)",
    "after_compile": "before, the model and its loss under torch.compile (default mode); AdamW(foreach=False) kept",
}
WARMUP_STEPS = 8      # (after_compile compiles in the first of them)


def make(variant, device, pool=2):
    from transformers import GPT2Config, GPT2LMHeadModel

    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 2, "width": 32, "heads": 2, "vocab": 128, "batch": 2, "seq": 16}
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=s["layers"], n_embd=s["width"], n_head=s["heads"], vocab_size=s["vocab"],
                     n_positions=s["seq"])
    model = GPT2LMHeadModel(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4,
                            **({"fused": True if cuda else None} if variant == "after" else {"foreach": False}))
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def loss_fn(ids):
        with autocast(device):
            return model(input_ids=ids, labels=ids).loss
    compiled = variant == "after_compile" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn)

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        loss_fn(batches[i % pool]).backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    n = sum(p.numel() for p in model.parameters())
    return Step(step, close=close, info={**s, "params": n, "param_tensors": len(list(model.parameters())),
                                         "compiled": compiled})
