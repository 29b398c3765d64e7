"""Why a DDP job's default-options trace reads its un-profiled step low (sample_traces/nccl/README.md, "The jobs'
un-profiled step"): the fused-Adam job (48 x [Linear(512), ReLU], batch 64, Adam(fused=True)) timed three ways on
two GPUs, each rank's own figures kept.

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 sample_traces/nccl/ddp_probe.py --out OUT

  ddp      DDP on both ranks: the job's step (10 blocks of N steps, a barrier and a synchronize around each, as
           make_nccl_job.py times it), and per rank the CPU time of each step() call (no synchronize inside: the
           time the rank's Python takes to issue the step), un-profiled; then a default-options profile.
  alone    the same model and optimizer without DDP and without collectives, on each rank at once (two
           independent processes on one host, as the job's ranks are): the step timed the same way, per rank, and
           a default-options profile. Its un-profiled step is the single-GPU matrix's question.
  alone0   the same on rank 0 only while rank 1 waits at a barrier (one process busy on the host).
OUT/probe.json (rank 0) holds every figure; OUT/<case>/rank<R>.json.gz the profiles.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # -> sample_traces/workloads
from workloads.common import profile_step  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
args = ap.parse_args()
CPU = os.environ.get("TI_CPU") == "1" or not torch.cuda.is_available()
dist.init_process_group("gloo" if CPU else "nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cpu") if CPU else torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
if not CPU:
    torch.cuda.set_device(dev)
D, LAYERS, BATCH = (64, 4, 8) if CPU else (512, 48, 64)


def sync():
    if not CPU:
        torch.cuda.synchronize()


def make(ddp: bool):
    torch.manual_seed(0)
    mods = []
    for _ in range(LAYERS):
        mods += [nn.Linear(D, D), nn.ReLU()]
    model = nn.Sequential(*mods).to(dev)
    net = DDP(model, device_ids=None if CPU else [dev.index], bucket_cap_mb=25) if ddp else model
    opt = torch.optim.Adam(net.parameters(), lr=1e-5, fused=None if CPU else True)
    xs = [torch.randn(BATCH, D, device=dev) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            out = net(xs[i % 4])
        out.float().pow(2).mean().backward()
        opt.step()
    return step


def timed(step, busy: bool):
    """(block medians, per-step CPU issue times) on this rank; a rank that is not busy only joins the barriers."""
    n, vals, issue = 5, [], []
    if busy:
        for _ in range(5):
            step()
        sync()
    for _ in range(10):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        if busy:
            for _ in range(n):
                a = time.perf_counter()
                step()
                issue.append((time.perf_counter() - a) * 1e3)
        sync()
        vals.append((time.perf_counter() - t0) / n * 1e3)
    return vals, issue


def summary(xs):
    if not xs:
        return None
    q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) > 1 else [xs[0], xs[0]]
    return {"median": round(statistics.median(xs), 4), "p10": round(q[0], 4), "p90": round(q[-1], 4), "n": len(xs)}


def profiled(step, out: Path, busy: bool):
    dist.barrier()
    if busy:
        out.mkdir(parents=True, exist_ok=True)
        profile_step(step, dev, str(out / f"rank{rank}.json.gz"), with_stack=False, record_shapes=False)
    dist.barrier()


res = {"torch": torch.__version__, "gpu": None if CPU else torch.cuda.get_device_name(dev),
       "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cases": {}}
for case in ("ddp", "alone", "alone0", "ddp_again"):
    busy = case != "alone0" or rank == 0
    step = make(case.startswith("ddp")) if busy else None
    blocks, issue = timed(step, busy)
    profiled(step, Path(args.out) / case, busy)
    mine = {"block_step_ms": summary(blocks), "issue_ms": summary(issue)}
    got = [None] * world
    dist.all_gather_object(got, mine)
    res["cases"][case] = {f"rank{r}": g for r, g in enumerate(got)}
    if rank == 0:
        print(case, json.dumps(res["cases"][case]), flush=True)
        (Path(args.out) / "probe.json").write_text(json.dumps(res, indent=1) + "\n")
dist.barrier()
