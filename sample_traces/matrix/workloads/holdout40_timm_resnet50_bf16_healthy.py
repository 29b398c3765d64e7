"""holdout40_timm_resnet50_bf16_healthy: a timm ResNet-50 trained the way its docs advise: must be called healthy.

Fortieth held-out set (pre-registered 2026-12-03 before it was recorded; see holdout40_hf_gpt2_unfused_adamw).
Model: timm's resnet50 built without weights, channels_last, bf16 autocast, batch 128 images 224 x 224 from a pool
of GPU batches, cross entropy, SGD with momentum (foreach, PyTorch's default); GPU-bound: the GPU's work per step
is several times the host's.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda

NAME = "holdout40_timm_resnet50_bf16_healthy"
EXPECTED_KIND = None
ROLE = "healthy"
VARIANTS = ("before",)
FIX = None
SIZE = {"model": "resnet50", "batch": 128, "img": 224}
DESCRIPTION = {"before": "timm resnet50 (no weights), channels_last, bf16 autocast, batch 128, SGD momentum"}
WARMUP_STEPS = 8


def make(variant, device, pool=2):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "resnet18", "batch": 2, "img": 32}
    torch.manual_seed(0)
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000).to(device)
    model = model.to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s["batch"], 3, s["img"], s["img"], generator=g).to(device)
          .contiguous(memory_format=torch.channels_last) for _ in range(pool)]
    ys = [torch.randint(0, 1000, (s["batch"],), generator=g).to(device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(xs[i % pool])
        F.cross_entropy(out.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, info=s)
