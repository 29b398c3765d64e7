"""holdout52_ckpt_eval_healthy: the checkpointed tagger of holdout52_ckpt_tagger_train evaluated under torch.no_grad()
(an eval loop in the same script: checkpointing is left on in the model, and does nothing without a backward pass).

Fifty-second held-out set (registered before it was recorded; see the matrix README): the control. No forward is run
twice, so no finding may claim recomputation; the step is GPU-bound. Model: the tagger at 6 layers of 768, 12 heads,
vocabulary 8000, every layer under torch.utils.checkpoint (use_reentrant=False); bf16 autocast; batch 32 x 512 tokens
already on the GPU (two batches in turn); each step the logits' argmax accuracy summed on the GPU (no read to the host).
"""

import torch

from ._ckpt import CkptTagger
from ._util import Step, autocast, is_cuda

NAME = "holdout52_ckpt_eval_healthy"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"batch": 32, "seq": 512, "vocab": 8000, "dim": 768, "heads": 12, "layers": 6}
DESCRIPTION = {
    "before": ("transformer tagger (6 x 768, 12 heads, vocabulary 8000) evaluated under torch.no_grad(), batch 32 x "
               "512, bf16 autocast, every layer under torch.utils.checkpoint (use_reentrant=False), accuracy kept on "
               "the GPU"),
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 3, "seq": 16, "vocab": 50, "dim": 16, "heads": 2, "layers": 2}
    torch.manual_seed(0)
    model = CkptTagger(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"], ckpt=True).to(device).eval()
    g = torch.Generator().manual_seed(1)
    xs = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    ys = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    correct = torch.zeros((), dtype=torch.long, device=device)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad(), autocast(device):
            logits = model(xs[i % 2])
            correct.add_((logits.argmax(-1) == ys[i % 2]).sum())
    return Step(step, info={"batch": s["batch"], "seq": s["seq"], "amp": "bf16", "checkpointing": True,
                            "no_grad": True})
