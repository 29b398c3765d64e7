"""Run with -m rpkg.tool: a tiny training loop that reports what it saw."""
import json
import os
import sys

import torch

if "--report" in sys.argv:
    with open(sys.argv[sys.argv.index("--report") + 1], "w") as f:
        json.dump({"argv": sys.argv, "name": __name__, "cwd": os.getcwd(), "path0": sys.path[0],
                   "spec": __spec__.name if __spec__ else None}, f)

model = torch.nn.Linear(8, 1)
opt = torch.optim.Adam(model.parameters())
for _ in range(6):
    model(torch.randn(4, 8)).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
