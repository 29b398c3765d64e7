"""holdout32_compiled_nan_assert: compiled inference that checks for non-finite values after every block -> no check.

Thirty-second held-out set (written after the sync fix learned to merge the compiled regions a graph break
splits, analyses/graph_break.py, before any GPU trace of the program existed): a sanity check many models carry,
`if not torch.isfinite(x).all(): raise ...` after each block, in a compiled inference loop. Each check reads a
bool on the host (a sync) and breaks the graph inside the loop over blocks, so Dynamo runs the blocks apart. (A
plain `assert` on a tensor does not: Dynamo turns it into an asynchronous device assert, no sync, no break, as
torch._dynamo.explain showed on CPU before this was written down.)
before: 8 residual MLP blocks (LayerNorm, 1024 -> 4096 -> 1024, GELU) in bf16, batch 512, no_grad, the model under
        torch.compile (default mode), with the check after every block (8 syncs a step).
after:  the checks removed (one graph, no sync).
after_graph: that under torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout32_compiled_nan_assert"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "no per-block finite check on the host (check the output once, off the hot path): no graph breaks, no syncs"
DESCRIPTION = {
    "before": ("8 residual MLP blocks (LayerNorm, 1024->4096->1024, GELU), bf16, batch 512, no_grad, torch.compile "
               "default; `if not torch.isfinite(x).all(): raise` after every block (graph breaks, 8 syncs a step)"),
    "after": "same, no checks (one graph, no sync)",
    "after_graph": 'same as after, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d, h, depth, check):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(depth))
        self.check = check

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
            if self.check and not torch.isfinite(x).all():
                raise FloatingPointError("non-finite activations")
        return x


def make(variant, device):
    cuda = is_cuda(device)
    d, h, depth, batch = (1024, 4096, 8, 512) if cuda else (32, 64, 8, 4)
    dt = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    model = Net(d, h, depth, check=variant == "before").to(device=device, dtype=dt).eval()
    fn = model
    compiled = not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode="reduce-overhead" if variant == "after_graph" else "default")
    xs = [torch.randn(batch, d, device=device, dtype=dt) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            fn(xs[i % len(xs)])

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "width": d, "blocks": depth, "compiled": compiled,
                                         "checks": variant == "before",
                                         "mode": "reduce-overhead" if variant == "after_graph" else "default"})
