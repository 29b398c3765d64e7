"""Fan-out: one contract for running a per-rank function over trace paths, locally or on a cluster.

    run(fn, paths, engine="local" | "dask" | "ray", workers=None, address=None) -> [fn(path), ...]

`fn` is a picklable top-level function that takes a PATH (workers read the file themselves: a path is
a few bytes on the wire, a trace is gigabytes) and returns a small summary. Results come back in the
order of `paths`, whichever engine ran them, so the merge sees the same input everywhere.

local  a process pool (forkserver, else spawn: no fork of a driver that may hold threads), sized so
       that the ranks in flight fit in memory, never more workers than cores; one worker runs in-process.
dask   dask.distributed: a LocalCluster, or Client(address) for a running scheduler.
ray    ray.init(address=...) and a remote function.
dask and ray are optional extras, imported only when asked for.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..errors import UsageError

ENGINES = ("local", "dask", "ray")
# A rank's peak memory while summarised, measured (benchmarks/job_results.md): about 80 MB of
# interpreter, numpy and pandas, plus 4.2x the trace's JSON size (the bytes, the typed events, then the
# tables); the full single-rank analysis peaks at about 4.5x (benchmarks/results.md). Rounded up.
BASE_BYTES = 150 << 20
PER_JSON_BYTE = 4.5
MEMORY_SHARE = 0.7          # of the memory available now, what the pool may plan to use


CONNECT_S = 10        # seconds to reach a given scheduler before saying it cannot be reached


def json_bytes(path) -> int:
    """A trace's JSON size without reading it: a gzip file states it (mod 4 GiB) in its last 4 bytes."""
    p = Path(path)
    size = p.stat().st_size
    if p.name.endswith(".gz") and size >= 18:
        with open(p, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            isize = int.from_bytes(fh.read(4), "little")
        # ISIZE wraps at 4 GiB; real traces compress 5-20x, so never assume less than 5x.
        return max(isize, 5 * size)
    return size


def peak_bytes(path, factor: float = 1.0) -> int:
    return int(BASE_BYTES + factor * PER_JSON_BYTE * json_bytes(path))


def available_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def local_workers(paths, workers: int | None = None, factor: float = 1.0) -> int:
    """Workers for the local pool: as many as fit in memory at the largest rank's peak, <= cores."""
    if not paths:
        return 1
    fit = int(MEMORY_SHARE * available_bytes() // max(peak_bytes(p, factor) for p in paths))
    n = min(cores(), len(paths), max(1, fit))
    return max(1, min(n, workers)) if workers else n


def run(fn, paths, engine: str = "local", workers: int | None = None, address: str | None = None,
        factor: float = 1.0) -> list:
    with Session(engine, workers, address) as s:
        return s.map(fn, paths, factor)


class Session:
    """An engine held open across several fan-outs (a Dask or Ray cluster starts once per job)."""

    def __init__(self, engine: str = "local", workers: int | None = None, address: str | None = None):
        if engine not in ENGINES:
            raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        if workers is not None and workers < 1:
            raise UsageError("--workers must be at least 1")
        if address and engine == "local":
            raise UsageError("--address needs --engine dask or --engine ray")
        self.engine, self.workers, self.address = engine, workers, address
        self._client = self._cluster = None
        self._ray_started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def map(self, fn, paths, factor: float = 1.0, extra: list | None = None) -> list:
        """fn(path) per path, or fn(path, extra[i]) where `extra` is given (small, picklable: it travels)."""
        paths = [str(p) for p in paths]
        if not paths:
            return []
        extra = [None] * len(paths) if extra is None else list(extra)
        call = fn if all(x is None for x in extra) else _WithExtra(fn)
        args = paths if call is fn else list(zip(paths, extra))
        # (the engines size themselves by the files, and call with the arguments)
        return getattr(self, f"_{self.engine}")(call, args, paths, factor)

    def _local(self, fn, args, paths, factor):
        n = local_workers(paths, self.workers, factor)
        if n == 1:
            return [fn(a) for a in args]
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        # Biggest files first, so a large rank does not start last and hold up the end.
        order = sorted(range(len(paths)), key=lambda i: -json_bytes(paths[i]))
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            done = dict(zip(order, pool.map(fn, [args[i] for i in order])))
        return [done[i] for i in range(len(args))]

    def _dask(self, fn, args, paths, factor):
        if self._client is None:
            try:
                from dask.distributed import Client, LocalCluster
            except ImportError:
                raise UsageError("--engine dask needs the dask extra: pip install 'traceinsight-gpu[dask]'") from None
            if self.address:
                try:
                    self._client = Client(self.address, timeout=CONNECT_S)
                except (OSError, TimeoutError) as exc:     # (it had ended in "please report it")
                    raise UsageError(f"--address {self.address}: could not reach a Dask scheduler there "
                                     f"({type(exc).__name__}: {exc})") from None
            else:
                n = self.workers or local_workers(paths, None, factor)
                self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=n > 1,
                                             dashboard_address=None)
                self._client = Client(self._cluster)
        futures = self._client.map(fn, args, pure=False)
        return self._client.gather(futures)

    def _ray(self, fn, args, paths, factor):
        try:
            import ray
        except ImportError:
            raise UsageError("--engine ray needs the ray extra: pip install 'traceinsight-gpu[ray]'") from None
        if not ray.is_initialized():
            kw = {"address": self.address} if self.address else {
                "num_cpus": self.workers or local_workers(paths, None, factor), "include_dashboard": False}
            try:
                ray.init(ignore_reinit_error=True, log_to_driver=False, **kw)
            except (ConnectionError, OSError, TimeoutError) as exc:
                if not self.address:
                    raise
                raise UsageError(f"--address {self.address}: could not reach a Ray cluster there "
                                 f"({type(exc).__name__}: {exc})") from None
            self._ray_started = True
        remote = ray.remote(num_cpus=1)(_invoke)     # (a function: ray.remote takes no callable object)
        return ray.get([remote.remote(fn, a) for a in args])

    def close(self):
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None
        if self._ray_started:
            import ray
            ray.shutdown()
            self._ray_started = False


def _invoke(fn, arg):
    return fn(arg)


class _WithExtra:
    """fn(path, extra) called with one (path, extra) tuple, as every engine's map passes one argument."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, arg):
        return self.fn(*arg)
