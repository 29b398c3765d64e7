"""holdout43_hf_bert_tagger_compile: a Hugging Face BERT token tagger trained eagerly in bf16 -> the model under
torch.compile.

Forty-third held-out set (pre-registered 2026-12-04 before it was recorded; see holdout43_hf_gpt2_small_compile).
Model: transformers' BertModel built from a config (no weights downloaded): 4 layers, width 384, 6 heads, FFN 1536,
vocabulary 8192, plus a linear head of 32 tags; no padding and no attention mask; bf16 autocast, fused AdamW, batch
16 x 128 from a pool of GPU batches; the loss (cross-entropy over every token) computed eagerly outside the model.
before: eager.
after:  the model (not the loss) under torch.compile (default mode: Inductor's fused Triton kernels, no CUDA graphs).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout43_hf_bert_tagger_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile(model) (default mode)"
SIZE = {"layers": 4, "width": 384, "heads": 6, "ffn": 1536, "vocab": 8192, "tags": 32, "batch": 16, "seq": 128}
DESCRIPTION = {
    "before": "transformers BertModel (4 x 384, from a config) + token head, batch 16 x 128, no padding, bf16 "
              "autocast, fused AdamW, eager cross-entropy, eager",
    "after": "same, the model (not the loss) under torch.compile (default mode)",
}
WARMUP_STEPS = 8      # (after compiles in the first of them)


class Tagger(nn.Module):
    def __init__(self, s):
        super().__init__()
        from transformers import BertConfig, BertModel

        cfg = BertConfig(num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
                         intermediate_size=s["ffn"], vocab_size=s["vocab"], max_position_embeddings=s["seq"])
        self.bert = BertModel(cfg, add_pooling_layer=False)
        self.head = nn.Linear(s["width"], s["tags"])

    def forward(self, ids):
        return self.head(self.bert(input_ids=ids).last_hidden_state)


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 1, "width": 32, "heads": 2, "ffn": 64, "vocab": 128, "tags": 8, "batch": 2,
                           "seq": 16}
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    model = Tagger(s).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(0)
    b, t, k = s["batch"], s["seq"], s["tags"]
    ids = [torch.randint(0, s["vocab"], (b, t), generator=g).to(device) for _ in range(pool)]
    tags = [torch.randint(0, k, (b, t), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = fwd(ids[i % pool])
        loss = F.cross_entropy(logits.float().view(-1, k), tags[i % pool].view(-1))
        loss.backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={**s, "compiled": compiled,
                                         "params": sum(p.numel() for p in model.parameters())})
