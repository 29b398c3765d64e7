"""The CUDA-graph advice says what a capture leaves out: copies between host and GPU memory stay outside
the graph, through its static inputs and outputs (expert review of the sixteenth held-out set, 2026-11-27:
"capture the step" where the step held a blocking 12 MiB copy, which cannot be captured)."""
from __future__ import annotations

from pathlib import Path

from traceinsight.report.analyze import analyze_file

ROOT = Path(__file__).resolve().parents[1] / "sample_traces"


def _launch(path: Path):
    a = analyze_file(path)
    return next(f for f in a.findings + a.minor_findings if f.kind == "launch_overhead")


def test_a_step_that_copies_to_the_host_keeps_the_copy_outside_the_graph():
    f = _launch(ROOT / "matrix/h100_clean11A/holdout16_pageable_feature_cache__before__default.json.gz")
    assert "The step copies 12.6 MB a step between host and GPU memory" in f.fix
    assert "static input tensors before each replay" in f.fix and "static outputs after it" in f.fix


def test_a_step_without_host_copies_gets_no_such_sentence():
    f = _launch(ROOT / "matrix/h100_cleanA/small_batch_infer__before__default.json.gz")
    assert "between host and GPU memory" not in f.fix
