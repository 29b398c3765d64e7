"""holdout20_layout_unet_fp16: a small U-Net in fp16 autocast, NCHW -> channels_last.

Twentieth held-out set (written after the likely range was refitted on every clean set with its coverage
cross-validated by program; pre-registered before it was recorded): a third layout program, an
encoder-decoder with strided downsampling, transposed-conv upsampling and skip concatenations at 128x128,
larger feature maps than the VGG-style net (32x32) whose channels_last measured slower.
before: U-Net, channels 32/64/128 (two conv3x3+BN+ReLU per level, stride-2 conv down, ConvTranspose2d up,
        skips concatenated), batch 16 of 3x128x128, fp16 autocast, cudnn.benchmark off, MSE to a 1-channel
        target, fused Adam; model and input NCHW (contiguous).
after:  model and input in torch.channels_last.
after_graph_only: NCHW as before, the whole step captured in one CUDA graph (written with the set, so that
        a launch_overhead ranked above the layout fix is checked against a measurement).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "holdout20_layout_unet_fp16"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "convert model and input to torch.channels_last (NHWC)"
DESCRIPTION = {
    "before": ("U-Net 32/64/128 ch (conv3x3+BN+ReLU x2 per level, strided down, ConvTranspose2d up, skips), "
               "batch 16, 128x128, fp16 autocast, NCHW, fused Adam"),
    "after": "same, model and input in torch.channels_last",
    "after_graph_only": "same as before (NCHW), the whole step in one CUDA graph",
}


def _block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, c=(32, 64, 128)):
        super().__init__()
        self.enc = nn.ModuleList([_block(3, c[0]), _block(c[0], c[1]), _block(c[1], c[2])])
        self.down = nn.ModuleList([nn.Conv2d(c[0], c[0], 3, 2, 1), nn.Conv2d(c[1], c[1], 3, 2, 1)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c[2], c[1], 2, 2), nn.ConvTranspose2d(c[1], c[0], 2, 2)])
        self.dec = nn.ModuleList([_block(2 * c[1], c[1]), _block(2 * c[0], c[0])])
        self.head = nn.Conv2d(c[0], 1, 1)

    def forward(self, x):
        e0 = self.enc[0](x)
        e1 = self.enc[1](self.down[0](e0))
        e2 = self.enc[2](self.down[1](e1))
        d1 = self.dec[0](torch.cat([self.up[0](e2), e1], 1))
        d0 = self.dec[1](torch.cat([self.up[1](d1), e0], 1))
        return self.head(d0)


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, hw = (16, 128) if cuda else (2, 16)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    fmt = torch.channels_last if variant == "after" else torch.contiguous_format
    model = UNet().to(device).to(memory_format=fmt)
    xs = [torch.randn(batch, 3, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    ys = [torch.randn(batch, 1, hw, hw, device=device).to(memory_format=fmt) for _ in range(pool)]
    graph = variant == "after_graph_only" and cuda
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True if cuda else None,
                           **({"capturable": True} if graph else {}))
    dtype = torch.float16 if cuda else torch.bfloat16
    st = {"i": 0}

    def close():
        torch.backends.cudnn.benchmark = prev_bench
    if graph:
        sx, sy = xs[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=dtype, cache_enabled=False):
                out = model(sx)
            F.mse_loss(out.float(), sy).backward()
            opt.step()
        g = capture_graph(body, warmup=3)
        return Step(replay_step(g, [(sx, xs), (sy, ys)]), close=close,
                    info={"batch": batch, "memory_format": str(fmt), "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype):
            out = model(xs[i % pool])
        F.mse_loss(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, close=close, info={"batch": batch, "memory_format": str(fmt)})
