"""holdout33_compiled_loss_spike_guard: a compiled loss that warns `if loss.item() > SPIKE:` -> a GPU counter.

Thirty-third held-out set (written after the graph-break merge was refined on the thirty-first and thirty-second
sets, before any GPU trace of the program existed): the break at the end of the compiled function, after the
whole forward and the loss, where a merge has little or nothing to take (what follows the break launches no
kernel). Many training scripts guard against loss spikes where they compute the loss. (A NaN check, `if
torch.isnan(loss): raise`, had been written first: torch._dynamo.explain on CPU (torch 2.13) showed no break for
it; for `.item()` it gives "Unsupported Tensor.item() call with capture_scalar_outputs=False".)
before: token embedding, 4 residual MLP blocks (LayerNorm, 768 -> 3072 -> 768, GELU), mean pool, linear head; batch
        128 x 64 tokens, bf16 autocast, the loss function under torch.compile (default mode), fused AdamW; `if
        loss.item() > SPIKE: print(...)` inside the compiled loss function (never fires).
after:  spikes counted on the GPU (`spikes += loss.detach() > SPIKE`), read every 64 steps: one graph, no sync.
after_graph: that under torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout33_compiled_loss_spike_guard"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "count spikes on the GPU (spikes += loss.detach() > SPIKE), read every N steps: no graph break, no sync"
DESCRIPTION = {
    "before": ("embedding + 4 residual MLP blocks (768->3072->768), mean pool, head; batch 128 x 64, bf16 autocast, "
               "compiled loss (default mode), fused AdamW; `if loss.item() > SPIKE: print(...)` inside the compiled loss"),
    "after": "same, spikes counted on the GPU and read every 64 steps (one graph, no sync)",
    "after_graph": 'same as after, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8
SPIKE = 1e3


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def make(variant, device):
    cuda = is_cuda(device)
    vocab, d, h, depth, batch, t = (8000, 768, 3072, 4, 128, 64) if cuda else (100, 32, 64, 2, 4, 8)
    torch.manual_seed(0)
    emb = nn.Embedding(vocab, d)
    model = nn.ModuleDict({"emb": emb, "blocks": nn.Sequential(*[Block(d, h) for _ in range(depth)]),
                           "head": nn.Linear(d, 10)}).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    check = variant == "before"
    spikes = torch.zeros((), device=device)

    def loss_fn(tokens, y):
        with autocast(device):
            out = model["head"](model["blocks"](model["emb"](tokens)).mean(1))
        loss = F.cross_entropy(out.float(), y)
        if check:
            if loss.item() > SPIKE:
                print(f"loss spike: {loss.item():.1f}")
        else:
            spikes.add_(loss.detach() > SPIKE)
        return loss
    compiled = not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn, mode="reduce-overhead" if variant == "after_graph" else "default")
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, vocab, (batch, t), generator=g).to(device),
                torch.randint(0, 10, (batch,), generator=g).to(device)) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        if not check and i % 64 == 0 and spikes.item():
            print(f"{spikes.item():.0f} loss spikes")
        opt.zero_grad(set_to_none=True)
        loss_fn(*batches[i % len(batches)]).backward()
        opt.step()

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "tokens": t, "width": d, "blocks": depth, "compiled": compiled,
                                         "spike_guard": "loss.item() branch" if check else "GPU counter",
                                         "mode": "reduce-overhead" if variant == "after_graph" else "default"})
