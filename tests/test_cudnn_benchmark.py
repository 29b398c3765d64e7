"""cuDNN's algorithm search on every step (torch.backends.cudnn.benchmark=True with input shapes that change every
step): the fiftieth held-out set, sample_traces/matrix/h100_clean59* (one H100, torch 2.11; the matrix README has
the measured steps). A raw-audio classifier padded to each batch's length and a denoiser run at each photo's size,
before (benchmark on) and after (off); the classifier on four bucketed lengths, searched once, is the control."""
from __future__ import annotations

import pytest
from matrix_runs import doc as _doc, kinds as _kinds, measured as _measured, trace_path as _path

from traceinsight.trace.cudnn_search import searches

AUDIO, RESTORE = "holdout50_audio_benchmark_train", "holdout50_restore_benchmark_infer"
HEALTHY = "holdout50_bucketed_audio_healthy"


@pytest.mark.parametrize("run,wl,setting", [("h100_clean59B", AUDIO, "default"), ("h100_clean59C", RESTORE, "stack")])
def test_searching_every_step_is_the_top_finding_and_its_saving_matches_the_fix(run, wl, setting):
    d = _doc(run, wl, "before", setting)
    assert _kinds(d)[0] == "cudnn_benchmark", _kinds(d)
    f = d["findings"][0]
    assert f["evidence"]["steps_searching"] == "5 of 5 full steps"
    assert "torch.backends.cudnn.benchmark = False" in f["fix"] and "buckets" in f["fix"]
    # It had read as launch overhead (a CUDA graph advised, which shapes that change every step rule out): where
    # launch overhead is still ranked, below it, it names the shapes to pad first.
    if "launch_overhead" in _kinds(d):
        lo = d["findings"][_kinds(d).index("launch_overhead")]
        assert lo["fix"].startswith("First: the input shapes change every step"), lo["fix"]
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    assert idle["cudnn_benchmark"] >= 0.8 * sum(idle.values()), idle
    # The predicted speed-up within 25% of the measured one (benchmark off, new shapes in both variants).
    u = d["summary"]["unprofiled_step_ms"]
    pred = u / (u - f["estimated_savings_ms"])
    meas = _measured(run, wl, "before") / _measured(run, wl, "after")
    assert abs(pred - meas) <= 0.25 * meas, (pred, meas)
    assert f["estimated_savings_ms"] <= u


def test_the_searches_are_the_convolutions_that_synchronize():
    from traceinsight.report.analyze import build_model, load_trace
    m = build_model(load_trace(str(_path("h100_clean59A", RESTORE, "before"))), None)
    s = searches(m)
    # The denoiser's three convolution shapes (3->64, 64->64, 64->3) searched on each of the 5 steps; every
    # search waits for its trials (21 syncs each on this torch).
    assert len(s) == 15 and set(s["name"]) == {"aten::cudnn_convolution"}
    assert (s["syncs"] >= 10).all()
    assert s.groupby("step").size().tolist() == [3] * 5
    after = build_model(load_trace(str(_path("h100_clean59A", RESTORE, "after"))), None)
    assert searches(after).empty


@pytest.mark.parametrize("run,wl,var", [("h100_clean59A", AUDIO, "after"), ("h100_clean59A", RESTORE, "after"),
                                        ("h100_clean59A", HEALTHY, "before"), ("h100_clean58A", HEALTHY, "before")])
def test_no_search_in_the_steady_state_no_finding(run, wl, var):
    d = _doc(run, wl, var)
    assert "cudnn_benchmark" not in _kinds(d)
    assert not any(f["kind"] == "cudnn_benchmark" for f in d["minor_findings"])
    assert d["summary"]["idle_by_cause_ms_median_per_step"].get("cudnn_benchmark", 0.0) == 0.0


def test_the_trials_are_not_the_programs_syncs_kernels_or_layout_conversions():
    """An expert review of the first version: the trials' syncs and workspaces (cudaFree) had read as a sync_stall
    worth 86 ms a step and a prerequisite of the launch fix, and the trials' transposes as 36 ms of layout_permute
    (the after trace has 2 ms of them)."""
    d = _doc("h100_clean59A", AUDIO, "before", "stack")
    every = _kinds(d) + [f["kind"] for f in d["minor_findings"]]
    assert "sync_stall" not in every and "layout_permute" not in _kinds(d), every
    f = d["findings"][0]
    # A backward convolution searches twice: 18 searches in 12 ops a step.
    assert f["evidence"]["searches_per_step"] > f["evidence"]["searched_ops_per_step"]
    # Padding to a few shapes is the other way, estimated to save at least what benchmark off does.
    alt = {a["option"]: a for a in f["alternatives"]}["bucketed"]
    assert alt["estimated_savings_ms"] >= f["estimated_savings_ms"]
    # No "record after a warm-up": the shapes keep changing, so kernels keep loading.
    limits = " ".join(d["trace"]["limits"])
    assert "for as long as the program runs" in limits and "Profile after a warm-up step" not in limits


def test_transposes_around_1d_convolutions_claim_no_saving():
    """The bucketed classifier (h100_clean60A: 1-2% idle un-profiled) had ranked cuDNN's transposes around its Conv1d
    layers first (25% of its GPU time, advised as channels_last Conv2d); that rewrite measured slower on h100_clean61A-B,
    so they are a minor finding with no saving claimed."""
    for run in ("h100_clean61A", "h100_clean61B"):
        assert _measured(run, HEALTHY, "after_conv2d") > _measured(run, HEALTHY, "before")
    d = _doc("h100_clean60A", HEALTHY, "before")
    assert "layout_permute" not in _kinds(d)
    f = next(x for x in d["minor_findings"] if x["kind"] == "layout_permute")
    assert "1-D convolutions" in f["title"] and f["estimated_savings_ms"] == 0.0 and "measured slower" in f["fix"]
