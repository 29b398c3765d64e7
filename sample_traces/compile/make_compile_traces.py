"""torch.compile compiling inside the profiled window: traces for the recompile rule, with their un-profiled steps.

    python sample_traces/compile/make_compile_traces.py --out OUT

One training step (4 blocks of LayerNorm, Linear(512, 2048), GELU, Linear(2048, 512) with a residual; batch 16;
AdamW(fused=True)) compiled with torch.compile, fed a new sequence length every step (64, 72, 80, ...), as a
variable-length text batch is without padding to a few buckets:

  static     torch.compile(dynamic=False): every new length recompiles (recompile_limit raised to 256 so
             that it keeps compiling rather than falling back to eager after 8 lengths).
  dynamic    torch.compile(dynamic=True): one graph for every length (the fix).
  limit      torch.compile(dynamic=False) with the default recompile_limit and 12 lengths in turn: after 8
             compiled lengths the other 4 run eagerly.
  cold       dynamic=True, profiled from a fresh compile (wait=0, warmup=0): the first step holds the compile.
  midshape   torch.compile() (dynamic=None), length 128 every step but one: the 4th profiled step's 200
             recompiles the frame once (automatic dynamic shapes), mid-window; 8 active steps.
  ro_shapes  torch.compile(mode="reduce-overhead", dynamic=True), a new length every step: no recompile, but
             the CUDA-graph tree records a new graph for each new length.
  ro_fixed   the same at one length (512, as padding every batch to it would give): its graphs replay.
  conv_static, conv_dynamic  held out: a 3-conv net (BatchNorm, ReLU; SGD foreach), batch 16, a new square image
             size every step (64, 72, ... while profiled), under dynamic=False (every step recompiles) and
             dynamic=True; both timed over the same 12 new sizes (512-600), default options only.

Each case is profiled with default options, dynamic and limit also with with_stack=True, record_shapes=True (6 active steps after
1 wait and 1 warm-up step, each a new length), and timed un-profiled: the mean and median step over 12 steps,
each a new length, 60 for the others (the compile is the program's, so it stays in the mean). OUT/manifest.json holds the figures.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # -> sample_traces/workloads
from workloads.common import profile_step  # noqa: E402

CPU = os.environ.get("TI_CPU") == "1" or not torch.cuda.is_available()
DEV = torch.device("cpu" if CPU else "cuda")
D, HID, BATCH = (64, 128, 2) if CPU else (512, 2048, 16)
# One sequence of lengths for every case, so that no trace meets a length (and a compiled graph) an earlier one
# made; Inductor's on-disk caches are off as well (run with TORCHINDUCTOR_FX_GRAPH_CACHE=0 and
# TORCHINDUCTOR_AUTOGRAD_CACHE=0): each compile here is a first compile, as a new length's is in a real run.
LENGTHS = itertools.count(64, 8)
# midshape's one new length: its 9th call, the 4th profiled step (3 warm-up calls, then wait 1, warmup 1).
MIDSHAPE_AT = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, HID)
        self.fc2 = nn.Linear(HID, D)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln(x))))


def make(case: str):
    import torch._dynamo as dynamo
    dynamo.reset()
    dynamo.config.recompile_limit = 256 if case == "static" else 8
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(4)]).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=not CPU)
    # midshape: torch.compile's default (dynamic=None): the one new length recompiles with dynamic shapes.
    # ro_*: mode="reduce-overhead" (CUDA-graph trees), dynamic=True: a new length records a new graph.
    if case.startswith("ro_"):
        fwd = torch.compile(model, mode="reduce-overhead", dynamic=True)
    else:
        fwd = torch.compile(model, dynamic=None if case == "midshape" else (case in ("dynamic", "cold")))
    counter = [0]

    def step():
        if case == "limit":
            L = 64 + 8 * (counter[0] % 12)
        elif case == "midshape":
            L = 200 if counter[0] == MIDSHAPE_AT else 128
        elif case == "ro_fixed":
            L = 512
        else:
            L = next(LENGTHS)
        counter[0] += 1
        x = torch.randn(BATCH, L, D, device=DEV)
        loss = fwd(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


# Held-out (pre-registered before it was recorded): a conv net fed a new image size every step. Its profiled
# and warm-up sizes come from CONV_SIZES (none of them timed); both cases are timed over the same 12 new sizes,
# CONV_TIMED, so the recompiling step and the fixed one are measured at the same shapes.
CONV_SIZES = itertools.count(64, 8)
CONV_TIMED = list(range(512, 512 + 12 * 8, 8))


def make_conv(case: str):
    import torch._dynamo as dynamo
    dynamo.reset()
    dynamo.config.recompile_limit = 256
    torch.manual_seed(0)
    c = 8 if CPU else 64
    model = nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
        nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)
    fwd = torch.compile(model, dynamic=case == "conv_dynamic")
    sizes = {"it": CONV_SIZES}

    def step():
        hw = next(sizes["it"])
        x = torch.randn(4 if CPU else 16, 3, hw, hw, device=DEV)
        y = torch.randint(0, 10, (x.shape[0],), device=DEV)
        loss = nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step.timed_sizes = lambda: sizes.__setitem__("it", iter(CONV_TIMED))
    return step


def sync():
    if not CPU:
        torch.cuda.synchronize()


def timed(step, n: int) -> dict:
    ts = []
    for _ in range(n):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"mean_ms": round(statistics.fmean(ts), 3), "median_ms": round(statistics.median(ts), 3),
            "steps": n, "step_ms": [round(t, 3) for t in ts]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12, help="un-profiled steps of the recompiling cases")
    ap.add_argument("--cases", default="static,dynamic,limit,cold")
    ap.add_argument("--stack", default="dynamic,limit",
                    help="cases also profiled with with_stack (a compile under with_stack records every frame of "
                         "the compiler: static's window made an 11.5 GB trace on an H200 host)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "manifest.json"
    man = json.loads(path.read_text()) if path.exists() else {}
    man |= {"gpu": "cpu" if CPU else torch.cuda.get_device_name(), "torch": torch.__version__}
    man.setdefault("cases", {})
    for case in args.cases.split(","):
        entry = {}
        settings = [("default", False)] + ([("stack", True)] if case in args.stack.split(",") else [])
        for setting, stack in settings:
            step = make_conv(case) if case.startswith("conv_") else make(case)
            if case != "cold":
                for _ in range(3 if case != "limit" else 14):      # compile and warm up (limit: every length once)
                    step()
                sync()
            wait, warm = (0, 0) if case == "cold" else (1, 1)
            t0 = time.perf_counter()
            profile_step(step, DEV, str(out / f"{case}__{setting}.json.gz"), with_stack=stack,
                         active=8 if case == "midshape" else 6,
                         wait=wait, warmup=warm, record_shapes=stack)
            entry[f"{setting}_profile_s"] = round(time.perf_counter() - t0, 2)
            if setting == "default" and case.startswith("conv_"):
                step.timed_sizes()
                entry["unprofiled"] = timed(step, len(CONV_TIMED))
                entry["unprofiled"]["sizes"] = CONV_TIMED
            elif setting == "default":
                n = args.steps if case in ("static", "limit", "ro_shapes") else 60   # (midshape: 128 again after)
                entry["unprofiled"] = timed(step, n)
            print(case, setting, entry, flush=True)
        man["cases"][case] = entry
        path.write_text(json.dumps(man, indent=1))


if __name__ == "__main__":
    main()
