"""Autograd's anomaly detection left on (torch.autograd.set_detect_anomaly(True)): the fifty-first held-out set,
sample_traces/matrix/h100_clean62* and h100_clean63* (H100, torch 2.11; the matrix README has the measured steps). A
transformer tagger and a conv net trained with it on (before) and off (after); an fp16 transformer with a GradScaler
and fused AdamW, whose inf check stays on the GPU, beside them."""
from __future__ import annotations

import pytest
from matrix_runs import doc as _doc, kinds as _kinds, measured_speedup as _measured_speedup, trace_path as _path

from traceinsight.report.analyze import build_model, load_trace
from traceinsight.trace.anomaly import checks, stacks

TAGGER, CONVNET = "holdout51_anomaly_tagger_train", "holdout51_anomaly_convnet_train"
SCALER = "holdout51_scaler_fused_healthy"


@pytest.mark.parametrize("run,wl,setting", [("h100_clean63A", TAGGER, "default"), ("h100_clean63B", CONVNET, "default"),
                                            ("h100_clean63A", CONVNET, "stack")])
def test_anomaly_detection_is_the_top_finding_and_its_saving_matches_the_fix(run, wl, setting):
    d = _doc(run, wl, "before", setting)
    assert _kinds(d)[0] == "anomaly_detection", _kinds(d)
    f = d["findings"][0]
    assert f["evidence"]["steps_checking"] == "5 of 5 full steps"
    assert "set_detect_anomaly" in f["fix"]
    # The engine's checks are not the program's syncs: no sync_stall ranked for them.
    assert "sync_stall" not in _kinds(d), _kinds(d)
    if "launch_overhead" in _kinds(d):
        lo = d["findings"][_kinds(d).index("launch_overhead")]
        assert lo["fix"].startswith("First: autograd's anomaly detection"), lo["fix"]
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    assert idle["anomaly_detection"] >= 0.6 * sum(idle.values()), idle
    # The predicted speed-up within 25% of the measured one (anomaly detection off).
    u = d["summary"]["unprofiled_step_ms"]
    pred = u / (u - f["estimated_savings_ms"])
    meas = _measured_speedup(run, wl)
    assert abs(pred - meas) <= 0.25 * meas, (pred, meas)
    assert f["estimated_savings_ms"] <= u


def test_the_checks_and_the_stacks_are_one_per_node():
    m = build_model(load_trace(str(_path("h100_clean62A", TAGGER, "before"))), None)
    c = checks(m)
    # 229 nodes checked a step, on autograd's device thread, in each of the 5 steps; as many stacks stored in the
    # forward (the nodes less the 52 parameters' AccumulateGrad), each some 80 us beyond a plain op's few.
    assert c.groupby("step").size().tolist() == [229] * 5
    assert c["thread"].nunique() == 1
    st = stacks(m)
    assert set(st["per_step"].values()) == {229}
    assert st["floor_us"] < 10 and float(st["self_us"].min()) > 3 * st["floor_us"]
    after = build_model(load_trace(str(_path("h100_clean62A", TAGGER, "after"))), None)
    assert checks(after).empty and not len(stacks(after)["ops"])


@pytest.mark.parametrize("run,wl,var", [("h100_clean62A", TAGGER, "after"), ("h100_clean62B", CONVNET, "after"),
                                        ("h100_clean63A", SCALER, "before")])
def test_without_it_no_finding(run, wl, var):
    d = _doc(run, wl, var)
    assert "anomaly_detection" not in _kinds(d)
    assert d["summary"]["idle_by_cause_ms_median_per_step"].get("anomaly_detection", 0.0) == 0.0


def test_the_scaler_steps_fusion_finding_matches_its_compile():
    # Registered as the healthy control; its fusion_candidates finding (torch.compile) measured 1.36x.
    d = _doc("h100_clean63B", SCALER, "before")
    assert _kinds(d)[0] == "fusion_candidates", _kinds(d)
    u = d["summary"]["unprofiled_step_ms"]
    pred = u / (u - d["findings"][0]["estimated_savings_ms"])
    meas = _measured_speedup("h100_clean63B", SCALER, "after_compile")
    assert abs(pred - meas) <= 0.25 * meas, (pred, meas)
