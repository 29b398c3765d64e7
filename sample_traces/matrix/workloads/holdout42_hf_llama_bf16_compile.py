"""holdout42_hf_llama_bf16_compile: a Hugging Face Llama trained eagerly in bf16 -> the model under torch.compile.

Forty-second held-out set (pre-registered 2026-12-04 before it was recorded; see holdout42_hf_llama_loss_item_accum).
Model: transformers' LlamaForCausalLM built from a config (no weights downloaded): 6 layers, width 1024, 16 heads,
MLP 2816, vocabulary 16384, SDPA attention; bf16 autocast, fused AdamW, batch 8 x 512 tokens from a pool of GPU
batches, its own loss (labels=input_ids). Eager, its RMSNorm, rotary embedding and SwiGLU run as separate
elementwise kernels.
before: eager.
after:  the model under torch.compile (default mode: Inductor's fused Triton kernels, no CUDA graphs).
"""

import torch

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout42_hf_llama_bf16_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile(model) (default mode)"
SIZE = {"layers": 6, "width": 1024, "heads": 16, "mlp": 2816, "vocab": 16384, "batch": 8, "seq": 512}
DESCRIPTION = {
    "before": "transformers LlamaForCausalLM (6 x 1024, from a config), batch 8 x 512, bf16 autocast, fused AdamW, "
              "eager",
    "after": "same, the model under torch.compile (default mode)",
}
WARMUP_STEPS = 8      # (after compiles in the first of them)


def make(variant, device, pool=2):
    from transformers import LlamaConfig, LlamaForCausalLM

    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 1, "width": 32, "heads": 2, "mlp": 64, "vocab": 128, "batch": 2, "seq": 16}
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
                      num_key_value_heads=s["heads"], intermediate_size=s["mlp"], vocab_size=s["vocab"],
                      max_position_embeddings=s["seq"], attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to(device).train()
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
