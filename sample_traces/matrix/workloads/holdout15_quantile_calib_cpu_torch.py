"""holdout15_quantile_calib_cpu_torch: a training loop logging per-row score quantiles with torch on CPU tensors -> on the GPU.

Fifteenth held-out set (written after the host's reading of a copy by torch ops was costed by its op
trees): torch.quantile (a sort inside) and a histogram, ops none of the earlier sets read a copy with.
before: MLP regressor 768->1536 (2 hidden)->256 outputs, batch 1024, bf16 autocast, fused AdamW, MSE; per
        step the outputs go to the CPU (1 MB), torch.quantile at 0.1/0.5/0.9 per row and a torch.histc of
        the row medians on CPU tensors, logged with .tolist().
after:  the same quantiles and histogram on the GPU, accumulated in a GPU tensor; copied once per 50 steps.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout15_quantile_calib_cpu_torch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "quantiles and the histogram on the GPU, accumulated as tensors; one copy every 50 steps"
DESCRIPTION = {
    "before": ("training: MLP 768->1536 (2 hidden)->256, batch 1024, bf16, fused AdamW, MSE; per step 1 MB of "
               "outputs to the CPU, torch.quantile per row and torch.histc with torch on CPU tensors"),
    "after": "same step; quantiles and histogram on the GPU in tensors, copied once every 50 steps",
}
EVERY = 50
Q = (0.1, 0.5, 0.9)


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, dout = (1024, 768, 1536, 256) if cuda else (16, 16, 32, 8)
    torch.manual_seed(0)
    model = mlp(din, dim, 2, dout).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randn(batch, dout, device=device) for _ in range(pool)]
    q = torch.tensor(Q, device=device)
    q_cpu = q.cpu()
    st = {"i": 0, "log": []}
    acc = torch.zeros(len(Q) + 20, device=device)

    def stats(out, qs):
        quant = torch.quantile(out, qs, dim=1)                        # (3, batch)
        hist = torch.histc(quant[1], bins=20, min=-3.0, max=3.0)
        return torch.cat([quant.mean(1), hist])

    def step():
        i = st["i"] = st["i"] + 1
        x, y = xs[i % pool], ys[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = model(x)
        F.mse_loss(out.float(), y).backward()
        opt.step()
        if variant == "before":
            st["log"].append(stats(out.detach().float().cpu(), q_cpu).tolist())   # 1 MB, blocking
        else:
            with torch.no_grad():
                acc.add_(stats(out.detach().float(), q))
            if i % EVERY == 0:
                st["log"].append(acc.cpu().tolist())
                acc.zero_()
        if len(st["log"]) > 200:
            st["log"].clear()
    return Step(step, info={"batch": batch, "outputs": dout})
