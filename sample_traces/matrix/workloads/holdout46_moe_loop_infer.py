"""holdout46_moe_loop_infer: the MoE transformer of holdout46_moe_loop_train scoring batches in inference (a
forward and a per-sequence log-likelihood, no backward), with the per-expert nonzero loop -> the fixed-capacity
dispatch.

Forty-sixth held-out set (registered before it was recorded; see the matrix README). Model as
holdout46_moe_loop_train, bf16 weights, eval, inference_mode; batch 4 x 128 tokens.
before: per expert, (topk_idx == e).nonzero(as_tuple=True) (32 syncs a forward).
after:  the fixed-capacity dispatch (no sync).
"""

import torch
import torch.nn.functional as F

from ._util import Step, is_cuda
from .holdout46_moe_loop_train import SIZE as TRAIN_SIZE
from .holdout46_moe_loop_train import make_model, sizes

NAME = "holdout46_moe_loop_infer"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = ("a fixed-capacity dispatch (cumsum slots, two torch.bmm) instead of a loop over experts with "
       "(idx == e).nonzero()")
SIZE = {**TRAIN_SIZE, "batch": 4, "seq": 128}
DESCRIPTION = {
    "before": ("MoE transformer (4 x 512, 8 heads, 8 experts top-2), bf16, inference_mode, batch 4 x 128, per-"
               "sequence log-likelihood; experts dispatched in a loop with (idx == e).nonzero() (a sync per expert)"),
    "after": "same, a fixed-capacity dispatch (no sync)",
}


def make(variant, device):
    s = sizes(device, SIZE)
    model = make_model(s, variant, device).eval()
    if is_cuda(device):
        model = model.to(torch.bfloat16)
    g = torch.Generator().manual_seed(1)
    toks = [torch.randint(0, s["vocab"], (s["batch"], s["seq"] + 1), generator=g).to(device) for _ in range(2)]
    st = {"i": 0, "out": None}

    def step():
        i = st["i"] = st["i"] + 1
        t = toks[i % 2]
        with torch.inference_mode():
            logp = model(t[:, :-1]).float().log_softmax(-1)
            st["out"] = logp.gather(-1, t[:, 1:, None]).squeeze(-1).sum(-1)
    return Step(step, info={"tokens": s["batch"] * s["seq"]})
