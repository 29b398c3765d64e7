"""layout_nchw_fp16: fp16-autocast ResNet-ish conv net, NCHW -> channels_last.

Reuses sample_traces/workloads/layout_nchw_fp16.py (config A: fp16 autocast, cudnn.benchmark
off, 64 channels, which showed nchwToNhwc/nhwcToNchw kernels on the H200) at batch 64 instead
of 128.  The probe (prepare()) of the original is not run.

after_graph_only: the NCHW "before" step (transposes and all) captured in one CUDA graph: the
launch fix alone, measured so that the ranking of launch_overhead against layout_permute is checked
against a measurement, not assumed.
"""

import torch
import torch.nn.functional as F

from workloads import layout_nchw_fp16 as base

from ._util import Step, capture_graph, is_cuda, replay_step

NAME = "layout_nchw_fp16"
EXPECTED_KIND = "layout_permute"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
BATCH = 64
DESCRIPTION = {k: v.replace("batch 128", f"batch {BATCH}") for k, v in base.DESCRIPTION.items()}
DESCRIPTION["after_graph_only"] = "the before step (NCHW) captured in one CUDA graph (static input)"
FIX = base.FIX
SOURCE = "sample_traces/workloads/layout_nchw_fp16.py (config A, batch=64)"


def make(variant, device):
    if variant == "after_graph_only" and is_cuda(device):
        return graphed(device)
    return base.build(dict(base.CONFIGS[0]), "before" if variant == "after_graph_only" else variant, device,
                      batch=BATCH)


def graphed(device, pool=4, hw=56):
    cfg = dict(base.CONFIGS[0])
    prev_bench = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = bool(cfg["benchmark"])
    torch.manual_seed(0)
    model = base.make_model(cfg["ch"]).to(device)
    xs = [torch.randn(BATCH, 3, hw, hw, device=device) for _ in range(pool)]
    ys = [torch.randint(0, 100, (BATCH,), device=device) for _ in range(pool)]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sx, sy = xs[0].clone(), ys[0].clone()

    def body():
        opt.zero_grad(set_to_none=False)
        # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
        with torch.autocast(device_type="cuda", dtype=torch.float16, cache_enabled=False):
            out = model(sx)
        F.cross_entropy(out.float(), sy).backward()
        opt.step()

    step = replay_step(capture_graph(body, warmup=3), [(sx, xs), (sy, ys)])

    def close():
        torch.backends.cudnn.benchmark = prev_bench
    return Step(step, close=close, info={"batch": BATCH, "memory_format": "contiguous (NCHW)", "cuda_graph": True})
