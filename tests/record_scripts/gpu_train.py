"""A tiny CUDA training loop (for the GPU test; skipped where there is no GPU)."""
import sys

import torch

iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 8
device = "cuda"
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(128, 256, device=device)
y = torch.randint(0, 10, (128,), device=device)
for _ in range(iters):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("gpu done", float(loss.item()) > 0)
