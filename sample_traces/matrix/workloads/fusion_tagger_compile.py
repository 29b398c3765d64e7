"""fusion_tagger_compile: the healthy-role tagger of the forty-eighth set (holdout48_seq_loss_healthy: a transformer
token tagger, 4 x 512, 8 heads, vocabulary 4000, batch 128 x 128, bf16 autocast, fused AdamW, the loss one
cross_entropy over the padded batch in fp32) -> the model and the loss under torch.compile (default mode: Inductor's
fused Triton kernels, no CUDA graphs).

Not held out: a fix the tool ranked first and nobody had measured. On the forty-eighth set's recordings (H100,
h100_clean55A-D) traceinsight ranked fusion_candidates first on this step (about 23% of it: the weights' bf16 casts,
the fp32 loss over 16,384 x 4,000 logits, the layer norms' and residuals' elementwise kernels), where the set had
registered it healthy; this pair measures whether a compiler's fusion buys that.
"""

import torch

from ._util import Step, autocast, cpu_mode, is_cuda
from .holdout48_per_seq_loss_train import Tagger, batches, loss_batch, sizes
from .holdout48_seq_loss_healthy import SIZE

NAME = "fusion_tagger_compile"
EXPECTED_KIND = "fusion_candidates"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.compile on the model and the loss (default mode)"
WARMUP_STEPS = 8      # (after compiles in the first of them)
DESCRIPTION = {
    "before": ("transformer tagger (4 x 512, 8 heads, vocabulary 4000), batch 128 x 128, bf16 autocast, fused AdamW, "
               "the loss one fp32 cross_entropy over the padded batch; eager"),
    "after": "same, the model and the loss under torch.compile (default mode)",
}


def make(variant, device, pool=2):
    s = sizes(device, SIZE)
    cuda = is_cuda(device)
    compiled = variant == "after" and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    model = Tagger(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    fwd = torch.compile(model) if compiled else model
    loss_fn = torch.compile(loss_batch) if compiled else loss_batch
    b, t = s["batch"], s["seq"]
    xs, ys, _lens, weights = batches(s, device, pool)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = fwd(xs[i % pool])
        loss_fn(logits, ys[i % pool], weights[i % pool]).backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": b, "seq": t, "compiled": compiled})
