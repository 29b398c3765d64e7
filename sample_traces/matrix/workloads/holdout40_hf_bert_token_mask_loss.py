"""holdout40_hf_bert_token_mask_loss: a Hugging Face BERT token classifier whose loss indexes by a boolean mask
-> ignore_index.

Fortieth held-out set (pre-registered 2026-12-03 before it was recorded; see holdout40_hf_gpt2_unfused_adamw).
Model: transformers' BertModel built from a config (6 layers, width 512, 8 heads, FFN 2048, vocabulary 16384) with
a linear token head of 64 tags; padded batches of 32 x 256 tokens (20% padding at the end of each sequence) with
their attention_mask given to the model, as a data collator gives them; bf16 autocast, fused AdamW.
before: the loss of older token-classification examples: active = attention_mask.view(-1) == 1, then
        cross_entropy(logits.view(-1, T)[active], labels.view(-1)[active]): the boolean index runs nonzero (a sync)
        and an index backward.
after:  labels set to -100 at the padding (once, with the batch), cross_entropy(..., ignore_index=-100) on the full
        tensors. Whatever the library does with the attention mask is the same in both.
after_graph (added once the set was read, 2026-12-03: the tool's top finding on all 8 before traces was
        launch_overhead, unmeasured, after the sync as its prerequisite; the sync fix alone measured 0.93-1.09x):
        after, with the model and loss under torch.compile(backend="cudagraphs"), CUDA graphs without Inductor's
        fusion (the library's own mask check, `padding_mask.all()`, still syncs between two graphs), to measure it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout40_hf_bert_token_mask_loss"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "cross_entropy(..., ignore_index=-100) on the full tensors instead of boolean-mask indexing"
SIZE = {"layers": 6, "width": 512, "heads": 8, "ffn": 2048, "vocab": 16384, "tags": 64, "batch": 32, "seq": 256}
DESCRIPTION = {
    "before": "transformers BertModel (6 x 512, from a config) + token head, batch 32 x 256 with 20% padding and "
              "its attention_mask, bf16, loss on logits[attention_mask == 1] (nonzero sync)",
    "after": "same, padding labelled -100 and ignore_index (no sync)",
    "after_graph": 'after, the model and loss under torch.compile(backend="cudagraphs") (no fusion)',
}
WARMUP_STEPS = 8


class Tagger(nn.Module):
    def __init__(self, s):
        super().__init__()
        from transformers import BertConfig, BertModel

        cfg = BertConfig(num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
                         intermediate_size=s["ffn"], vocab_size=s["vocab"], max_position_embeddings=s["seq"])
        self.bert = BertModel(cfg, add_pooling_layer=False)
        self.head = nn.Linear(s["width"], s["tags"])

    def forward(self, ids, mask):
        return self.head(self.bert(input_ids=ids, attention_mask=mask).last_hidden_state)


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    s = SIZE if cuda else {"layers": 2, "width": 32, "heads": 2, "ffn": 64, "vocab": 128, "tags": 8, "batch": 2,
                           "seq": 16}
    torch.manual_seed(0)
    model = Tagger(s).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(0)
    b, t, k = s["batch"], s["seq"], s["tags"]
    lengths = (t - (0.4 * t * torch.rand(b, generator=g)).long())          # 0-40% padding, 20% on average
    masks = [(torch.arange(t)[None, :] < lengths[:, None]).long().to(device) for _ in range(pool)]
    ids = [torch.randint(0, s["vocab"], (b, t), generator=g).to(device) * m for m in masks]
    tags = [torch.randint(0, k, (b, t), generator=g).to(device) for _ in range(pool)]
    ignored = [torch.where(m == 1, y, torch.full_like(y, -100)) for m, y in zip(masks, tags)]
    st = {"i": 0}

    def loss_fn(x, m, y):
        with autocast(device):
            logits = model(x, m)
        if variant == "before":
            active = m.view(-1) == 1
            return F.cross_entropy(logits.float().view(-1, k)[active], y.view(-1)[active])
        return F.cross_entropy(logits.float().view(-1, k), y.view(-1), ignore_index=-100)
    graphed = variant == "after_graph" and not cpu_mode()
    if graphed:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn, backend="cudagraphs")

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        j = i % pool
        loss_fn(ids[j], masks[j], (tags if variant == "before" else ignored)[j]).backward()
        opt.step()

    def close():
        if graphed:
            torch._dynamo.reset()
    return Step(step, close=close, info={**s, "cudagraphs_backend": graphed})
