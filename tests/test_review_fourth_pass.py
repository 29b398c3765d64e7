"""What the reviews of 2026-12-02 (session 69) found wrong, each checked where it was seen."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "launch_tiny_conv__before.json.gz"


def test_outputs_are_written_all_or_nothing(run_cli, tmp_path):
    """A user's `--json ok.json -o /proc/x.html` wrote ok.json and then failed on the HTML: a failing output
    now leaves none of the others (nor a staging file) behind, and an existing file is kept as it was."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file\n")
    old = tmp_path / "old.md"
    old.write_text("the user's notes\n")
    r = run_cli(["analyze", SAMPLE, "-q", "--json", tmp_path / "ok.json", "--markdown", old, "--force",
                 "-o", blocker / "x.html"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "x.html" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder", "old.md"]
    assert old.read_text() == "the user's notes\n"
    # The same outputs to a folder that can be written: all of them, readable beyond their owner.
    r = run_cli(["analyze", SAMPLE, "-q", "--json", tmp_path / "ok.json", "--markdown", old, "--force",
                 "-o", tmp_path / "x.html"])
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder", "ok.json", "old.md", "old.png", "x.html"]
    assert "traceinsight" in old.read_text() or "GPU" in old.read_text()
    assert (tmp_path / "x.html").stat().st_mode & 0o044


def test_diff_outputs_are_written_all_or_nothing(run_cli, tmp_path):
    before, after = SAMPLE, ROOT / "sample_traces" / "launch_tiny_conv__after.json.gz"
    blocker = tmp_path / "f"
    blocker.write_text("x")
    r = run_cli(["diff", before, after, "--json", tmp_path / "d.json", "-o", blocker / "d.html"])
    assert r.returncode == 2 and "d.html" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_mistyped_gate_percentage_is_named(run_cli):
    """`--fail-on-regression abc` had read "unexpected extra argument" (abc taken for a third trace); `5%`
    is the percentage 5."""
    before, after = SAMPLE, ROOT / "sample_traces" / "launch_tiny_conv__after.json.gz"
    r = run_cli(["diff", "-q", before, after, "--fail-on-regression", "abc"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "'abc' is not a percentage" in r.stderr and "extra argument" not in r.stderr
    r = run_cli(["diff", "-q", after, before, "--fail-on-regression", "5%"])
    assert r.returncode == 1 and "above the 5% threshold" in r.stderr, r.stderr
    r = run_cli(["diff", "-q", after, before, "--fail-on-regression=5%"])
    assert r.returncode == 1 and "above the 5% threshold" in r.stderr, r.stderr
    # Before the traces, the gate alone still means 0.
    r = run_cli(["diff", "-q", "--fail-on-regression", before, after])
    assert r.returncode == 0 and "no regression" in r.stderr, r.stderr


def test_a_minor_prerequisite_is_named_in_needs_first():
    """The verdict said "needs sync_stall fixed first" where the sync was a minor finding (below the ranking
    bar, still the plan's first row), and needs_first read []."""
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import build_report
    d = build_report(analyze_file(ROOT / "sample_traces" / "matrix" / "h200_cleanA"
                                  / "sync_and_small_kernels__before__default.json.gz")).doc
    launch = next(f for f in d["findings"] if f["kind"] == "launch_overhead")
    assert "sync_stall" in {m["kind"] for m in d["minor_findings"]}
    assert list(launch["needs_first"]) == ["sync_stall"]
    assert 0 < launch["saves_after_needs_first_ms"] <= launch["estimated_savings_ms"]
    assert "needs sync_stall fixed first" in d["verdict"]


def test_a_linked_output_is_written_through(run_cli, tmp_path):
    """Staged outputs are moved into place: a link the user gave as the output keeps pointing at its file, which
    gets the report (a rename would have replaced the link, and a device such as /dev/full with a plain file)."""
    real = tmp_path / "real.html"
    real.write_text("old\n")
    (tmp_path / "link.html").symlink_to(real)
    r = run_cli(["analyze", SAMPLE, "-q", "-o", tmp_path / "link.html", "--force"])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link.html").is_symlink() and "<html" in real.read_text()[:200].lower()
    # A hard link keeps sharing the file (written in place, not replaced), and a pipe gets the bytes (a review
    # found `--json /dev/stdout | head` failing on the staging).
    (tmp_path / "hard.html").hardlink_to(real)
    r = run_cli(["analyze", SAMPLE, "-q", "-o", tmp_path / "hard.html", "--force"])
    assert r.returncode == 0 and (tmp_path / "hard.html").stat().st_ino == real.stat().st_ino, r.stderr
    import json
    import subprocess
    import sys
    from conftest import cli_env
    p = subprocess.run(f'"{sys.executable}" -m traceinsight analyze "{SAMPLE}" -q --force --json /dev/stdout | cat',
                       shell=True, capture_output=True, text=True, env=cli_env(), timeout=180)
    assert p.returncode == 0 and json.loads(p.stdout)["schema_version"] >= 1, p.stderr


# ---- multi-rank jobs (an expert review of the two-GPU NCCL jobs' reports) ------------------------------------

NCCL = ROOT / "sample_traces" / "nccl"


def _job(folder):
    from traceinsight.job import analyze_job
    return analyze_job([folder], workers=1)


def test_putting_the_straggler_in_time_saves_no_more_than_its_own_work_outlasts_the_others():
    """Set 31's fused-Adam job (nothing planted): "replayed with it in time, rank 1's step is about 6.57 ms
    shorter" of a 12.07 ms job, where rank 1's own CPU steps (20.4 ms profiled against 27.2) left room for about
    3. The planted 6 ms of Python (straggler_host) keeps its figure near the measured fix (10.16 -> 5.14 ms)."""
    b = _job(NCCL / "h200x2_set31A" / "fused_adam")
    st, rows = b["straggler"], {r["rank"]: r for r in b["ranks"]}
    assert all(r["own_cpu_ms_per_step"] > 0 and r["own_gpu_ms_per_step"] > 0 for r in rows.values())
    saves = st.get("median_rank_saves_ms")
    assert saves is not None and saves <= st["evidence"]["pace_bound_ms_per_step"] + 1e-3
    assert saves < 0.25 * b["unprofiled_step_ms"], st
    b = _job(NCCL / "h200x2" / "straggler_host")
    st = b["straggler"]
    assert (st["rank"], st["cause"]) == (1, "host-bound")
    assert abs(st["median_rank_saves_ms"] - (10.16 - 5.14)) <= 0.25 * (10.16 - 5.14), st


def test_a_rank_that_arrives_late_but_sets_no_pace_is_not_named_a_straggler():
    """comm_bound (nothing planted): rank 0 arrived last, named a straggler that "1.69 ms shorter" would follow,
    where its own GPU work is the whole un-profiled step. It sets no pace: no straggler, said why, its report
    (whose step is the job's) still the one shown."""
    from traceinsight.job import focus_rank
    b = _job(NCCL / "h200x2" / "comm_bound")
    st = b["straggler"]
    assert st["rank"] is None and st["paceless_rank"] == 0 and focus_rank(b) == 0
    # Its evidence says why it arrives last, not a cause beside the straggler's "none".
    assert "cause" not in st["evidence"] and st["evidence"].get("late_arrival_cause"), st["evidence"]
    assert "sets no pace" in st["cause_text"] and st["median_rank_saves_ms"] < 0.1 * b["unprofiled_step_ms"]
    assert b["unprofiled_step_method"].startswith("from rank 0, the rank that arrives last")


def test_a_straggler_is_compared_over_whole_steps_and_the_loops_own_loader():
    """loader_workers0 (both ranks load in the main process): "DataLoader.__next__ 14.026 vs 7.541 ms", read over
    the stretches before each collective; over whole steps both ranks spend 13-15 ms a step in it. With four
    workers and pinned memory (loader_workers4__stack), the pin-memory thread's queue waits had read as the loop
    waiting 5.46 ms a step for data."""
    b = _job(NCCL / "h200x2_set31A" / "loader_workers0")
    st = b["straggler"]
    loader = [d for d in st["evidence"]["top_differences"] if "DataLoader" in d["name"]]
    assert loader and all(d["median_rank_ms_per_step"] > 11.0 for d in loader), st["evidence"]
    b = _job(NCCL / "h200x2_set31A" / "loader_workers4__stack")
    st = b["straggler"]
    assert st["cause"] != "data-loading"
    assert abs(st["evidence"].get("work_delta_ms_per_step", {}).get("data", 0.0)) < 0.5, st


def test_the_gate_says_why_an_estimated_slowdown_beyond_the_band_passes():
    """Judged on the un-profiled estimates (profiler options differ), a change larger than the band passes only
    because the estimates' likely ranges overlap: the reason had read "+79.9%, within the noise (±1.45 ms)"."""
    from traceinsight.report.diff_regression import regression
    st = {"delta_ms": 5.014, "delta_pct": 79.9, "significance": "within_noise", "direction": "slower",
          "noise_used_ms": 1.45, "noise_band": "±1.45 ms", "basis": "unprofiled_estimate"}
    g = regression(st, 0.0)
    assert not g["regressed"] and "likely ranges overlap" in g["reason"] and "within the noise" not in g["reason"]
    g = regression({**st, "delta_ms": 1.0, "delta_pct": 10.0}, 0.0)
    assert not g["regressed"] and "within the noise (±1.45 ms)" in g["reason"]


def test_a_diff_of_analyze_json_outputs_leaves_out_the_same_steps_as_of_the_traces(tmp_path):
    """Steps holding GPU work queued before the profiling window leave the step distribution: for traces only, at
    first (a review: the fp32_matmul pair read n=4 from its traces, n=5 and max 91.17 ms from their JSON). The
    document now marks them (steps[].holds_prewindow_work), and diff reads the mark from either."""
    from traceinsight.render import json_out
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.diff import compare
    from traceinsight.report.diff_inputs import load_side
    from traceinsight.report.document import build_report
    traces = [ROOT / "sample_traces" / f"fp32_matmul__{s}.json.gz" for s in ("before", "after")]
    docs = []
    for t in traces:
        p = tmp_path / (t.name + ".findings.json")
        json_out.write([build_report(analyze_file(t))], p)
        docs.append(p)
    d_tr = compare(load_side(traces[0]), load_side(traces[1]))["step_time"]
    d_js = compare(load_side(docs[0]), load_side(docs[1]))["step_time"]
    assert d_tr["before"]["n"] == d_js["before"]["n"] and d_tr["before"]["max_ms"] == d_js["before"]["max_ms"]
    assert d_tr["before"]["max_ms"] < 40.0, d_tr["before"]     # (not the 91 ms first step)


def test_a_ranks_exposed_communication_holds_its_wait():
    """Set 31's unfused-Adam job: rank 1's "exposed comm ms/step (wait included)" read 39.83 beside a 40.15 ms wait
    (medians over different steps), and the HTML strip dropped its own exposure."""
    b = _job(NCCL / "h200x2_set31A" / "unfused_adam")
    for r in b["ranks"]:
        assert r["exposed_comm_ms_per_step"] >= r["collective_wait_ms_per_step"], r
        assert 0.0 <= r["overlap_pct"] <= 100.0
