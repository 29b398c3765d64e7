"""holdout23_layout_eval_fp16: inference of the bottleneck ResNet in fp16, NCHW -> channels_last.

Twenty-third held-out set (pre-registered 2026-11-29 before it was recorded): the first layout program that
only runs forward, so batch norm runs cuDNN's inference kernels (bn_fw_inf_*), which the layout fit never saw,
and there is no backward. The model of holdout23_layout_resnet_bf16 in eval mode under torch.inference_mode,
fp16 autocast, batch 128 of 3x160x160, cudnn.benchmark off; the logits' argmax stays on the GPU (no sync).
before: model and input NCHW (contiguous).
after:  model and input in torch.channels_last.
"""

import torch

from ._util import Step, is_cuda
from .holdout23_layout_resnet_bf16 import resnet

NAME = "holdout23_layout_eval_fp16"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "convert model and input to torch.channels_last (NHWC)"
DESCRIPTION = {
    "before": "bottleneck ResNet (as holdout23_layout_resnet_bf16), eval, inference_mode, fp16 autocast, batch 128, "
              "160x160, NCHW",
    "after": "same, model and input in torch.channels_last",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, hw = (128, 160) if cuda else (2, 32)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    fmt = torch.channels_last if variant == "after" else torch.contiguous_format
    model = resnet().to(device).to(memory_format=fmt).eval()
    xs = [torch.randn(batch, 3, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    dtype = torch.float16 if cuda else torch.bfloat16
    st = {"i": 0, "pred": None}

    def close():
        torch.backends.cudnn.benchmark = prev_bench

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode(), torch.autocast(device_type=torch.device(device).type, dtype=dtype):
            st["pred"] = model(xs[i % pool]).argmax(1)
    return Step(step, close=close, info={"batch": batch, "memory_format": str(fmt), "inference": True})
