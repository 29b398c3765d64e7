"""holdout52_ckpt_convnet_train: a ResNet-ish conv net trained through
`torch.utils.checkpoint.checkpoint_sequential(model, 4, x, use_reentrant=True)` (the older, re-entrant checkpoint; the
input made to require grad, as users do so that the first segment's weights get gradients) -> the model called
directly.

Fifty-second held-out set (registered before it was recorded; see the matrix README). Re-entrant checkpointing runs
each checkpointed segment's forward again inside its backward node (CheckpointFunctionBackward), then a backward of
its own: the first three of the four segments' convolutions, batch norms and ReLUs run twice a step. Model: the
matrix's conv net (layout_nchw_fp16.make_model: basic blocks 64/128 ch, 10 modules), batch 128 of 3 x 56 x 56 already
on the GPU (two batches in turn), bf16 autocast, channels_last, fused SGD(momentum); the stem's ReLU not in place in
both variants (a segment starts there, and an in-place op on a re-entrant checkpoint's input is an error).
"""

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, autocast, is_cuda

NAME = "holdout52_ckpt_convnet_train"
EXPECTED_KIND = "activation_checkpointing"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "checkpoint_sequential dropped (the model called directly), nothing else"
DESCRIPTION = {
    "before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 128, 56x56, bf16 autocast, channels_last, fused "
               "SGD(momentum), through checkpoint_sequential(model, 4, x, use_reentrant=True)"),
    "after": "same, the model called directly",
}


def make(variant, device, batch=128):
    cuda = is_cuda(device)
    batch, hw = (batch, 56) if cuda else (2, 16)
    torch.manual_seed(0)
    model = make_model(64).to(device).to(memory_format=torch.channels_last)
    model[2].inplace = False    # (a segment starts at this ReLU: in place on its re-entrant input is an error)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(batch, 3, hw, hw, generator=g).to(device).contiguous(memory_format=torch.channels_last)
          .requires_grad_(variant == "before") for _ in range(2)]
    ys = [torch.randint(0, 100, (batch,), generator=g).to(device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            x = xs[i % 2]
            out = checkpoint_sequential(model, 4, x, use_reentrant=True) if variant == "before" else model(x)
        F.cross_entropy(out.float(), ys[i % 2]).backward()
        opt.step()
    return Step(step, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "amp": "bf16",
                            "checkpointing": variant == "before"})
