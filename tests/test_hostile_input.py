"""What an adversarial review (2026-11-28: a helper that tried for an hour to break the command line) found,
each reproduced and checked through the real command line or the function that had failed:
crashes on GPU-only events and odd step names, pipes, outputs that are directories or a full disk,
an input overwritten through a hard link, terminal escape sequences and raw HTML from trace strings,
one odd number rejecting a whole trace, durations silently zeroed, a non-trace JSON stopping a job,
ranks of two runs merged, and options that were accepted though they made no sense."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, cli_env, run_cli_args

SAMPLE = REPO_ROOT / "sample_traces" / "launch_small_mlp__before.json.gz"
NCCL = REPO_ROOT / "sample_traces" / "nccl" / "h200x2"


def _doc() -> dict:
    return json.load(gzip.open(SAMPLE))


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _one_error(p: subprocess.CompletedProcess, pattern: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.startswith("traceinsight: error:")]
    assert len(lines) == 1 and pattern in lines[0], p.stderr
    assert "Traceback" not in p.stderr and "please report it" not in p.stderr


def test_gpu_events_alone_and_odd_step_names_are_analyzed(tmp_path):
    d = _doc()
    gpu_only = _write(tmp_path / "k.json", dict(d, traceEvents=[e for e in d["traceEvents"]
                                                                 if e.get("cat") == "kernel"][:2]))
    p = run_cli_args(["analyze", gpu_only, "--json", tmp_path / "k.out.json"])
    assert p.returncode == 0, p.stderr
    out = json.loads((tmp_path / "k.out.json").read_text())
    assert any(x.startswith("No CPU events in this trace (GPU activity only)") for x in out["trace"]["limits"])
    for bad in ("ProfilerStep#", "ProfilerStep#-3", "ProfilerStep#" + "9" * 30):
        d = _doc()
        for e in d["traceEvents"]:
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                e["name"] = bad
        p = run_cli_args(["analyze", _write(tmp_path / "s.json", d), "-q"])
        assert p.returncode == 0 and "no ProfilerStep annotations" in p.stderr, (bad, p.stderr)


def test_a_trace_from_a_pipe_or_standard_input(tmp_path):
    out = tmp_path / "o.json"
    cmd = f"zcat {SAMPLE} | {sys.executable} -m traceinsight analyze - -q --json {out}"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(), cwd=REPO_ROOT,
                       timeout=180)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["findings"][0]["kind"] == "launch_overhead"
    cmd = f"{sys.executable} -m traceinsight analyze <(zcat {SAMPLE}) -q"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(), cwd=REPO_ROOT,
                       timeout=180)
    assert p.returncode == 0, p.stderr


def test_outputs_that_cannot_be_written_are_said_so_and_inputs_are_never_overwritten(tmp_path):
    (tmp_path / "d").mkdir()
    _one_error(run_cli_args(["analyze", SAMPLE, "-o", tmp_path / "d", "--force"]), "is a directory")
    if os.path.exists("/dev/full"):
        _one_error(run_cli_args(["analyze", SAMPLE, "-o", "/dev/full", "--force"]),
                   "could not write an output file: No space left on device")
    trace = tmp_path / "in.json.gz"
    shutil.copy(SAMPLE, trace)
    os.link(trace, tmp_path / "hard.html")
    before = trace.read_bytes()
    _one_error(run_cli_args(["analyze", trace, "-o", tmp_path / "hard.html", "--force"]),
               "is one of the input traces")
    assert trace.read_bytes() == before


def test_trace_strings_reach_no_terminal_as_escape_sequences_nor_markdown_as_html(tmp_path):
    d = _doc()
    d["deviceProperties"][0]["name"] += "\x1b[2J\x1b]0;PWN\x07<img src=x onerror=alert(1)>"
    t = _write(tmp_path / "a.json", d)
    p = run_cli_args(["analyze", t, "--markdown", tmp_path / "a.md", "-o", tmp_path / "a.html"])
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout and "\\x1b[2J" in p.stdout
    md = (tmp_path / "a.md").read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    # The files too: `cat report.md` (or the page's source) sends no escape sequence to a terminal.
    page = (tmp_path / "a.html").read_text()
    for text in (md, page):
        assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b\\[2J" in md and "\\x1b[2J" in page        # (Markdown escapes the bracket)
    from traceinsight.render.format import md_code
    assert md_code("aten::mm` <b>x</b>") == "`` aten::mm` <b>x</b> ``"


@pytest.mark.parametrize("value, warned", [("99999999999999999999", None), ("1e309", None),
                                           ("NaN", "not finite JSON numbers"),
                                           ("Infinity", "not finite JSON numbers"), ('"\\ud800"', None)])
def test_one_odd_value_costs_that_value_not_the_trace(tmp_path, value, warned):
    d = _doc()
    d["traceEvents"][60].setdefault("args", {})["x"] = "ODD"
    t = tmp_path / "b.json"
    t.write_text(json.dumps(d).replace('"ODD"', value))
    p = run_cli_args(["analyze", t, "--json", tmp_path / "b.out.json"])
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "b.out.json").read_text())["findings"][0]["kind"] == "launch_overhead"
    if warned:
        assert warned in p.stdout + p.stderr


def test_a_duration_that_is_not_one_is_said(tmp_path):
    d = _doc()
    for e in d["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = "abc"
    p = run_cli_args(["analyze", _write(tmp_path / "d.json", d), "-q"])
    assert p.returncode == 0 and "events with a missing, negative or non-numeric duration" in p.stderr


def test_a_job_directory_with_other_json_and_ranks_of_two_runs(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for f in (NCCL / "comm_bound").glob("rank*.json.gz"):
        shutil.copy(f, job)
    (job / "config.json").write_text("{}")
    p = run_cli_args(["analyze", job, "-q"])
    assert p.returncode == 0 and "config.json: left out, not a trace" in p.stderr, p.stderr
    _one_error(run_cli_args(["analyze", job, "-q", "--steps", "5-3"]), "runs backwards")
    _one_error(run_cli_args(["analyze", job, "-q", "--full-ranks", "7"]), "no rank 7 in this job")
    mix = tmp_path / "mix"
    mix.mkdir()
    shutil.copy(NCCL / "comm_bound" / "rank0.json.gz", mix)
    shutil.copy(NCCL / "straggler_host" / "rank1.json.gz", mix)
    p = run_cli_args(["analyze", mix, "-q"])
    assert p.returncode == 0 and "check that these traces come from one run" in p.stderr, p.stderr


def test_diff_refuses_odd_thresholds_and_edited_json(tmp_path):
    _one_error(run_cli_args(["diff", SAMPLE, SAMPLE, "--fail-on-regression", "nan"]), "must be a number")
    p = run_cli_args(["analyze", SAMPLE, "-q", "--json", tmp_path / "a.json"])
    assert p.returncode == 0
    good = json.loads((tmp_path / "a.json").read_text())
    for name, edit in (("t", lambda d: d.update(trace="x")),
                       ("k", lambda d: d["findings"][0].update(kind=None)),
                       ("m", lambda d: d.update(minor_findings=1.5))):
        d = json.loads(json.dumps(good))
        edit(d)
        _one_error(run_cli_args(["diff", _write(tmp_path / f"{name}.json", d), SAMPLE]), "has the wrong type")
    from traceinsight.report.diff_regression import regression
    gate = regression({"delta_ms": 0.3, "delta_pct": None, "significance": "unknown", "direction": "slower",
                       "noise_ms": None}, 5.0)
    assert gate["regressed"]
