"""Synthesize an N-rank job from one real rank trace: per-host clock skew and one injected straggler.

    python benchmarks/job_synth.py OUT_DIR --ranks 256 [--source TRACE] [--ranks-per-host 8]
        [--skew-ms 40] [--straggler 5] [--delay-ms 6] [--mode host|gpu] [--no-hostnames]

Every rank is the source trace (default: the A100 rank of tests/data/job/hta, NCCL collectives),
changed the way a real job would differ (used by tests/test_job.py and bench_job.py; its output is
never committed):
  * clock skew: each host's clock reads off by a random amount within +-skew_ms (host 0 exact); every
    rank of a host carries its host's skew, and the host name unless --no-hostnames.
  * straggler: at each step the straggler arrives `delay_ms` late at the step's first collective.
      host  mode: it spends delay_ms at the start of the step in Python the profiler does not see
            (a gap on its CPU timeline, everything after it later);
      gpu   mode: its last compute kernel before that collective runs delay_ms longer.
    The other ranks wait for it: that collective's NCCL kernel lasts delay_ms longer on them, and all
    they do afterwards happens later.
  * jitter: every NCCL kernel's start and end move by up to +-jitter_us per rank (real ranks never
    finish a collective at the same nanosecond).
  * --prewindow-rank R: rank R also holds an NCCL kernel launched before the profiling window.
Returns / prints the truth: straggler, delay, per-rank clock offsets (us, host of rank 0 = 0).
"""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import sys
from pathlib import Path

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "tests" / "data" / "job" / "hta" / "a100_rank0_of2_nccl.json.gz"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}


def load(source: Path) -> dict:
    raw = Path(source).read_bytes()
    return msgspec.json.decode(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _insert(ts, dur, stretch_ok, points, delay, movable=None):
    """Open a gap of `delay` at each point: later events move, events spanning a point get longer."""
    points = np.sort(np.asarray(points, dtype=float))
    before_start = np.searchsorted(points, ts, side="right")
    before_end = np.searchsorted(points, ts + dur, side="right")
    if movable is not None:
        before_start = np.where(movable, before_start, 0)
    span = np.where(stretch_ok, before_end - before_start, 0)
    return ts + before_start * delay, dur + span * delay


def synthesize(out_dir, ranks: int, source: Path = DEFAULT_SOURCE, ranks_per_host: int = 8,
               skew_ms: float = 40.0, straggler: int | None = 5, delay_ms: float = 6.0, mode: str = "host",
               hostnames: bool = True, jitter_us: float = 5.0, prewindow_rank: int | None = None,
               seed: int = 0, level: int = 1, doc: dict | None = None, only=None) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = doc if doc is not None else load(source)
    events = doc["traceEvents"]
    x = [i for i, e in enumerate(events) if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    ts = np.array([events[i]["ts"] for i in x], dtype=float)
    dur = np.array([events[i].get("dur", 0) or 0 for i in x], dtype=float)
    cat = np.array([events[i].get("cat") or "" for i in x], dtype=object)
    name = np.array([str(events[i].get("name")) for i in x], dtype=object)
    is_gpu = np.isin(cat, list(GPU_CATS))
    is_comm = is_gpu & np.array(["nccl" in n.lower() for n in name])
    is_kernel = cat == "kernel"
    steps = sorted((ts[j], ts[j] + dur[j]) for j in np.flatnonzero(np.char.startswith(name.astype(str), "ProfilerStep#")))
    # Per step: the first NCCL kernel that starts inside it (the collective the straggler is late to).
    firsts = []
    for s0, s1 in steps:
        k = np.flatnonzero(is_comm & is_kernel & (ts >= s0) & (ts < s1))
        if len(k):
            firsts.append(k[np.argmin(ts[k])])
    firsts = np.array(firsts, dtype=int)
    rng = np.random.default_rng(seed)
    n_hosts = (ranks + ranks_per_host - 1) // ranks_per_host
    skew = np.concatenate([[0.0], rng.uniform(-skew_ms, skew_ms, n_hosts - 1) * 1000])
    delay = delay_ms * 1000
    truth = {"straggler": straggler, "delay_us": delay, "mode": mode, "files": [],
             "offsets_us": {r: float(skew[r // ranks_per_host]) for r in range(ranks)}}
    base = {k: v for k, v in doc.items() if k != "traceEvents"}
    for r in range(ranks):
        # Every rank draws its jitter, written or not: a subset (`only`) gets the same bytes.
        j = rng.uniform(-jitter_us, jitter_us, size=(2, int(is_comm.sum())))
        if only is not None and r not in only:
            continue
        t, d = ts.copy(), dur.copy()
        if r == straggler and mode == "host":
            # A gap just after each step starts, on the CPU and so on everything it launches later.
            t, d = _insert(t, d, ~is_gpu, [s0 + 0.5 for s0, _ in steps], delay)
        elif r == straggler and mode == "gpu":
            pts = []
            for f in firsts:
                prev = np.flatnonzero(is_kernel & ~is_comm & (ts + dur <= ts[f]))
                if len(prev):
                    p = prev[np.argmax(ts[prev] + dur[prev])]
                    pts.append(ts[p] + dur[p] - 0.001)
            stretch = is_kernel & ~is_comm & np.isin(ts + dur - 0.001, pts)
            t, d = _insert(t, d, stretch, pts, delay, movable=is_gpu)    # the CPU runs on unchanged
        elif straggler is not None:
            # Waiting ranks: the first collective of each step ends later, and so does all that follows.
            pts = ts[firsts] + dur[firsts] - 0.001
            target = np.zeros(len(t), dtype=bool)
            target[firsts] = True
            t, d = _insert(t, d, ~is_gpu | target, pts, delay)
        if jitter_us:
            t[is_comm] += j[0]
            d[is_comm] = np.maximum(d[is_comm] + j[1] - j[0], 0.1)
        t += skew[r // ranks_per_host]
        ev = list(events)
        for i, tt, dd in zip(x, t, d):
            ev[i] = dict(events[i], ts=round(float(tt), 3), dur=round(float(dd), 3))
        if r == prewindow_rank and len(firsts):
            # An NCCL kernel launched before the window: no launch call, no record_param_comms.
            k = copy.deepcopy(events[x[firsts[0]]])
            k["ts"] = round(float(t[0]) + 1.0, 3)
            k["args"] = {kk: vv for kk, vv in (k.get("args") or {}).items() if kk in ("device", "stream")}
            k["args"]["correlation"] = 987654321
            ev.append(k)
        dist = dict(base.get("distributedInfo") or {}, rank=r, world_size=ranks)
        dist["pg_config"] = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                              "pg_size": ranks, "ranks": list(range(ranks))}]
        head = dict(base, distributedInfo=dist, traceName=f"rank{r}")
        if hostnames:
            head["host_name"] = f"node{r // ranks_per_host:03d}"
        data = msgspec.json.encode({**head, "traceEvents": ev})
        path = out / (f"rank{r}.json.gz" if level else f"rank{r}.json")    # level 0: plain JSON, faster
        path.write_bytes(gzip.compress(data, compresslevel=level) if level else data)
        truth["files"].append(str(path))
    return truth


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--ranks-per-host", type=int, default=8)
    ap.add_argument("--skew-ms", type=float, default=40.0)
    ap.add_argument("--straggler", type=int, default=5)
    ap.add_argument("--delay-ms", type=float, default=6.0)
    ap.add_argument("--mode", choices=("host", "gpu"), default="host")
    ap.add_argument("--no-hostnames", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    truth = synthesize(a.out, a.ranks, a.source, a.ranks_per_host, a.skew_ms, a.straggler, a.delay_ms, a.mode,
                       not a.no_hostnames, seed=a.seed)
    truth.pop("files")
    json.dump(truth, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
