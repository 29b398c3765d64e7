"""Run one sample workload as a plain training script (for `traceinsight record`).

    python sample_traces/run_workload.py launch_tiny_conv --variant before --steps 30
    traceinsight record sample_traces/run_workload.py launch_tiny_conv --steps 30
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--variant", default="before")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    import torch
    mod = importlib.import_module(f"workloads.{args.workload}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    step = mod.make(args.variant, device)
    for _ in range(args.steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    if hasattr(step, "close"):
        step.close()
    print(f"ran {args.steps} steps of {args.workload} ({args.variant}) on {device}")


if __name__ == "__main__":
    main()
