#!/usr/bin/env python3
"""One matrix workload's variant as a plain training script, for `traceinsight record` (the record path end to
end: record's own profiler window and its own un-profiled steps after it):

    traceinsight record --skip 10 --steps 5 --unprofiled-steps 60 sample_traces/matrix/drive.py WORKLOAD VARIANT

It builds the step the way record_matrix.py does (``make(variant, device)``) and calls it --steps times; nothing
else (no timing of its own, no profiler). record_e2e.sh runs it on the GPU machine.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # -> `import matrix`, `workloads`

import torch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("variant")
    ap.add_argument("--steps", type=int, default=100, help="steps to run (default 100)")
    a = ap.parse_args()
    mod = importlib.import_module(f"matrix.workloads.{a.workload}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    step = mod.make(a.variant, device)
    try:
        for _ in range(a.steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
    finally:
        step.close()


if __name__ == "__main__":
    main()
