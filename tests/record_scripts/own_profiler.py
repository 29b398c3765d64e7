"""A script that profiles itself with torch.profiler (WARM steps first), writing own_trace.json."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

warm = int(sys.argv[1]) if len(sys.argv) > 1 else 0
m = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(m.parameters(), lr=0.1)


def step():
    opt.zero_grad()
    m(torch.randn(4, 16)).sum().backward()
    opt.step()


for _ in range(warm):
    step()
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2)) as p:
    for _ in range(5):
        step()
        p.step()
p.export_chrome_trace("own_trace.json")
print("own trace written")
