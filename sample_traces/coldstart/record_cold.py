#!/usr/bin/env python3
"""A profile that starts with the process: CUDA start-up inside the first profiled step.

    TEARDOWN_CUPTI=1 python sample_traces/coldstart/record_cold.py OUT_DIR [BATCH]

The profiler starts before the program's first CUDA call; ProfilerStep#0 builds the model on the GPU and runs
the first training step (context creation, cuDNN's and the kernels' lazy loading, first allocations), steps
1..STEPS-1 are steady. The workload is launch_tiny_conv's eager step (sample_traces/workloads): at batch 1
(the default) launch-bound, at batch 512 on 64x64 inputs GPU-bound. After the profiler, the same step is timed
un-profiled (5 blocks of N steps, N so a block takes >= 0.3 s, median) for the manifest. Writes
OUT_DIR/cold_conv_b{BATCH}.json.gz and OUT_DIR/cold_conv_b{BATCH}.manifest.json.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from workloads.launch_tiny_conv import make_model  # noqa: E402

STEPS = 6


def main(out: str, batch: int = 1) -> None:
    os.makedirs(out, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
    state = {}

    def step():
        if not state:        # the first step builds everything: on a fresh process, CUDA starts here
            torch.manual_seed(0)
            state["model"] = make_model().to(dev)
            state["opt"] = torch.optim.SGD(state["model"].parameters(), lr=0.01, momentum=0.9)
            hw = 32 if batch == 1 else 64
            state["x"] = torch.randn(batch, 3, hw, hw, device=dev)
            state["y"] = torch.randint(0, 10, (batch,), device=dev)
        m, opt = state["model"], state["opt"]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(state["x"]), state["y"]).backward()
        opt.step()

    name = f"cold_conv_b{batch}"
    raw = os.path.join(out, name + ".json")
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for _ in range(STEPS):
            step()
            prof.step()
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    for _ in range(50):
        step()
    sync()
    n, t = 1, 0.0
    while t < 0.3:
        n *= 2
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        t = time.perf_counter() - t0
    blocks = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        blocks.append((time.perf_counter() - t0) / n * 1000)
    man = {"file": name + ".json.gz", "batch": batch, "steps_profiled": STEPS, "record_shapes": True,
           "with_stack": False,
           "unprofiled_steady_step_ms": {"median_ms": round(statistics.median(blocks), 4), "block_ms":
                                          [round(b, 4) for b in blocks], "steps_per_block": n},
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else None,
           "teardown_cupti": os.environ.get("TEARDOWN_CUPTI"),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(os.path.join(out, name + ".manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(json.dumps(man))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".", int(sys.argv[2]) if len(sys.argv) > 2 else 1)
