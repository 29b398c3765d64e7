"""holdout8_layout_vgg_fp16: a VGG-style conv net in fp16 autocast, NCHW -> channels_last.

Eighth held-out set (layout and fp32 had no held-out workload before): plain 3x3 conv stacks (96, 192,
384 channels) with BatchNorm and ReLU, two max-pools, batch 128 of 32x32 images, cudnn.benchmark off,
SGD(momentum). Different channel counts, image size and depth from layout_nchw_fp16 (a ResNet-ish net).
before: model and input NCHW (contiguous).
after:  model and input in torch.channels_last.
after_graph_only: NCHW as before, the whole step captured in one CUDA graph (added after the held-out run:
        channels_last measured slower, 0.79-0.86x, and the tool ranked launch_overhead first on all four
        rows; committed before it is recorded).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout8_layout_vgg_fp16"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "convert model and input to torch.channels_last (NHWC)"
DESCRIPTION = {
    "before": "VGG-style 6 conv3x3+BN+ReLU (96/192/384 ch), batch 128, 32x32, fp16 autocast, NCHW, SGD",
    "after": "same, model and input in torch.channels_last",
    "after_graph_only": "same as before (NCHW), the whole step in one CUDA graph",
}


def _stage(cin, cout):
    return [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, hw = (128, 32) if cuda else (2, 8)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    model = nn.Sequential(*_stage(3, 96), nn.MaxPool2d(2), *_stage(96, 192), nn.MaxPool2d(2), *_stage(192, 384),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(384, 10)).to(device)
    fmt = torch.channels_last if variant == "after" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    xs = [torch.randn(batch, 3, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    ys = [torch.randint(0, 10, (batch,), device=device) for _ in range(pool)]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    dtype = torch.float16 if cuda else torch.bfloat16
    st = {"i": 0}

    def close():
        torch.backends.cudnn.benchmark = prev_bench
    if variant == "after_graph_only" and cuda:
        sx, sy = xs[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=dtype, cache_enabled=False):
                out = model(sx)
            F.cross_entropy(out.float(), sy).backward()
            opt.step()       # SGD keeps no step count on the CPU: captured as it is
        g = capture_graph(body, warmup=3)
        return Step(replay_step(g, [(sx, xs), (sy, ys)]), close=close,
                    info={"batch": batch, "memory_format": str(fmt), "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype):
            out = model(xs[i % pool])
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, close=close, info={"batch": batch, "memory_format": str(fmt)})
