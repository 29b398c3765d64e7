"""holdout24_layout_resnet_fp32: the bottleneck ResNet trained in fp32 on TF32, NCHW -> channels_last.

Twenty-fourth held-out set (pre-registered 2026-11-29 before it was recorded, after the twenty-third set taught
layout_permute PyTorch's own NCHW batch norm kernels at 0.42x in channels_last, fitted on one bf16 program):
the same kind of net in fp32 with TF32 allowed (torch.set_float32_matmul_precision("high"), cuDNN's TF32 on
by default), whose batch norm is PyTorch's fp32 kernels and whose tensor-core convolutions want NHWC.
before: holdout23_layout_resnet_bf16's net (widths 48/96/192 x4, 2 blocks a stage), batch 48 of 3x176x176,
        fp32 + TF32, cudnn.benchmark off, SGD momentum; model and input NCHW (contiguous).
after:  model and input in torch.channels_last.
after_graph_only: NCHW as before, the whole step captured in one CUDA graph.
"""

import torch
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step
from .holdout23_layout_resnet_bf16 import resnet

NAME = "holdout24_layout_resnet_fp32"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "convert model and input to torch.channels_last (NHWC)"
DESCRIPTION = {
    "before": "bottleneck ResNet (widths 48/96/192 x4), batch 48, 176x176, fp32 with TF32, NCHW, SGD momentum",
    "after": "same, model and input in torch.channels_last",
    "after_graph_only": "same as before (NCHW), the whole step in one CUDA graph",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, hw = (48, 176) if cuda else (2, 32)
    prev = torch.backends.cudnn.benchmark, torch.get_float32_matmul_precision()
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("high")
    torch.manual_seed(0)
    fmt = torch.channels_last if variant == "after" else torch.contiguous_format
    model = resnet(widths=(48, 96, 192)).to(device).to(memory_format=fmt)
    xs = [torch.randn(batch, 3, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    ys = [torch.randint(0, 100, (batch,), device=device) for _ in range(pool)]
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    st = {"i": 0}

    def close():
        torch.backends.cudnn.benchmark = prev[0]
        torch.set_float32_matmul_precision(prev[1])
    if variant == "after_graph_only" and cuda:
        sx, sy = xs[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            F.cross_entropy(model(sx), sy).backward()
            opt.step()
        return Step(replay_step(capture_graph(body, warmup=3), [(sx, xs), (sy, ys)]), close=close,
                    info={"batch": batch, "memory_format": str(fmt), "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xs[i % pool]), ys[i % pool]).backward()
        opt.step()
    return Step(step, close=close, info={"batch": batch, "memory_format": str(fmt), "tf32": True})
