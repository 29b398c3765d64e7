"""holdout21_fp32_convnet_notf32: an fp32 conv net trained with cuDNN's TF32 turned off -> TF32 on.

Twenty-first held-out set, written after fp32_matmul learned cuDNN's FP32 convolution kernels (`scudnn`,
and the `f32f32` implicit GEMMs) and the fp16-only advice for Volta/Turing. A user who set
`torch.backends.cudnn.allow_tf32 = False` (and the matmul precision "highest") for reproducibility:
every convolution runs in plain FP32. The model of holdout10_healthy_fp32_convnet (ResNet-ish basic
blocks, 64/128 ch), batch 128, 56x56, fp32, channels_last, cudnn.benchmark on, fused SGD(momentum).
before: cudnn.allow_tf32 = False, set_float32_matmul_precision("highest").
after:  cudnn.allow_tf32 = True (PyTorch's default), set_float32_matmul_precision("high").
"""

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, is_cuda

NAME = "holdout21_fp32_convnet_notf32"
EXPECTED_KIND = "fp32_matmul"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.backends.cudnn.allow_tf32 = True and set_float32_matmul_precision("high") (TF32); model stays fp32'
DESCRIPTION = {
    "before": ("ResNet-ish conv net (basic blocks 64/128 ch), batch 128, 56x56, fp32, channels_last, "
               "cudnn.benchmark, fused SGD(momentum), cudnn.allow_tf32=False, matmul precision highest"),
    "after": "same, cudnn.allow_tf32=True, matmul precision high",
}


def make(variant, device, pool=2):
    cuda = is_cuda(device)
    batch, hw = (128, 56) if cuda else (2, 16)
    prev = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = variant != "before"
    torch.set_float32_matmul_precision("highest" if variant == "before" else "high")
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
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = prev[0], prev[1]
        torch.set_float32_matmul_precision(prev[2])
    return Step(step, close=close, info={"batch": batch, "hw": hw, "memory_format": "channels_last", "dtype": "fp32",
                                         "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                                         "matmul_precision": torch.get_float32_matmul_precision()})
