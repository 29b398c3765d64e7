"""Memory-layout conversions: an fp16 conv net run in NCHW (contiguous) format.

Tensor-core convolutions in cuDNN work on NHWC; with NCHW fp16 tensors cuDNN often
converts layouts around each convolution (kernels such as ``nchwToNhwcKernel`` /
``nhwcToNchwKernel``), which costs memory bandwidth and extra launches.

before: ResNet-ish basic blocks, fp16 autocast, NCHW model and input.
after:  the same model and input converted to ``torch.channels_last``.

``prepare()`` probes a few configurations (cudnn.benchmark on/off, fp16 vs bf16,
autocast vs .half(), channel count) and keeps the first one whose NCHW trace shows
layout-conversion kernels; the probe table goes into the manifest.
"""

import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Step, is_cuda, trace_stats

NAME = "layout_nchw_fp16"
EXPECTED_KIND = "layout_permute"
WITH_STACK = False
VARIANTS = ("before", "after")
FIX = "convert model and input to torch.channels_last (NHWC)"
DESCRIPTION = {
    "before": "ResNet-ish conv net (basic blocks, 64/128 ch), batch 128, 56x56, fp16, NCHW, SGD training step",
    "after": "same model/config with model and input in torch.channels_last",
}

CONFIGS = [
    dict(id="A", amp="fp16_autocast", benchmark=False, ch=64),
    dict(id="B", amp="fp16_autocast", benchmark=True, ch=64),
    dict(id="C", amp="fp16_half", benchmark=False, ch=64),
    dict(id="D", amp="bf16_autocast", benchmark=False, ch=64),
    dict(id="E", amp="fp16_autocast", benchmark=False, ch=60),
]
CHOSEN = dict(CONFIGS[0])


class Basic(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + idt)


def make_model(ch):
    return nn.Sequential(
        nn.Conv2d(3, ch, 3, 1, 1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(inplace=True),
        Basic(ch, ch), Basic(ch, ch), Basic(ch, 2 * ch, 2), Basic(2 * ch, 2 * ch),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * ch, 100))


def build(cfg, variant, device, batch=128, hw=56, pool=4):
    cuda = is_cuda(device)
    if not cuda:
        batch, hw = 2, 16
    torch.manual_seed(0)
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = bool(cfg["benchmark"])
    model = make_model(cfg["ch"]).to(device)
    amp = cfg["amp"]
    if not cuda and amp != "bf16_autocast":
        amp = "bf16_autocast"                       # CPU smoke test only
    dtype = torch.float16 if amp.startswith("fp16") else torch.bfloat16
    xs = [torch.randn(batch, 3, hw, hw, device=device) for _ in range(pool)]
    ys = [torch.randint(0, 100, (batch,), device=device) for _ in range(pool)]
    if amp == "fp16_half":
        model = model.half()
        xs = [x.half() for x in xs]
    if variant == "after":
        model = model.to(memory_format=torch.channels_last)
        xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    use_autocast = amp.endswith("autocast")
    state = {"i": 0}

    def step():
        i = state["i"] = state["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=use_autocast):
            out = model(xs[i % pool])
        loss = F.cross_entropy(out.float(), ys[i % pool])
        loss.backward()
        opt.step()

    def close():
        torch.backends.cudnn.benchmark = prev_bench

    info = {"layout_config": dict(cfg), "batch": batch, "hw": hw,
            "memory_format": "channels_last" if variant == "after" else "contiguous (NCHW)"}
    return Step(step, close=close, info=info)


def make(variant, device):
    return build(CHOSEN, variant, device)


def prepare(device):
    """Probe configs; keep the first whose NCHW (before) trace shows layout-conversion kernels."""
    global CHOSEN
    if not is_cuda(device):
        return {"probe": "skipped on CPU"}
    results = []
    for cfg in CONFIGS:
        row = {"config": dict(cfg)}
        for variant in ("before", "after"):
            step = build(cfg, variant, device)
            try:
                for _ in range(4):
                    step()
                torch.cuda.synchronize()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                        torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(3):
                        step()
                    torch.cuda.synchronize()
                fd, path = tempfile.mkstemp(suffix=".json")
                os.close(fd)
                prof.export_chrome_trace(path)
                st = trace_stats(path)
                os.remove(path)
                row[variant] = {
                    "layout_kernel_pct": st["layout_kernel_pct"],
                    "layout_kernels": {k: v["count"] for k, v in st["layout_kernels"].items()},
                    "kernel_time_us_per_step": round(st["kernel_time_us"] / 3, 1),
                    "top_kernels": [k["name"][:120] for k in st["top_kernels"][:5]],
                }
            finally:
                step.close()
                del step
                torch.cuda.empty_cache()
        results.append(row)
        b = row["before"]
        print(f"[layout probe] {cfg}: before layout-kernel {b['layout_kernel_pct']}% "
              f"{list(b['layout_kernels'])[:4]} | after {row['after']['layout_kernel_pct']}% "
              f"| kernel us/step before {b['kernel_time_us_per_step']} after {row['after']['kernel_time_us_per_step']}",
              flush=True)
    chosen = None
    for row in results:                       # first config that shows conversions (>= 1% of kernel time)
        if row["before"]["layout_kernel_pct"] >= 1.0:
            chosen = row
            break
    if chosen is None:
        chosen = max(results, key=lambda r: r["before"]["layout_kernel_pct"])
    CHOSEN = dict(chosen["config"])
    print(f"[layout probe] chosen config: {CHOSEN}", flush=True)
    return {"probe": results, "chosen": CHOSEN}
