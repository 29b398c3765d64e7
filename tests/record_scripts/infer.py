"""Inference only: no optimizer; a Sequential (nested modules) called 8 times."""
import torch

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
with torch.no_grad():
    for _ in range(8):
        model(torch.randn(8, 16)).softmax(-1)
print("inferred")
