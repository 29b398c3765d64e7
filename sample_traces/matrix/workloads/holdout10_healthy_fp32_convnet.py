"""holdout10_healthy_fp32_convnet: a GPU-bound conv net trained in fp32 (no autocast): healthy.

Tenth held-out set, a trap for the precision finding: cuDNN runs fp32 convolutions on TF32 tensor cores
by default (torch.backends.cudnn.allow_tf32 is True, unlike matmuls), so there is no fp32 matmul fix to
offer, and the GPU is busy: the tool must call it healthy (judged, as every healthy row, by the
measured un-profiled idle). ResNet-ish basic blocks (64/128 ch, the healthy_convnet model), batch 128,
56x56, fp32, channels_last, cudnn.benchmark on, fused SGD(momentum).
"""

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, is_cuda

NAME = "holdout10_healthy_fp32_convnet"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 128, 56x56, fp32 (cuDNN TF32 "
                          "default), channels_last, cudnn.benchmark, fused SGD(momentum)")}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    batch, hw = (128, 56) if cuda else (2, 16)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = make_model(64).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    xs = [torch.randn(batch, 3, hw, hw, device=device).contiguous(memory_format=torch.channels_last)
          for _ in range(pool)]
    ys = [torch.randint(0, 100, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        out = model(xs[i % pool])
        F.cross_entropy(out, ys[i % pool]).backward()
        opt.step()

    def close():
        torch.backends.cudnn.benchmark = prev_bench
    return Step(step, close=close, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "dtype": "fp32",
                                         "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32})
