"""holdout41_hf_gpt2_eager_attention: a Hugging Face GPT-2 with its attention written out (eager) -> SDPA.

Forty-first held-out set (pre-registered 2026-12-04 before it was recorded): models from the libraries users bring
(transformers, timm), each with one fault a user meets, and one healthy model. No estimate was fitted on them.
Model: transformers' GPT2LMHeadModel built from a config (no weights downloaded): 6 layers, width 768, 12 heads,
vocabulary 16384, context 1024, the library's default dropout; batch 8 x 1024 tokens from a pool of GPU batches, its
own loss (labels=input_ids), bf16 autocast, AdamW(fused=True).
before: attn_implementation "eager": the library's written-out attention (q @ k^T, scale, causal mask, softmax,
        dropout, @ v), which materialises [8, 12, 1024, 1024] scores per layer.
after:  attn_implementation "sdpa" (F.scaled_dot_product_attention, the library's default).
"""

import torch

from ._util import Step, autocast, is_cuda

NAME = "holdout41_hf_gpt2_eager_attention"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'attn_implementation="sdpa" (F.scaled_dot_product_attention) instead of "eager"'
SIZE = {"layers": 6, "width": 768, "heads": 12, "vocab": 16384, "batch": 8, "seq": 1024}
DESCRIPTION = {
    "before": "transformers GPT2LMHeadModel (6 x 768, from a config), batch 8 x 1024, bf16 autocast, fused AdamW, "
              'attn_implementation="eager"',
    "after": 'same, attn_implementation="sdpa"',
}
WARMUP_STEPS = 8


def _attention(model, impl: str) -> str:
    """Set the model's attention implementation by the library's own API (whichever this version has) and
    return the one it reports."""
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl
    return str(getattr(model.config, "_attn_implementation", "?"))


def make(variant, device, pool=2):
    from transformers import GPT2Config, GPT2LMHeadModel

    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 2, "width": 32, "heads": 2, "vocab": 128, "batch": 2, "seq": 16}
    torch.manual_seed(0)
    impl = "eager" if variant == "before" else "sdpa"
    cfg = GPT2Config(n_layer=s["layers"], n_embd=s["width"], n_head=s["heads"], vocab_size=s["vocab"],
                     n_positions=s["seq"], attn_implementation=impl)
    model = GPT2LMHeadModel(cfg).to(device).train()
    used = _attention(model, impl)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        ids = batches[i % pool]
        with autocast(device):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
    return Step(step, info={**s, "attn_implementation": used,
                            "params": sum(p.numel() for p in model.parameters())})
