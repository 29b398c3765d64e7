"""healthy_convnet: GPU-bound bf16 channels_last ResNet-ish conv net training step.

The model of sample_traces/workloads/layout_nchw_fp16.py (basic blocks, 64/128 ch) at batch 256,
56x56, bf16 autocast, channels_last model and input, SGD(momentum, fused): the GPU work per step
is several times the host enqueue time.
"""

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, autocast, is_cuda

NAME = "healthy_convnet"
EXPECTED_KIND = "healthy"
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
DESCRIPTION = {"before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 256, 56x56, bf16 autocast, "
                          "channels_last, fused SGD(momentum)")}


def make(variant, device, pool=2, batch=256):
    cuda = is_cuda(device)
    batch, hw = (batch, 56) if cuda else (2, 16)
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
        with autocast(device):
            out = model(xs[i % pool])
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "amp": "bf16"})
