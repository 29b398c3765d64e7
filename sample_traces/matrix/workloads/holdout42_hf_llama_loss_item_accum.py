"""holdout42_hf_llama_loss_item_accum: a Hugging Face Llama with gradient accumulation that reads each micro-batch's
loss with .item() -> the running loss kept on the GPU.

Forty-second held-out set (pre-registered 2026-12-04 before it was recorded): models from the libraries users bring
(transformers, timm), each with one fault a user meets; no estimate was fitted on them.
Model: transformers' LlamaForCausalLM built from a config (no weights downloaded): 4 layers, width 512, 8 heads,
MLP 1408, vocabulary 8192, SDPA attention; bf16 autocast, fused AdamW. One step is one optimizer step over 4
micro-batches of 4 x 256 tokens (a pool of GPU batches), each its own loss (labels=input_ids) / 4, backward.
before: `running += loss.item()` after each micro-batch's backward, as training loops log the loss.
after:  `running += loss.detach()` (the sum stays on the GPU; a loop would read it once per logging interval).
"""

import torch

from ._util import Step, autocast, is_cuda

NAME = "holdout42_hf_llama_loss_item_accum"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "keep the running loss on the GPU (running += loss.detach()) instead of loss.item() per micro-batch"
SIZE = {"layers": 4, "width": 512, "heads": 8, "mlp": 1408, "vocab": 8192, "batch": 4, "seq": 256, "accum": 4}
DESCRIPTION = {
    "before": "transformers LlamaForCausalLM (4 x 512, from a config), 4 micro-batches of 4 x 256 per step, bf16 "
              "autocast, fused AdamW, running += loss.item() per micro-batch",
    "after": "same, running += loss.detach()",
}
WARMUP_STEPS = 8


def make(variant, device, pool=4):
    from transformers import LlamaConfig, LlamaForCausalLM

    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 1, "width": 32, "heads": 2, "mlp": 64, "vocab": 128, "batch": 2, "seq": 16,
                           "accum": 2}
    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
                      num_key_value_heads=s["heads"], intermediate_size=s["mlp"], vocab_size=s["vocab"],
                      max_position_embeddings=s["seq"], attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(pool)]
    on_host = variant == "before"
    st = {"i": 0, "running": 0.0 if on_host else torch.zeros((), device=device)}

    def step():
        opt.zero_grad(set_to_none=True)
        for _ in range(s["accum"]):
            i = st["i"] = st["i"] + 1
            ids = batches[i % pool]
            with autocast(device):
                loss = model(input_ids=ids, labels=ids).loss / s["accum"]
            loss.backward()
            st["running"] += loss.item() if on_host else loss.detach()
        opt.step()
    return Step(step, info={**s, "loss_on_host": on_host,
                            "params": sum(p.numel() for p in model.parameters())})
