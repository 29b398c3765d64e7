"""holdout28_ema_averaged_model: torch.optim.swa_utils.AveragedModel with a per-tensor avg_fn -> multi_avg_fn.

Twenty-eighth held-out set (pre-registered 2026-11-29 before it was recorded, right after unfused_optimizer
learnt per-tensor update loops after the optimizer step from the twenty-seventh set's timm-style EMA): the
same class written the way PyTorch's own API allows, on a program unlike the one it was found on. AveragedModel
with ``avg_fn=get_ema_avg_fn(decay)`` walks parameters and buffers (use_buffers=True) one tensor at a time
(``p_averaged.copy_(decay * p_averaged + (1 - decay) * p_model)``); with ``multi_avg_fn=get_ema_multi_avg_fn``
it updates them in multi-tensor kernels. Its n_averaged counter lives on the GPU (device=cuda), so each
update_parameters() also reads it twice on the host (two syncs a step, in both variants).
Model: the twenty-third set's bottleneck ResNet (stem + 3 stages x 2 bottlenecks, widths 64/128/256 x4, BN after
each conv; about 130 parameter and buffer tensors), channels_last, batch 64 of 3x160x160, bf16 autocast, SGD
momentum (foreach), cudnn.benchmark off.
before: AveragedModel(model, device, avg_fn=get_ema_avg_fn(0.999), use_buffers=True).update_parameters(model)
        after every optimizer step.
after:  AveragedModel(model, device, multi_avg_fn=get_ema_multi_avg_fn(0.999), use_buffers=True).
"""

import torch
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn

from ._util import Step, autocast, is_cuda
from .holdout23_layout_resnet_bf16 import resnet

NAME = "holdout28_ema_averaged_model"
EXPECTED_KIND = "unfused_optimizer"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "AveragedModel(..., multi_avg_fn=get_ema_multi_avg_fn(decay)) in place of avg_fn=get_ema_avg_fn(decay)"
DESCRIPTION = {
    "before": ("bottleneck ResNet (3 stages x 2, widths 64/128/256 x4), channels_last, batch 64, 160x160, bf16 "
               "autocast, SGD momentum; AveragedModel(avg_fn=get_ema_avg_fn(0.999), use_buffers=True) each step"),
    "after": "same step; AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(0.999), use_buffers=True)",
}
DECAY = 0.999


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, hw = (64, 160) if cuda else (2, 32)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    fmt = torch.channels_last
    model = resnet().to(device).to(memory_format=fmt)
    kw = ({"multi_avg_fn": get_ema_multi_avg_fn(DECAY)} if variant == "after"
          else {"avg_fn": get_ema_avg_fn(DECAY)})
    ema = AveragedModel(model, device=device, use_buffers=True, **kw)
    xs = [torch.randn(batch, 3, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    ys = [torch.randint(0, 100, (batch,), device=device) for _ in range(pool)]
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % pool])
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
        ema.update_parameters(model)

    def close():
        torch.backends.cudnn.benchmark = prev_bench
    tensors = len(list(model.parameters())) + len(list(model.buffers()))
    return Step(step, close=close, info={"batch": batch, "ema_tensors": tensors,
                                         "ema": "multi_avg_fn" if variant == "after" else "avg_fn (per tensor)"})
