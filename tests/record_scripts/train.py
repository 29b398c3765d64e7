"""A tiny training loop: one SGD step per iteration; can crash, sys.exit or be interrupted."""
import argparse
import sys

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--crash-at", type=int, default=-1)
parser.add_argument("--exit-at", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=3)
parser.add_argument("--interrupt-at", type=int, default=-1)
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 16), torch.randn(64, 1)


def step(i):
    if i == args.crash_at:
        raise ValueError(f"boom at step {i}")
    if i == args.exit_at:
        sys.exit(args.exit_code)
    if i == args.interrupt_at:
        raise KeyboardInterrupt
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


for i in range(args.iters):
    step(i)
print("done", args.iters)
