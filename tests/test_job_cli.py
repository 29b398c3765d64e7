"""`traceinsight analyze DIR` on the ranks of one job: one report for all ranks (issue 13), through the CLI."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli_args

JOBS = Path(__file__).resolve().parent / "data" / "job"


def test_a_directory_of_ranks_gets_one_job_report(tmp_path):
    out = tmp_path / "r.html"
    js = tmp_path / "r.json"
    md = tmp_path / "r.md"
    p = run_cli_args(["analyze", str(JOBS / "gloo2_host"), "-o", str(out), "--json", str(js),
                      "--markdown", str(md)])
    assert p.returncode == 0, p.stderr
    doc = json.loads(js.read_text())
    job = doc["job"]
    assert job["world_size"] == 2 and job["straggler"]["rank"] == 1 and job["straggler"]["cause"] == "host-bound"
    assert {r["rank"] for r in job["ranks"]} == {0, 1}
    page = out.read_text()
    assert 'data-testid="job"' in page and "Straggler" in page
    assert "rank1.json.gz" in page          # the straggler's own report follows the job's
    assert "Straggler" in md.read_text()
    assert "Straggler: rank 1" in p.stdout


def test_unknown_engine_is_one_line_and_exit_2():
    p = run_cli_args(["analyze", str(JOBS / "gloo2_host"), "--engine", "spark"])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
