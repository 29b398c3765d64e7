"""`traceinsight record` answers in the terminal (the verdict and the top findings, not only paths), a
CPU-only recording raises no alarm, and an interrupted run says so in its report."""
from __future__ import annotations

import json
import re

import pytest

from test_record import SCRIPTS, needs_torch, record


@needs_torch
def test_record_prints_the_verdict_and_a_neutral_cpu_only_report(tmp_path):
    out = tmp_path / "out"
    r = record("-o", str(out), str(SCRIPTS / "train.py"), "--iters", "8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "report.json").read_text())
    said = " ".join(r.stdout.split())
    assert " ".join(doc["verdict"].split()) in said       # the answer, in the terminal
    if doc["trace"]["gpu_activities"]:
        pytest.skip("a GPU was recorded: the CPU-only checks do not apply")
    assert "CPU time per step" in said and "aten::" in said
    page = (out / "report.html").read_text()
    assert re.search(r'<p class="verdict neutral" data-testid="verdict">', page)
    assert 'data-testid="cpu-only"' in page and 'class="chart"' not in page
    md = (out / "report.md").read_text()
    assert "None%" not in md and "GPU idle 100" not in md


@needs_torch
def test_an_interrupted_recording_says_so_in_its_report(tmp_path):
    out = tmp_path / "out"
    r = record("-o", str(out), str(SCRIPTS / "train.py"), "--iters", "8", "--interrupt-at", "5", cwd=tmp_path)
    assert r.returncode != 0
    md = (out / "report.md").read_text()
    assert "**Interrupted recording:**" in md and "interrupted (Ctrl-C)" in md
    assert 'data-testid="interrupted"' in (out / "report.html").read_text()
    assert "The recording was interrupted" in " ".join(r.stdout.split())
