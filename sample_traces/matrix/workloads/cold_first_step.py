"""cold_first_step (trace only): cudnn.benchmark=True conv net profiled from its very first step.

For each profile setting a fresh conv net (the layout_nchw_fp16 model, 48/96 channels, batch 32,
bf16 autocast, channels_last) is built for an input size not seen before in the process (72x72
for "default", 80x80 for "stack"), and profiled with schedule(wait=0, warmup=0, active=5): step 1
includes cuDNN's algorithm search (cudnn.benchmark) for every conv shape, fwd and bwd, plus
first-use allocations.  The process itself is warm (CUDA context, cuBLAS/cuDNN handles exist).
Un-profiled: step_ms is the steady state at 72x72 (measured after the "default" trace);
first_steps_ms_unprofiled are the first 3 steps (each synchronised) of a third fresh model at 88x88.
"""

import sys
import time

import torch
import torch.nn.functional as F

from workloads.layout_nchw_fp16 import make_model

from ._util import Step, autocast, is_cuda, sync

NAME = "cold_first_step"
EXPECTED_KIND = "cold_start"
ROLE = "trace_only"
VARIANTS = ("cold",)
FIX = None
DESCRIPTION = {"cold": ("cudnn.benchmark=True conv net (basic blocks 48/96 ch), batch 32, bf16 autocast, channels_last, "
                        "profiled from the first step (wait=0, warmup=0, active=5); 72x72 (default) / 80x80 (stack)")}
HW = {"default": 72, "stack": 80, "unprofiled_first": 88}


def make(variant, device, hw=72, batch=32):
    cuda = is_cuda(device)
    if not cuda:
        hw, batch = hw // 4, 2
    torch.manual_seed(0)
    model = make_model(48).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, hw, hw, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    return Step(step, info={"hw": hw, "batch": batch})


def record(rec, device):
    mod = sys.modules[__name__]
    prev = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        entry = rec.new_entry(mod, "cold")
        entry["info"] = {"cudnn_benchmark": True, "hw_per_setting": dict(HW)}
        for setting in rec.settings:
            step = make("cold", device, hw=HW[setting])
            try:
                sync(device)
                rec.profile_into(entry, step, setting, wait=0, warmup=0, active=5)
                if setting == "default":
                    for _ in range(5):
                        step()
                    rec.measure_into(entry, step)
                    entry["step_ms_note"] = f"steady state at {HW['default']}x{HW['default']} after the cold trace"
            finally:
                step.close()
                rec.cleanup()
        step = make("cold", device, hw=HW["unprofiled_first"])
        firsts = []
        for _ in range(3):
            sync(device)
            t0 = time.perf_counter()
            step()
            sync(device)
            firsts.append(round((time.perf_counter() - t0) * 1e3, 3))
        entry["first_steps_ms_unprofiled"] = firsts
        entry["first_steps_hw"] = HW["unprofiled_first"]
        step.close()
        rec.add_entry(entry)
    finally:
        torch.backends.cudnn.benchmark = prev
        rec.cleanup()
