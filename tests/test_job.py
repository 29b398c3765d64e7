"""Multi-rank (job) analysis: real gloo jobs, synthesized NCCL jobs, engines, discovery, clocks, views.

Everything read here is in the repository: tests/data/job (real gloo jobs recorded with
tests/data/job/make_gloo_job.py, and one rank of an HTA NCCL trace) and jobs synthesized from it by
benchmarks/job_synth.py into a temporary directory.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from traceinsight.errors import TraceError, UsageError
from traceinsight.job import analyze_job, analyze_jobs, clock, discover, engine
from traceinsight.job.analysis import per_step_union
from traceinsight.trace.collectives import BUS_FACTOR
from traceinsight.trace.load import expand
from traceinsight.render import job_view

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "job"
NCCL_RANK0 = DATA / "hta" / "a100_rank0_of2_nccl.json.gz"


def _synth_module():
    spec = importlib.util.spec_from_file_location("job_synth", ROOT / "benchmarks" / "job_synth.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def synth():
    mod = _synth_module()
    doc = mod.load(NCCL_RANK0)

    def make(path, ranks, **kw):
        return mod.synthesize(path, ranks, doc=doc, level=0, **kw)
    return make


# ---- real gloo jobs --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gloo_blocks():
    return {name: analyze_job([DATA / name], workers=1) for name in ("gloo2_host", "gloo4_data", "gloo2_compute")}


@pytest.mark.parametrize("name, rank, cause", [("gloo2_host", 1, "host-bound"), ("gloo4_data", 2, "data-loading"),
                                               ("gloo2_compute", 0, "slower-cpu-ops")])
def test_gloo_job_names_straggler_and_cause(gloo_blocks, name, rank, cause):
    b = gloo_blocks[name]
    st = b["straggler"]
    assert (st["rank"], st["cause"]) == (rank, cause)
    assert st["lag_ms_per_step"] >= 0.02 * b["median_step_ms"]
    # The ranks that waited for it show the wait; the straggler itself barely waits.
    waits = {r["rank"]: r["collective_wait_ms_per_step"] for r in b["ranks"]}
    assert waits[rank] < 0.1 * min(w for r, w in waits.items() if r != rank)
    assert b["world_size"] == len(b["ranks"]) and b["missing_ranks"] == []
    # One host: the epoch times are trusted, no rank gets an offset.
    assert b["clock"]["method"] == "baseTimeNanoseconds"
    assert set(b["clock"]["offsets_us"].values()) == {0.0}
    assert set(b["rank_reports"]) == {str(rank), str(st["median_rank"])}


def test_a_cpu_job_says_what_its_figures_are(gloo_blocks):
    # A gloo job on CPUs had shown "exposed comm" and "overlap %" as if measured on GPUs, and "bytes 0".
    from traceinsight.render import job_view
    for b in gloo_blocks.values():
        assert any(w.startswith("no rank recorded GPU activity (a CPU job)") for w in b["warnings"])
    # Where the ranges carry no sizes (gloo in some torch versions) the table says unknown, not 0 bytes.
    row = {"op": "allreduce", "dtype": "", "bytes": 0, "group_size": 2, "count": 5, "time_us": 20.0,
           "algbw_gbps": None, "busbw_gbps": None}
    assert job_view._coll_rows({"collectives": [row]})[0][1:3] == ["unknown", "unknown"]


def test_gloo_compute_straggler_points_at_the_extra_ops(gloo_blocks):
    diffs = gloo_blocks["gloo2_compute"]["straggler"]["evidence"]["top_differences"]
    assert (diffs[0]["name"], diffs[0]["input_dims"]) == ("aten::mm", "[[512, 256], [256, 256]]")


def test_gloo_data_straggler_evidence_is_the_dataloader(gloo_blocks):
    ev = gloo_blocks["gloo4_data"]["straggler"]["evidence"]
    assert ev["work_delta_ms_per_step"]["data"] > 5.0          # 8 ms sleep per batch on rank 2
    assert "DataLoader" in ev["top_differences"][0]["name"]


def test_gloo_bandwidth_table(gloo_blocks):
    rows = gloo_blocks["gloo2_host"]["collectives"]
    ops = {(r["op"], r["bytes"]) for r in rows}
    # DDP's three gradient buckets (float32) and the buffer broadcast, 5 recorded steps each.
    assert ("broadcast", 65536 * 4) in ops and ("allreduce", 67848 * 4) in ops
    assert all(r["count"] == 5 and r["group_size"] == 2 for r in rows)
    ar = next(r for r in rows if r["op"] == "allreduce")
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * BUS_FACTOR["allreduce"](2), abs=1e-3)


# ---- synthesized NCCL jobs ---------------------------------------------------------------------------

@pytest.mark.parametrize("hostnames", [True, False])
def test_synthesized_job_recovers_straggler_and_clock(tmp_path, synth, hostnames):
    truth = synth(tmp_path, 6, ranks_per_host=2, straggler=3, delay_ms=6.0, skew_ms=40.0, hostnames=hostnames,
                  seed=3)
    b = analyze_job([tmp_path], workers=1)
    offs = {int(k): v for k, v in b["clock"]["offsets_us"].items()}
    want = {r: o - truth["offsets_us"][0] for r, o in truth["offsets_us"].items()}
    assert max(abs(want[r]) for r in want) > 10_000                     # tens of ms of skew went in
    assert max(abs(offs[r] - want[r]) for r in want) < 500               # ... and came out within 0.5 ms
    assert offs[0] == offs[1] and offs[2] == offs[3] and offs[4] == offs[5]   # one offset per host
    assert b["clock"]["method"] == "baseTimeNanoseconds+bellman-ford" and b["clock"]["hosts"] == 3
    st = b["straggler"]
    assert (st["rank"], st["cause"]) == (3, "host-bound")
    assert st["lag_ms_per_step"] == pytest.approx(6.0, abs=0.1)
    waits = {r["rank"]: r["collective_wait_ms_per_step"] for r in b["ranks"]}
    assert all(waits[r] == pytest.approx(6.0, abs=0.1) for r in waits if r != 3)


def test_synthesized_gpu_straggler_is_slower_kernels(tmp_path, synth):
    synth(tmp_path, 4, ranks_per_host=2, straggler=2, mode="gpu", seed=1)
    st = analyze_job([tmp_path], workers=1)["straggler"]
    assert (st["rank"], st["cause"]) == (2, "slower-kernels")
    assert st["evidence"]["top_differences"][0]["where"] == "gpu"


def test_prewindow_kernel_does_not_shift_the_match(tmp_path, synth):
    synth(tmp_path, 4, ranks_per_host=2, straggler=1, prewindow_rank=0, seed=2)
    b = analyze_job([tmp_path], workers=1)
    assert any("before the profiling window" in w for w in b["warnings"])
    assert not any("differ in op or size" in w for w in b["warnings"])
    assert (b["straggler"]["rank"], b["straggler"]["cause"]) == (1, "host-bound")
    assert b["matched_collectives"] == 21                    # 7 collectives x 3 steps, as on every rank


def test_balanced_job_has_no_straggler(tmp_path, synth):
    synth(tmp_path, 4, ranks_per_host=2, straggler=None, seed=4)
    b = analyze_job([tmp_path], workers=1)
    assert b["straggler"]["rank"] is None and b["straggler"]["cause"] == "none"
    assert all(r["collective_wait_ms_per_step"] < 0.1 for r in b["ranks"])


# ---- engines --------------------------------------------------------------------------------------

def _canon(blocks) -> str:
    return json.dumps(blocks, sort_keys=True)


def test_local_pool_and_dask_give_identical_json():
    pytest.importorskip("dask.distributed")
    local = analyze_jobs([DATA / "gloo4_data"], engine="local", workers=2)     # a 2-process pool
    dask = analyze_jobs([DATA / "gloo4_data"], engine="dask", workers=1)       # LocalCluster, in-process
    assert _canon(local) == _canon(dask)
    assert local[0]["straggler"]["rank"] == 2


RAY_SCRIPT = """
import json, sys
from traceinsight.job import analyze_jobs
a = analyze_jobs([sys.argv[1]], engine="ray", workers=1)
b = analyze_jobs([sys.argv[1]], engine="local", workers=1)
print(json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), a[0]["straggler"]["rank"])
"""


def test_ray_gives_identical_json():
    pytest.importorskip("ray")
    # Its own process: ray.init starts daemons that should not outlive the test.
    r = subprocess.run([sys.executable, "-c", RAY_SCRIPT, str(DATA / "gloo2_host")], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["True", "1"]


def test_engine_contract_and_errors(monkeypatch):
    paths = [str(p) for p in sorted((DATA / "gloo4_data").iterdir())]
    assert engine.run(Path, paths, workers=1) == [Path(p) for p in paths]     # order kept, paths in
    with pytest.raises(UsageError):
        engine.run(len, paths, engine="spark")
    with pytest.raises(UsageError):
        engine.run(len, paths, engine="local", address="tcp://x:1")
    monkeypatch.setitem(sys.modules, "ray", None)                           # the extra is not installed
    with pytest.raises(UsageError, match="ray extra"):
        engine.run(len, paths, engine="ray")


def test_local_workers_fit_memory_and_cores(monkeypatch):
    paths = [str(p) for p in sorted((DATA / "gloo4_data").iterdir())]
    monkeypatch.setattr(engine, "cores", lambda: 2)
    monkeypatch.setattr(engine, "available_bytes", lambda: 64 << 30)
    assert engine.local_workers(paths) == 2                   # never more than cores
    assert engine.local_workers(paths, workers=1) == 1
    monkeypatch.setattr(engine, "available_bytes", lambda: int(1.2 * engine.peak_bytes(paths[0])))
    assert engine.local_workers(paths) == 1                   # one rank's peak fits, two do not
    assert engine.json_bytes(paths[0]) > Path(paths[0]).stat().st_size     # gzip's own size field


# ---- discovery --------------------------------------------------------------------------------------

def test_unrelated_traces_are_separate_jobs_with_a_warning():
    blocks = analyze_jobs([DATA / "gloo2_host", DATA / "gloo4_data"], workers=1)
    assert sorted(b["world_size"] for b in blocks) == [2, 4]
    for b in blocks:
        assert any("2 different jobs" in w for w in b["warnings"])
    with pytest.raises(UsageError):
        analyze_job([DATA / "gloo2_host", DATA / "gloo4_data"], workers=1)


def test_single_nccl_rank_analyzes_with_missing_rank_note():
    b = analyze_job([NCCL_RANK0], workers=1)
    assert (b["world_size"], b["ranks_present"], b["missing_ranks"]) == (2, 1, [1])
    assert any("ranks missing (rank 1)" in w for w in b["warnings"])
    assert b["straggler"]["rank"] is None
    assert {r["op"] for r in b["collectives"]} == {"allreduce", "broadcast"}
    assert "0" in b["rank_reports"] and b["rank_reports"]["0"]["findings"]


def test_rank_from_file_name_and_repeated_ranks(tmp_path):
    import gzip
    for d in ("a", "b", "c"):
        (tmp_path / d).mkdir()
        for r in (0, 1):
            src = DATA / "gloo2_host" / f"rank{r}.json.gz"
            dst = tmp_path / d / f"run_rank_{r}.json.gz"
            if d == "c":       # no distributedInfo: the rank comes from the file name
                doc = json.loads(gzip.decompress(src.read_bytes()))
                doc.pop("distributedInfo")
                dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
            else:
                shutil.copy(src, dst)
    assert discover.peek(tmp_path / "a" / "run_rank_1.json.gz") == {"rank": 1, "world_size": 2}
    assert discover.peek(tmp_path / "c" / "run_rank_1.json.gz") == {"rank": 1, "world_size": None}
    assert discover.looks_like_job(expand([tmp_path / "c"]))
    assert not discover.looks_like_job([ROOT / "sample_traces" / "fp32_matmul__before.json.gz"])
    blocks = analyze_jobs([str(tmp_path / "*" / "*.json.gz")], workers=1)     # a glob over three runs
    assert len(blocks) == 3 and all(b["ranks_present"] == 2 and b["world_size"] == 2 for b in blocks)
    named = [b for b in blocks if any("from the file name" in w for w in b["warnings"])]
    assert len(named) == 1 and named[0]["straggler"]["rank"] == 1
    with pytest.raises(TraceError, match="no file matches"):
        expand([str(tmp_path / "nothing*.json")])
    with pytest.raises(TraceError, match="no such file"):
        expand([tmp_path / "rank9.json"])


def test_steps_option_limits_the_window():
    b = analyze_job([DATA / "gloo2_host"], workers=1, steps="5-6")
    assert b["steps"] == [5, 6]
    assert b["matched_collectives"] == 8
    with pytest.raises(UsageError):
        analyze_job([DATA / "gloo2_host"], workers=1, steps="five")


# ---- building blocks -----------------------------------------------------------------------------

def test_wait_union_does_not_double_count_overlapping_buckets():
    s = np.array([[0.0, 2.0, 10.0, np.nan]])
    e = np.array([[5.0, 4.0, 12.0, 1.0]])
    out = per_step_union(s, e, np.array([1, 1, 1, 2]), np.array([1, 2]))
    assert out.tolist() == [[7.0, 0.0]]          # [0,5) U [2,4) U [10,12): 7, not 9


def test_clock_same_host_gets_no_offset_and_hosts_are_corrected():
    # Two hosts, two ranks each; host B's clock reads 30 ms ahead. One allreduce per column.
    true_start = np.array([[0, 100, 200], [5, 105, 205], [10, 110, 210], [50, 150, 250]], dtype=float) * 10
    end = np.full_like(true_start, 0.0) + np.array([600, 1600, 2600], dtype=float)
    skew = np.array([0, 0, 30_000, 30_000], dtype=float)[:, None]
    c = clock.align(true_start + skew, end + skew, np.ones(3, bool), np.ones(4, bool), ["a", "a", "b", "b"])
    assert c.method == "baseTimeNanoseconds+bellman-ford" and c.violations == 3
    assert c.offsets[0] == c.offsets[1] == 0 and c.offsets[2] == c.offsets[3] == pytest.approx(30_000, abs=1)
    # One host: nothing is invented even though the times disagree.
    c1 = clock.align(true_start + skew, end + skew, np.ones(3, bool), np.ones(4, bool), ["a"] * 4)
    assert (c1.offsets == 0).all() and any("one host" in w for w in c1.warnings)
    # Consistent epoch times: no correction at all.
    c2 = clock.align(true_start, end, np.ones(3, bool), np.ones(4, bool), [None] * 4)
    assert c2.method == "baseTimeNanoseconds" and (c2.offsets == 0).all()


def test_clock_warns_on_drift():
    cols = 50
    t = np.arange(cols) * 10_000.0
    start = np.vstack([t, t + 5, t, t + 5])
    end = start + 1000
    drift = np.linspace(0, 2000, cols)                    # host b's clock gains 2 ms over the trace
    skew = np.vstack([np.zeros(cols), np.zeros(cols), 40_000 + drift, 40_000 + drift])
    c = clock.align(start + skew, end + skew, np.ones(cols, bool), np.ones(4, bool), ["a", "a", "b", "b"])
    assert any("drifts" in w for w in c.warnings)


# ---- rendering --------------------------------------------------------------------------------------

def test_views_render_and_escape(gloo_blocks):
    b = json.loads(json.dumps(gloo_blocks["gloo2_compute"]))
    b["ranks"][0]["host"] = "<script>alert(1)</script>"
    b["straggler"]["evidence"]["top_differences"][0]["name"] = "<img src=x onerror=alert(1)>"
    text, md, page = job_view.terminal(b), job_view.markdown(b), job_view.html(b)
    assert "Straggler: rank 0 (slower-cpu-ops)" in text and "aten::tanh" in text
    assert md.startswith("## Job") and "| 0 |" in md
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert page.count("<rect") >= 4 and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_ranks_without_a_common_step_are_not_compared(tmp_path):
    import gzip
    import re
    for r in (0, 1):
        text = gzip.decompress((DATA / "gloo2_host" / f"rank{r}.json.gz").read_bytes()).decode()
        if r == 1:   # rank 1 recorded a later window: steps 14-18
            text = re.sub(r"ProfilerStep#(\d+)", lambda m: f"ProfilerStep#{int(m.group(1)) + 10}", text)
        (tmp_path / f"rank{r}.json").write_text(text)
    b = analyze_job([tmp_path], workers=1)
    assert b["steps"] == [] and b["matched_collectives"] == 0 and b["straggler"]["rank"] is None
    assert any("no step in common" in w for w in b["warnings"])


def test_an_unreadable_rank_is_reported_and_the_rest_analyzed(tmp_path):
    for r in (0, 1, 2):
        shutil.copy(DATA / "gloo4_data" / f"rank{r}.json.gz", tmp_path)
    (tmp_path / "rank3.json").write_text("{not json")
    b = analyze_job([tmp_path], workers=1)
    assert (b["world_size"], b["ranks_present"], b["missing_ranks"]) == (4, 3, [3])
    assert any(w.startswith("rank 3 unreadable") for w in b["warnings"])
    assert b["straggler"]["rank"] == 2
