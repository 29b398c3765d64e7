"""Record a real multi-rank gloo job on CPU, one rank made slow on purpose: the test data of tests/test_job.py.

Run under torchrun, e.g.

    torchrun --nproc_per_node 2 tests/data/job/make_gloo_job.py --out tests/data/job/gloo2_host \
        --slow-rank 1 --cause host
    torchrun --nproc_per_node 4 tests/data/job/make_gloo_job.py --out tests/data/job/gloo4_data \
        --slow-rank 2 --cause data

Each rank trains the same small MLP under DistributedDataParallel (gloo, several gradient buckets so
collectives overlap on gloo's worker threads) with torch.profiler and a ProfilerStep schedule, and
writes OUT/rank<R>.json.gz. The slow rank spends --slow-ms per step:
  host  a Python busy loop outside any profiled op (untraced host time: the job is host-bound there)
  data  a sleep inside the Dataset's __getitem__, so it shows up under the DataLoader's __next__ range
  compute  extra matmuls inside the model's forward on that rank only (slower compute ops)
Every other rank waits for it inside gloo:all_reduce.
"""
from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--slow-rank", type=int, default=1)
parser.add_argument("--cause", choices=("host", "data", "compute", "none"), default="host")
parser.add_argument("--slow-ms", type=float, default=8.0)
parser.add_argument("--active", type=int, default=5, help="steps recorded")
args = parser.parse_args()

torch.set_num_threads(1)          # ranks share a small machine: one thread each keeps timings clean
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
slow = rank == args.slow_rank and args.cause != "none"


def burn(ms: float) -> None:
    """Spin the CPU in plain Python: nothing the profiler records."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        if slow and args.cause == "data":
            time.sleep(args.slow_ms / 1000)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.randn(8, generator=g)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
        # A buffer, not a parameter: DDP would wait for a gradient of it.
        self.register_buffer("extra", torch.randn(256, 256) / 16)

    def forward(self, x):
        if slow and args.cause == "compute":
            # The same model, plus work the other ranks do not do: slower compute on this rank only.
            h = torch.randn(512, 256)
            t0 = time.perf_counter()
            while (time.perf_counter() - t0) * 1000 < args.slow_ms:
                h = torch.tanh(h @ self.extra)
        return self.layers(x)


torch.manual_seed(0)
model = DDP(Net(), bucket_cap_mb=0.1)     # small buckets: several allreduces per step
opt = torch.optim.SGD(model.parameters(), lr=0.01)
# One batch per step from a real DataLoader: its __next__ is a profiled range of its own.
loader = torch.utils.data.DataLoader(Data(), batch_size=1, num_workers=0)
wait, warmup = 2, 2
steps = wait + warmup + args.active
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)


def save(prof):
    tmp = out / f".rank{rank}.json"
    prof.export_chrome_trace(str(tmp))
    with open(tmp, "rb") as src, gzip.open(out / f"rank{rank}.json.gz", "wb", compresslevel=9) as dst:
        dst.write(src.read())
    tmp.unlink()


with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=wait, warmup=warmup, active=args.active),
             on_trace_ready=save) as prof:
    it = iter(loader)
    for i in range(steps):
        x, y = next(it)
        if slow and args.cause == "host":
            burn(args.slow_ms)
        x = x.expand(32, -1).contiguous()
        y = y.expand(32, -1).contiguous()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()

dist.barrier()
dist.destroy_process_group()
if rank == 0:
    print(f"wrote {world} traces to {out}", flush=True)
