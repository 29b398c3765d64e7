"""holdout33_compiled_clamp_item: compiled conv-net inference that clamps only `if x.amax().item() > LIMIT` -> clamp always.

Thirty-third held-out set (written after the graph-break merge was refined on the thirty-first and thirty-second
sets, analyses/graph_break.py: the merged step's CUDA graph keeps one wrapper, the eager calls between regions
go; before any GPU trace of the program existed): a break once, outside any loop, in inference (no backward). A
small bf16 conv net's forward reads the stem's maximum on the host to decide whether to clamp (a guard against
saturated inputs); the clamp never fires.
before: stem conv + BN + ReLU, 4 residual conv blocks (64 ch, 32x32), pooled linear head, bf16, batch 64, no_grad,
        the model under torch.compile (default mode); `if x.amax().item() > 1e4: x = x.clamp(max=1e4)` after the
        stem (a graph break and a sync).
after:  x = x.clamp(max=1e4) always (one graph, no sync).
after_graph: that under torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout33_compiled_clamp_item"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "clamp unconditionally (x.clamp(max=LIMIT)): no .item(), so no graph break and no sync"
DESCRIPTION = {
    "before": ("conv net (stem, 4 residual conv blocks of 64 ch at 32x32, linear head), bf16, batch 64, no_grad, "
               "torch.compile default; `if x.amax().item() > 1e4: x = x.clamp(max=1e4)` after the stem"),
    "after": "same, the clamp applied unconditionally (one graph, no sync)",
    "after_graph": 'same as after, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8
LIMIT = 1e4


class Res(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


class Net(nn.Module):
    def __init__(self, c, always):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.body = nn.Sequential(*[Res(c) for _ in range(4)])
        self.head = nn.Linear(c, 10)
        self.always = always

    def forward(self, x):
        x = self.stem(x)
        if self.always:
            x = x.clamp(max=LIMIT)
        elif x.amax().item() > LIMIT:
            x = x.clamp(max=LIMIT)
        return self.head(self.body(x).mean((2, 3)))


def make(variant, device):
    cuda = is_cuda(device)
    c, hw, batch = (64, 32, 64) if cuda else (8, 8, 2)
    dt = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    model = Net(c, always=variant != "before").to(device=device, dtype=dt).eval()
    fn = model
    compiled = not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode="reduce-overhead" if variant == "after_graph" else "default")
    xs = [torch.randn(batch, 3, hw, hw, device=device, dtype=dt) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad():
            fn(xs[i % len(xs)])

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "channels": c, "hw": hw, "compiled": compiled,
                                         "clamp": "always" if variant != "before" else "if x.amax().item() > 1e4",
                                         "mode": "reduce-overhead" if variant == "after_graph" else "default"})
