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
    assert "Each step copies 12.6 MB between host and GPU memory" in f.fix
    assert "static input tensors before each replay" in f.fix and "static outputs after it" in f.fix


def test_a_step_without_host_copies_gets_no_such_sentence():
    f = _launch(ROOT / "matrix/h100_cleanA/small_batch_infer__before__default.json.gz")
    assert "between host and GPU memory" not in f.fix


def test_a_close_second_fix_is_named_in_the_verdict():
    # The same program's traces rank the copy and the launches either way round, 0.1-0.3 ms apart (expert
    # review, 2026-11-27); measured, the pinned copies and the graph each helped most on one host of two.
    a = analyze_file(ROOT / "matrix/h100_clean11A/holdout16_pageable_feature_cache__before__default.json.gz")
    assert a.findings[0].kind == "pageable_memcpy"
    assert "launch_overhead comes close (about " in a.verdict and "so measure both." in a.verdict
    # The close second is also the largest idle cause: named once.
    assert "The largest idle cause" not in a.verdict
    b = analyze_file(ROOT / "matrix/h100_clean10C/holdout16_pageable_feature_cache__before__default.json.gz")
    assert b.findings[0].kind == "launch_overhead" and "pageable_memcpy comes close" in b.verdict


def test_a_clear_top_fix_gets_no_such_sentence():
    a = analyze_file(ROOT / "matrix/h100_cleanA/small_batch_infer__before__default.json.gz")
    assert "comes close" not in a.verdict and "measure both" not in a.verdict
