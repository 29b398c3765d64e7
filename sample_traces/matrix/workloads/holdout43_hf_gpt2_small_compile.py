"""holdout43_hf_gpt2_small_compile: a small Hugging Face GPT-2 trained eagerly in bf16 -> the model under torch.compile.

Forty-third held-out set (pre-registered 2026-12-04 before it was recorded): eager library models whose one change
is torch.compile in its default mode, to test the compile estimate of a launch-bound eager step
(analyses/launch_overhead.py's torch_compile option, fitted on the compiled Llama, item_logging_large and
sync_mask_loss; none of these models was part of that fit).
Model: transformers' GPT2LMHeadModel built from a config (no weights downloaded): 4 layers, width 512, 8 heads,
vocabulary 8192, 256 positions; bf16 autocast, fused AdamW, batch 8 x 256 tokens from a pool of GPU batches, its own
loss (labels=input_ids).
before: eager.
after:  the model under torch.compile (default mode: Inductor's fused Triton kernels, no CUDA graphs).
"""

import torch

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout43_hf_gpt2_small_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile(model) (default mode)"
SIZE = {"layers": 4, "width": 512, "heads": 8, "vocab": 8192, "batch": 8, "seq": 256}
DESCRIPTION = {
    "before": "transformers GPT2LMHeadModel (4 x 512, from a config), batch 8 x 256, bf16 autocast, fused AdamW, eager",
    "after": "same, the model under torch.compile (default mode)",
}
WARMUP_STEPS = 8      # (after compiles in the first of them)


def make(variant, device, pool=2):
    from transformers import GPT2Config, GPT2LMHeadModel

    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 1, "width": 32, "heads": 2, "vocab": 128, "batch": 2, "seq": 16}
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=s["layers"], n_embd=s["width"], n_head=s["heads"], vocab_size=s["vocab"],
                     n_positions=s["seq"])
    model = GPT2LMHeadModel(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        ids = batches[i % pool]
        with autocast(device):
            loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={**s, "compiled": compiled,
                                         "params": sum(p.numel() for p in model.parameters())})
