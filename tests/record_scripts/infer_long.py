"""Inference only, long enough to time: no optimizer; a Sequential (nested modules) called 40 times."""
import torch

model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)).eval()
with torch.no_grad():
    for _ in range(40):
        model(torch.randn(32, 64)).softmax(-1)
print("inferred")
