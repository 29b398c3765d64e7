"""Shared fixtures: where the real traces live, a writer for tiny synthetic traces, the real CLI.

The real traces (tests/data/external/, copied with their licences: see its README) are other people's
recordings; they are part of the repository, so a fresh clone runs every test that reads them.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXTERNAL_TRACES = REPO_ROOT / "tests" / "data" / "external"
HTA_DIR = EXTERNAL_TRACES / "hta"
TRACELENS_DIR = EXTERNAL_TRACES / "tracelens"


def hta_trace_names() -> list[str]:
    """File names of the real traces in tests/data/external/hta."""
    return sorted(p.name for p in HTA_DIR.iterdir()
                  if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz")))


def hta_path(name: str) -> Path:
    """Path of one real trace (they are in the repository: a missing one is an error, not a skip)."""
    p = HTA_DIR / name
    assert p.is_file(), f"external trace {p} is missing from the repository"
    return p


_DOCS: dict[str, dict] = {}


def doc_of(path: str) -> dict:
    """The JSON document `analyze` writes for a trace (a path relative to the repository), cached per session;
    skipped where the file is absent."""
    if path not in _DOCS:
        from traceinsight.report.analyze import analyze_file
        from traceinsight.report.document import document
        p = REPO_ROOT / path
        if not p.exists():
            pytest.skip(f"{p} not found")
        _DOCS[path] = document(analyze_file(p))
    return _DOCS[path]


def findings_of(d: dict) -> list[dict]:
    """A document's ranked and minor findings."""
    return d["findings"] + d["minor_findings"]


_RAW_BYTES: dict[str, bytes] = {}


def raw_text(path: Path) -> bytes:
    """The trace's JSON text (gunzipped), cached: the tests re-read the same few files often."""
    key = str(path)
    if key not in _RAW_BYTES:
        data = Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        _RAW_BYTES[key] = data
    return _RAW_BYTES[key]


def raw_json(path: Path, **kw):
    """A fresh parse of the trace with the standard json module: the independent oracle's input."""
    return json.loads(raw_text(path), **kw)


_MODELS: dict = {}


def hta_model(name: str):
    """The model of a real trace, built once per session (tests only read it)."""
    if name not in _MODELS:
        from traceinsight.trace.load import load_trace
        from traceinsight.trace.model import build_model
        _MODELS[name] = build_model(load_trace(hta_path(name)))
    return _MODELS[name]


def raw_events(doc) -> list:
    return doc if isinstance(doc, list) else doc["traceEvents"]


def write_trace(path: Path, doc, gz: bool | None = None) -> Path:
    """Write a trace document (a dict, or a bare list of events) as JSON; gzip if asked or if *.gz."""
    path = Path(path)
    data = json.dumps(doc).encode() if not isinstance(doc, (bytes, str)) else (
        doc.encode() if isinstance(doc, str) else doc)
    if gz or (gz is None and path.name.endswith(".gz")):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def X(name, cat, ts, dur=None, pid=1, tid=1, **args):
    """A complete ('X') event; args given as keywords (use args_={...} for names with spaces)."""
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts}
    if dur is not None:
        e["dur"] = dur
    extra = args.pop("args_", None)
    if args or extra:
        e["args"] = {**args, **(extra or {})}
    return e


def tiny_gpu_trace(rank: int | None = None, steps: int = 3, step_us: float = 1000.0) -> dict:
    """A small but complete Kineto-like trace: steps, ops, launches, kernels, a memcpy, a memset."""
    ev = []
    corr = 100
    for s in range(steps):
        t = s * step_us
        ev.append(X(f"ProfilerStep#{s + 1}", "user_annotation", t, step_us - 10, pid=10, tid=10))
        ev.append(X("aten::mm", "cpu_op", t + 10, 100, pid=10, tid=10, args_={"External id": s * 10 + 1}))
        for k in range(3):
            corr += 1
            ev.append(X("cudaLaunchKernel", "cuda_runtime", t + 20 + 20 * k, 5, pid=10, tid=10,
                        correlation=corr, args_={"External id": s * 10 + 1}))
            ev.append(X(f"gemm_{k}", "kernel", t + 30 + 100 * k, 80, pid=0, tid=7,
                        correlation=corr, device=0, stream=7))
        corr += 1
        ev.append(X("cudaMemcpyAsync", "cuda_runtime", t + 500, 10, pid=10, tid=10, correlation=corr))
        ev.append(X("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", t + 520, 50, pid=0, tid=7,
                    correlation=corr, device=0, stream=7, bytes=4096))
        corr += 1
        ev.append(X("cudaMemsetAsync", "cuda_runtime", t + 600, 5, pid=10, tid=10, correlation=corr))
        ev.append(X("Memset (Device)", "gpu_memset", t + 610, 5, pid=0, tid=7,
                    correlation=corr, device=0, stream=7))
    doc = {"schemaVersion": 1,
           "deviceProperties": [{"id": 0, "name": "Test GPU", "totalGlobalMem": 2**34,
                                 "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
           "traceEvents": ev}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return doc


@pytest.fixture
def make_trace(tmp_path):
    """make_trace(doc, name="trace.json", gz=None) -> Path of the written trace under tmp_path."""
    def _make(doc, name: str = "trace.json", gz: bool | None = None) -> Path:
        return write_trace(tmp_path / name, doc, gz)
    return _make


@pytest.fixture
def hta_dir() -> Path:
    assert HTA_DIR.is_dir(), f"external traces missing from the repository: {HTA_DIR}"
    return HTA_DIR


def cli_env() -> dict:
    env = dict(os.environ)
    env.pop("TRACEINSIGHT_DEBUG", None)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["COLUMNS"] = "120"
    return env


def run_cli_args(args, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the real command line: python -m traceinsight ARGS, stdin closed (not a terminal)."""
    return subprocess.run([sys.executable, "-m", "traceinsight", *map(str, args)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          cwd=str(cwd or REPO_ROOT), env=cli_env(), timeout=timeout)


@pytest.fixture(scope="session")
def run_cli():
    return run_cli_args
