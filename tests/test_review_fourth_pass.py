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
