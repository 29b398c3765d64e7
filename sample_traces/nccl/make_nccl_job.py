"""Record real multi-GPU NCCL jobs (DistributedDataParallel, one process per GPU) for traceinsight's
distributed analysis: three variants in one torchrun call, each timed un-profiled and then profiled.

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 sample_traces/nccl/make_nccl_job.py --out OUT
    (TI_CPU=1 with gloo on CPU: a smoke test)

Variants (the same 8 x Linear(4096) bf16 MLP, batch 32 per rank, fused Adam):
  straggler_host  rank 1 spins 6 ms of plain Python per step before its forward: the other rank waits
                  in NCCL all-reduce (collective_wait; the straggler and its cause: untraced host time).
  comm_bound      no straggler; the step's gradient all-reduce (268 MB of bf16 gradients per step,
                  DDP buckets) is larger than the compute it can hide behind (exposed communication).
  accumulate4     the comm_bound job with 4 micro-batches per optimizer step under no_sync(): one
                  all-reduce per 4 micro-batches (the measured fix of comm_bound; compare per sample).
The held-out set 31 (pre-registered; pairs before -> after, scored by score_jobs.py):
  loader_workers0 -> loader_workers4   every rank feeds the MLP from a DataLoader whose Dataset does
                  per-sample numpy work (num_workers=0: in the training loop), fixed with 4 workers each.
  rank0_metrics -> rank0_metrics_deferred   rank 0 alone logs per-step metrics: accuracy .item() and the
                  softmax copied to numpy for an entropy and a histogram, after the backward; the other rank
                  waits for it in the next all-reduce. Fixed by keeping the metrics on the GPU (read every
                  100 steps, never inside the window).
  unfused_adam -> fused_adam   48 x [Linear(512), ReLU], batch 64, Adam(foreach=False): one kernel per
                  op per parameter after DDP's all-reduce, fixed with Adam(fused=True).
The held-out set 32 adds (pre-registered): rank1_loader_workers0 -> loader_workers4   rank 1 alone loads in
                  the training loop (rank 0 has 4 workers), fixed with 4 workers on rank 1 too.
The held-out set 33 adds (pre-registered) the launch fix of unfused_adam, the whole step in one CUDA graph:
  unfused_adam_graph   unfused_adam's step (Adam(foreach=False, capturable=True)) captured whole (forward,
                  DDP's backward with its all-reduces, optimizer step) with torch.cuda.graph and replayed, set
                  up as PyTorch's CUDA-graph notes say for DDP: async error handling off, DDP built on a side
                  stream, 11 eager warm-up steps there before the capture; autocast without its cache.
  fused_adam_graph     the same with Adam(fused=True, capturable=True): the fused optimizer, then the graph.
  (CUDA only: with TI_CPU=1 they are skipped.)
Per variant: WARMUP steps, then >= 50 timed un-profiled steps (median, p10, p90 over blocks), then a
profiled window (wait 1, warmup 2, active 5) per setting: OUT/<variant>/rank<R>.json.gz with default
options and, with --settings default,stack, OUT/<variant>__stack/rank<R>.json.gz with with_stack=True,
record_shapes=True; rank 0 writes OUT/manifest.json with the timings, GPU, torch and NCCL versions.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # -> sample_traces/workloads
from workloads.common import profile_step  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--variants", default="straggler_host,comm_bound,accumulate4")
ap.add_argument("--settings", default="default")
args = ap.parse_args()

CPU = os.environ.get("TI_CPU") == "1" or not torch.cuda.is_available()
GRAPHS = [v for v in args.variants.split(",") if v.endswith("_graph")]
if GRAPHS and not CPU:
    # PyTorch's notes on CUDA graphs with DDP: DDP's async error handling off before the process group
    # starts (it then holds for every variant of this run, eager ones too: they are timed alike).
    os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
dist.init_process_group("gloo" if CPU else "nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cpu") if CPU else torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
if not CPU:
    torch.cuda.set_device(dev)
D, LAYERS, BATCH = (64, 2, 4) if CPU else (4096, 8, 32)
WARMUP, BLOCKS = 5, 10


def sync():
    if not CPU:
        torch.cuda.synchronize()


def burn(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


class NumpyFeatures(torch.utils.data.Dataset):
    """Per-sample numpy work (a sort and a shuffle of a random vector) that a DataLoader with no workers runs in
    the training loop."""
    def __len__(self):
        return 10 ** 7

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        x = np.sort(rng.standard_normal(2 * D))
        return torch.from_numpy(x[rng.permutation(2 * D)][:D].astype(np.float32))


def make(variant):
    torch.manual_seed(0)
    small = variant.removesuffix("_graph") in ("unfused_adam", "fused_adam")
    d, layers, batch = (min(D, 512), 48, 2 * BATCH) if small else (D, LAYERS, BATCH)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(d, d), nn.ReLU() if small else nn.GELU()]
    model = nn.Sequential(*mods).to(dev)
    if variant.endswith("_graph"):
        return make_graph(variant, model, d, batch)
    ddp = DDP(model, device_ids=None if CPU else [dev.index], bucket_cap_mb=25)
    if variant == "unfused_adam":
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-5, foreach=False)
    else:
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-5, fused=None if CPU else True)
    xs = [torch.randn(batch, d, device=dev) for _ in range(4)]
    ys = [torch.randint(0, d, (batch,), device=dev) for _ in range(4)]
    micro = 4 if variant == "accumulate4" else 1
    st = {"i": 0, "acc": torch.zeros((), device=dev)}
    batches = None
    if "loader_workers" in variant:
        # rank1_loader_workers0: rank 1 alone loads in the training loop, rank 0 has 4 workers.
        workers = 0 if variant == "rank1_loader_workers0" and rank == 1 else 4 if variant.startswith("rank1_") \
            else int(variant.removeprefix("loader_workers"))
        batches = iter(torch.utils.data.DataLoader(
            NumpyFeatures(), batch_size=batch, num_workers=workers, pin_memory=not CPU,
            persistent_workers=workers > 0, prefetch_factor=4 if workers else None))

    def fwd_bwd(x):
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            out = ddp(x)
        out.float().pow(2).mean().backward()
        return out

    def metrics(out, y, i):
        if variant == "rank0_metrics" and rank == 0:
            acc = (out.argmax(-1) == y).float().mean().item()
            p = out.detach().float().softmax(-1).cpu().numpy()
            ent = float(-(p * np.log(p + 1e-9)).sum(-1).mean())
            hist = np.histogram(p, bins=64)[0]
            st["log"] = f"{i} acc {acc:.3f} entropy {ent:.3f} mode {int(hist.argmax())}"
        elif variant == "rank0_metrics_deferred" and rank == 0:
            st["acc"] += (out.argmax(-1) == y).float().mean()
            if i % 100 == 0:
                st["log"] = f"{i} acc {st['acc'].item() / 100:.3f}"
                st["acc"].zero_()

    def step():
        i = st["i"] = st["i"] + 1
        if variant == "straggler_host" and rank == 1:
            burn(6.0)
        opt.zero_grad(set_to_none=True)
        for k in range(micro - 1):
            with ddp.no_sync():
                fwd_bwd(xs[(i + k) % 4])
        x = next(batches).to(dev, non_blocking=True) if batches is not None else xs[(i + micro - 1) % 4]
        out = fwd_bwd(x)
        metrics(out, ys[(i + micro - 1) % 4], i)
        opt.step()
    return step, micro


GRAPH_WARMUP = 11     # "at least 11 DDP-enabled eager iterations before capture" (PyTorch's CUDA notes)


def make_graph(variant, model, d, batch):
    """unfused_adam / fused_adam with the whole step captured in one CUDA graph (set 33): each step copies its
    batch into the graph's static input and replays the graph (forward, backward, all-reduces, optimizer)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ddp = DDP(model, device_ids=[dev.index], bucket_cap_mb=25)
    if variant == "unfused_adam_graph":
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-5, foreach=False, capturable=True)
    else:
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-5, fused=True, capturable=True)
    xs = [torch.randn(batch, d, device=dev) for _ in range(4)]
    static_x = xs[0].clone()

    def fwd_bwd_opt():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = ddp(static_x)
        out.float().pow(2).mean().backward()
        opt.step()

    with torch.cuda.stream(side):
        for _ in range(GRAPH_WARMUP):
            opt.zero_grad(set_to_none=True)
            fwd_bwd_opt()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        fwd_bwd_opt()      # the captured backward refills the same .grad tensors: no zero_grad per step
    torch.cuda.synchronize()
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        static_x.copy_(xs[i % 4])
        graph.replay()
    return step, 1


def timed(step, micro):
    for _ in range(WARMUP):
        step()
    sync()
    t0 = time.perf_counter()
    step()
    sync()
    per = max(time.perf_counter() - t0, 1e-6)
    n = [max(5, int(0.04 / per) + 1)]
    dist.broadcast_object_list(n, src=0)     # every rank must run the same steps (DDP's collectives)
    n = n[0]
    vals = []
    for _ in range(BLOCKS):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        vals.append((time.perf_counter() - t0) / n * 1e3)
    q = statistics.quantiles(vals, n=10, method="inclusive")
    return {"median": round(statistics.median(vals), 4), "p10": round(q[0], 4), "p90": round(q[-1], 4),
            "n_steps": n * BLOCKS, "micro_batches_per_step": micro,
            "per_micro_batch_median": round(statistics.median(vals) / micro, 4)}


def profiled(step, out: Path, stack: bool):
    out.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    profile_step(step, dev, str(out / f"rank{rank}.json.gz"), with_stack=stack, record_shapes=stack)


manifest = {"world_size": world, "torch": torch.__version__, "backend": dist.get_backend(),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not CPU else None,
            "gpu": None if CPU else torch.cuda.get_device_name(dev), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "model": f"{LAYERS} x [Linear({D}), GELU] bf16 autocast, batch {BATCH} per rank, fused Adam, DDP bucket 25 MB "
                     "(unfused_adam, fused_adam: 48 x [Linear(512), ReLU], batch 64, Adam foreach=False / fused)",
            "step_time_method": "un-profiled: 10 blocks of N steps after 5 warm-up steps, a barrier and a device "
                                "synchronize around each block; step = block / N; median/p10/p90 over blocks (rank 0)",
            "variants": {}}
if GRAPHS and not CPU:
    manifest["env"] = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}
for v in args.variants.split(","):
    if v.endswith("_graph") and CPU:
        print(f"{v}: skipped (CUDA graphs need a GPU)", flush=True)
        continue
    step, micro = make(v)
    t = timed(step, micro)
    for setting in args.settings.split(","):
        profiled(step, Path(args.out) / (v if setting == "default" else f"{v}__{setting}"), setting == "stack")
    manifest["variants"][v] = {"step_ms": t}
    if rank == 0:
        print(v, t, flush=True)
        # After each variant: a later one that fails keeps the ones before.
        (Path(args.out) / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
dist.destroy_process_group()
