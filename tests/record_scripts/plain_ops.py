"""No optimizer, no nn.Module: plain tensor ops for about argv[1] seconds (whole-run window)."""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
a = torch.randn(32, 32)
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    a = (a @ a).tanh()
    time.sleep(0.02)
print("plain", bool(torch.isfinite(a).all()))
