"""holdout51_anomaly_convnet_train: a ResNet-ish conv net trained with autograd's anomaly detection left on
(`torch.autograd.set_detect_anomaly(True)`) -> off. A GPU-heavier step than the tagger's: the anomaly checks' syncs
come after kernels of 0.1-1 ms.

Fifty-first held-out set (registered before it was recorded; see the matrix README). Model: the matrix's conv net
(layout_nchw_fp16.make_model: basic blocks 64/128 ch), batch 128 of 3 x 56 x 56 already on the GPU (two batches in
turn), bf16 autocast, channels_last, fused SGD(momentum).
"""

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._anomaly import anomaly
from ._util import Step, autocast, is_cuda

NAME = "holdout51_anomaly_convnet_train"
EXPECTED_KIND = "anomaly_detection"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.autograd.set_detect_anomaly(False) (anomaly detection off), nothing else"
DESCRIPTION = {
    "before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 128, 56x56, bf16 autocast, channels_last, fused "
               "SGD(momentum), torch.autograd.set_detect_anomaly(True)"),
    "after": "same, anomaly detection off",
}


def make(variant, device, batch=128):
    cuda = is_cuda(device)
    batch, hw = (batch, 56) if cuda else (2, 16)
    restore = anomaly(variant == "before")
    torch.manual_seed(0)
    model = make_model(64).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(batch, 3, hw, hw, generator=g).to(device).contiguous(memory_format=torch.channels_last)
          for _ in range(2)]
    ys = [torch.randint(0, 100, (batch,), generator=g).to(device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % 2])
        F.cross_entropy(out.float(), ys[i % 2]).backward()
        opt.step()
    return Step(step, close=restore, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "amp": "bf16",
                                           "detect_anomaly": variant == "before"})
