"""Speed and memory of multi-rank (job) analysis.

    python benchmarks/bench_job.py [--ranks 256] [--merge-ranks 4096] [--merge-collectives 300]
                                   [--per-rank TRACE ...] [--keep DIR] [--skip-job] [--engine local]

1. job     `--ranks` ranks synthesized from a real NCCL rank (benchmarks/job_synth.py: per-host clock skew,
           one straggler) into a temporary directory, then analyze_jobs(engine=--engine) in a fresh
           process. Reported: wall time, the driver's peak RSS, and the peak RSS of every process
           of the run (driver, pool workers, forkserver), sampled from /proc VmHWM.
           Targets: 256 ranks within 60 s, every process under 1 GB.
2. merge   the cross-rank part alone (match, clock, straggler, waits, bandwidth) on `--merge-ranks`
           summaries of `--merge-collectives` collectives each, built in memory (no traces).
           Target: 4,096 x 300 under 1 s.
3. rank    the per-rank task (rank_task.summarize) alone on each --per-rank trace, in a fresh process:
           time and peak RSS, for the cluster plan.
Prints the figures as JSON (benchmarks/job_results.md holds them, with the machine and the plan).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(pid: int) -> float:
    """utime + stime of a process so far, seconds."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _descendants(pid: int) -> list[int]:
    """Every process below pid (children of any of its threads: Dask starts workers from a thread)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = []
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids += [int(x) for x in fh.read().split()]
        except OSError:
            pass
        out += kids
        todo += kids
    return out


def run_measured(cmd: list[str]) -> tuple[float, dict, str, int, float]:
    """Run cmd; wall seconds, peak RSS (MB) per process seen (pid -> MB), stdout, the child's pid, and
    the CPU seconds of all its processes.

    Peaks are /proc VmHWM, sampled every 20 ms: ru_maxrss of a child is useless here, Linux carries
    the parent's high-water mark across fork and exec. CPU time is sampled the same way (a process
    loses at most its last 20 ms), and does not depend on what else the machine runs."""
    peaks: dict[int, int] = {}
    cpu: dict[int, float] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    done = threading.Event()

    def poll():
        while not done.is_set():
            for p in [proc.pid] + _descendants(proc.pid):
                peaks[p] = max(peaks.get(p, 0), _hwm_kb(p))
                cpu[p] = max(cpu.get(p, 0.0), _cpu_s(p))
            time.sleep(0.02)
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    th.join()
    if proc.returncode:
        raise SystemExit(f"{cmd} failed ({proc.returncode})")
    return wall, {p: kb / 1024 for p, kb in peaks.items() if kb}, out, proc.pid, sum(cpu.values())


CHILD_JOB = """
import json, sys, time
t = time.perf_counter()
from traceinsight.job import analyze_jobs
blocks = analyze_jobs([sys.argv[1]], engine=sys.argv[2])
b = blocks[0]
print(json.dumps({"seconds_in_process": time.perf_counter() - t,
                  "straggler": b["straggler"]["rank"], "cause": b["straggler"]["cause"],
                  "offsets_us": b["clock"]["offsets_us"], "method": b["clock"]["method"],
                  "matched": b["matched_collectives"], "ranks": b["ranks_present"]}))
"""

CHILD_RANK = """
import json, sys, time
t = time.perf_counter()
from traceinsight.job.rank_task import summarize
t1 = time.perf_counter()
s = summarize(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t, "summarize_s": t2 - t1, "json_bytes": s.file_bytes,
                  "collectives": s.n_coll, "error": s.error}))
"""


def _gen(args):
    out, ranks, part, parts, seed = args
    import job_synth
    job_synth.synthesize(out, ranks, seed=seed, only=range(part, ranks, parts))


def bench_job(ranks: int, keep: str | None, engine_name: str = "local") -> dict:
    import job_synth
    out = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="job_bench_"))
    truth_file = out / "truth.json"
    if not truth_file.exists():
        t = time.perf_counter()
        with ProcessPoolExecutor(2) as ex:
            list(ex.map(_gen, [(str(out), ranks, k, 2, 0) for k in range(2)]))
        truth = job_synth.synthesize(out, ranks, seed=0, only=range(0))      # the truth, no files
        truth.pop("files")
        truth_file.write_text(json.dumps(truth))
        print(f"synthesized {ranks} ranks in {time.perf_counter() - t:.1f} s into {out}", file=sys.stderr)
    truth = json.loads(truth_file.read_text())
    files = sorted(out.glob("rank*.json.gz"))
    from traceinsight.job import engine
    load = os.getloadavg()[0]
    wall, peaks, stdout, pid, cpu_s = run_measured([sys.executable, "-c", CHILD_JOB, str(out), engine_name])
    res = json.loads(stdout.strip().splitlines()[-1])
    offs = {int(k): v for k, v in res.pop("offsets_us").items()}
    err = max(abs(offs[r] - truth["offsets_us"][str(r)]) for r in offs)
    driver = peaks.pop(pid)
    return {"engine": engine_name, "ranks": len(files), "gz_mb_per_rank": round(files[0].stat().st_size / 2**20, 2),
            "json_mb_per_rank": round(engine.json_bytes(files[0]) / 2**20, 1),
            "wall_s": round(wall, 2), "in_process_s": round(res["seconds_in_process"], 2),
            "cpu_s_all_processes": round(cpu_s, 1), "load_avg_before": round(load, 2),
            "driver_peak_mb": round(driver), "max_other_process_peak_mb": round(max(peaks.values(), default=0)),
            "other_processes": len(peaks),
            "straggler_found": res["straggler"] == truth["straggler"], "cause": res["cause"],
            "clock_method": res["method"], "max_offset_error_us": round(err, 1), "matched": res["matched"]}


def fake_summaries(ranks: int, colls: int, seed: int = 0) -> list:
    """RankSummary objects as the rank task would return them for a DDP-like job: 10 steps, 8 ranks a
    host with per-host skew, rank 5 late to the first collective of every step."""
    import numpy as np
    from traceinsight.job.summary import WORK, RankSummary
    rng = np.random.default_rng(seed)
    steps = 10
    per = colls // steps
    step = np.repeat(np.arange(steps), per)
    idx = np.tile(np.arange(per), steps)
    t = step * 100_000.0 + idx * 1000.0 + 50_000
    n_hosts = (ranks + 7) // 8
    skew = np.concatenate([[0.0], rng.uniform(-40_000, 40_000, n_hosts - 1)])
    out = []
    for r in range(ranks):
        start = t + rng.uniform(0, 20, len(t))
        end = t + 800 + rng.uniform(0, 5, len(t))
        if r == 5:
            start[idx == 0] += 5000
        end[idx == 0] += 5000
        # Each step's own work (summary.WORK, us): rank 5 spends 5 ms more a step in host code.
        work = {k: np.full(steps, 10_000.0) for k in WORK}
        if r == 5:
            work["untraced"] = work["untraced"] + 5000
        out.append(RankSummary(
            path=f"rank{r}.json.gz", rank=r, world_size=ranks, backend="nccl", host=f"node{r // 8}",
            pg_config=[{"name": "0", "desc": "default_pg", "size": ranks}],
            epoch_ns=1_700_000_000_000_000_000 + int(skew[r // 8] * 1000), epoch_source="baseTimeNanoseconds",
            has_gpu=True, pgs=["0"], ops=["allreduce"], dtypes=["Float"],
            steps={"step": np.arange(steps), "start": np.arange(steps) * 100_000.0,
                   "end": np.arange(1, steps + 1) * 100_000.0, "dur": np.full(steps, 100_000.0),
                   "partial": np.zeros(steps, dtype=bool), "comm": np.full(steps, 30_000.0),
                   "exposed": np.full(steps, 20_000.0), "cpu_own": np.full(steps, 60_000.0 + 5000 * (r == 5)),
                   "compute": np.full(steps, 50_000.0), "profiler_cost": np.full(steps, 5_000.0), **work},
            coll={"pg": np.zeros(len(t), dtype=np.int64), "seq": np.arange(len(t)), "step": step, "idx": idx,
                  "op": np.zeros(len(t), dtype=np.int64), "dtype": np.zeros(len(t), dtype=np.int64),
                  "nelems": np.full(len(t), 1 << 22), "out_nelems": np.full(len(t), 1 << 22),
                  "group": np.full(len(t), ranks), "enqueue": t - 100, "start": start, "end": end}))
    return out


def bench_merge(ranks: int, colls: int, repeat: int = 3) -> dict:
    from traceinsight.job import _cross_rank
    from traceinsight.job.discover import group
    summaries = fake_summaries(ranks, colls)
    best, b = None, None
    for _ in range(repeat):
        t = time.perf_counter()
        jobs, warnings = group(summaries)
        b, _ = _cross_rank(jobs[0], None, warnings)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return {"ranks": ranks, "collectives_per_rank": colls, "merge_s": round(best, 3),
            "straggler": b["straggler"]["rank"], "clock_method": b["clock"]["method"], "hosts": b["clock"]["hosts"]}


def bench_rank(trace: str) -> dict:
    wall, peaks, stdout, pid, _ = run_measured([sys.executable, "-c", CHILD_RANK, trace])
    res = json.loads(stdout.strip().splitlines()[-1])
    res["peak_mb"] = round(peaks[pid])
    res.update(trace=Path(trace).name, wall_s=round(wall, 2), json_mb=round(res["json_bytes"] / 2**20, 1))
    res["mb_per_json_mb"] = round((res["peak_mb"]) / max(res["json_mb"], 1e-9), 2)
    return res


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {len(os.sched_getaffinity(0))} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--merge-ranks", type=int, default=4096)
    ap.add_argument("--merge-collectives", type=int, default=300)
    ap.add_argument("--per-rank", nargs="*", default=[])
    ap.add_argument("--keep", help="keep the synthesized job here (reused when present)")
    ap.add_argument("--skip-job", action="store_true")
    ap.add_argument("--engine", default="local", help="engine for the job run (local, dask, ray)")
    a = ap.parse_args(argv)
    res = {"machine": machine(), "date": _dt.date.today().isoformat()}
    if not a.skip_job:
        res["job"] = bench_job(a.ranks, a.keep, a.engine)
        print(json.dumps(res["job"]), file=sys.stderr)
    res["per_rank"] = [bench_rank(t) for t in a.per_rank]
    for r in res["per_rank"]:
        print(json.dumps(r), file=sys.stderr)
    res["merge"] = bench_merge(a.merge_ranks, a.merge_collectives)
    print(json.dumps(res["merge"]), file=sys.stderr)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
