"""The record path: a trace that carries the un-profiled step `traceinsight record` measured.

The analysis calibrates its replay to that step (estimate/deinflate.calibration_scale, estimate/rank.py).
Checked on the matrix's committed traces, each given its own measured un-profiled median the way record
stores it, against the fixes measured on the same hosts.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_model
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "sample_traces" / "matrix"
sys.path.insert(0, str(ROOT / "sample_traces"))


def _analysis(path: Path, measured_ms: float | None):
    import validate_matrix
    return analyze_model(validate_matrix.model_of(path, measured_ms))


def _measured_before(run: str, workload: str) -> tuple[float, float]:
    """(before, after) un-profiled medians (ms) of a pair, from the run's manifest."""
    import json
    man = json.loads((MATRIX / run / "manifest.json").read_text())
    by = {e["variant"]: e["step_ms"]["median"] for e in man["entries"] if e["workload"] == workload}
    return by["before"], by["after"]


def _saving(a, kind: str) -> float:
    return next(f.estimated_savings_us for f in a.findings if f.kind == kind) / 1000


def test_a_host_heavy_step_keeps_its_profiler_cuts_and_its_fix_stays_physical():
    # An eval loop that scores on the host in numpy: 9.9 ms un-profiled, 0.46 ms once scoring moves to the
    # GPU (21.7x). The cost model's estimate was 4-8% off; the cuts used to take all of it (the clamp, 3x),
    # and the record path predicted 100x (+358%). Now the host's pace takes most of it.
    path = MATRIX / "h200_cleanB" / "holdout6_eval_topk_numpy__before__stack.json.gz"
    before, after = _measured_before("h200_cleanB", "holdout6_eval_topk_numpy")
    a = _analysis(path, before)
    assert a.whatif["unprofiled_step_ms"] == pytest.approx(before, rel=1e-3)
    s = _saving(a, "sync_stall")
    predicted = before / (before - s)
    measured = before / after
    assert abs(predicted - measured) / measured <= 1.0, (predicted, measured)
    assert "the host's pace the rest" in a.whatif["unprofiled_step_method"]


def test_a_launch_bound_step_puts_the_measured_step_into_the_profilers_cost():
    # A small conv net, launch-bound: the profiler's cost is all the cost model can have missed, so the
    # record path lands its graph estimate on the measured fix (9.1x un-profiled; the trace alone: -20%).
    path = MATRIX / "h200_cleanA" / "launch_tiny_conv__before__default.json.gz"
    before, after = _measured_before("h200_cleanA", "launch_tiny_conv")
    alone = _analysis(path, None)
    rec = _analysis(path, before)
    measured = before / after

    def err(a, u):
        return abs(u / (u - _saving(a, "launch_overhead")) - measured) / measured
    assert err(rec, before) <= 0.1
    assert err(rec, before) < err(alone, alone.whatif["unprofiled_step_ms"])


@pytest.fixture(scope="module")
def held_out_rows():
    """The held-out clean hosts (*_clean2A/B: an H100 and an H200, the whole matrix), scored on the record
    path."""
    import validate_matrix as vm
    runs = {k: v for k, v in vm.RUNS.items() if vm.clean_set(k) == 2}
    saved = vm.RUNS
    vm.RUNS = runs
    try:
        return vm.rows(jobs=2, measured=True)
    finally:
        vm.RUNS = saved


def test_the_record_path_on_held_out_hosts(held_out_rows):
    pairs = [r for r in held_out_rows if r["kind"] != "healthy"]
    healthy = [r for r in held_out_rows if r["kind"] == "healthy"]
    errs = [abs(r["err_pct"]) for r in pairs if r["err_pct"] is not None]
    assert len(pairs) >= 340
    # 272 of 344 within 25% (the trace alone: 263); the calibration that put the whole measured step into
    # the profiler's cost gave 250.
    assert sum(e <= 25 for e in errs) >= 265
    assert sum(e <= 50 for e in errs) >= 0.9 * len(pairs)
    assert sum(r["ok_top"] for r in pairs) >= 0.93 * len(pairs)
    assert all(r["ok_top"] for r in healthy)
    assert not any(r["over_idle"] for r in held_out_rows)


def test_traceinsight_record_itself_on_three_gpu_hosts():
    # `traceinsight record` run on 24 training workloads' before variants (matrix/record_e2e.sh: three H100
    # leases, 2026-11-27, default options and with stacks + shapes); the fixes measured on the same hosts in
    # the same leases. From record's own trace (its step measured after the window): 72 of 90 rows within
    # 25%, 87 within 50%; with that step estimated instead: 63 and 84. (The calibration's limits were set
    # after a review of these traces: 69 and 88 before. Since loading moved into N DataLoader workers is
    # scored at N, validate_matrix.scored_fix: 73.)
    import score_e2e
    rs = [r for label in ("h100_clean13A", "h100_clean13B", "h100_clean13C") for r in score_e2e.rows(label)]
    assert len(rs) == 90
    assert all(r["record_u_ms"] for r in rs)
    assert within_of(rs, "record_err_pct", 25) >= 70
    assert within_of(rs, "record_err_pct", 50) >= 85
    assert within_of(rs, "record_err_pct", 25) > within_of(rs, "alone_err_pct", 25)
    # The top finding is the fix measured to help most (or one of the fixes of that measured plan).
    assert sum(r["record_top"] in r["best_fix"].split("+") for r in rs) == 90


def within_of(rs, key, bar):
    return sum(r[key] is not None and abs(r[key]) <= bar for r in rs)


def test_a_measured_step_far_from_the_window_keeps_each_fixs_share():
    # holdout15_quantile_calib_cpu_torch with stacks on *_clean13C: its profiled steps ran 8-58 ms (a host
    # disturbed in the window: aten::sort 21 ms in some steps, 2.5 in others), record measured 4.8 ms after it.
    # The cuts take no more than the profiler's own spread; the rest scales the step, so the sync fix keeps its
    # share (the measured fix: 1.80x) and the report says the window is unlike the program's steps.
    path = MATRIX / "h100_clean13C" / "record" / "holdout15_quantile_calib_cpu_torch__stack" / "drive.pt.trace.json.gz"
    a = _analysis(path, None)          # (the trace carries the step record measured)
    u = a.whatif["unprofiled_step_ms"]
    before, after = _measured_before("h100_clean13C", "holdout15_quantile_calib_cpu_torch")
    predicted = u / (u - _saving(a, "sync_stall"))
    assert abs(predicted - before / after) / (before / after) <= 0.25
    assert "differ by more than 2x" in a.whatif["unprofiled_step_method"]


def test_a_noisy_measured_step_does_not_undo_the_profilers_cuts():
    # holdout13_multilabel_f1_numpy, default options, *_clean13B: record's 60 steps held a 23 ms block among
    # 9-12 ms ones (mean 12.5 ms; the recorder's median 9.4). The cuts may give back at most the profiler
    # cost's own spread (55% of what they take with default options), not three quarters of it.
    from traceinsight.estimate import deinflate, replay
    from traceinsight.estimate.graph import build_graph, step_window
    from traceinsight.trace.host import HostActivity
    path = MATRIX / "h100_clean13B" / "record" / "holdout13_multilabel_f1_numpy__default" / "drive.pt.trace.json.gz"
    model = build_model(load_trace(path))
    c = replay.Compiled(build_graph(model, HostActivity(model), step_window(model)))
    profiled = replay.simulate(replay.apply(c))
    act = float(model.steps.set_index("step")["dur"].reindex(list(profiled.step_us)).median())
    for target in (0.5 * act, 2.0 * act, 10.0 * act):
        scale = deinflate.calibration_scale(model, c, profiled, act, target, host_us=0.0)
        below, above = deinflate.UNPROFILED_SPREAD["default"]
        assert 1.0 - above - 1e-9 <= scale <= 1.0 + below + 1e-9, (target, scale)
    assert deinflate.calibration_scale(model, c, profiled, act, None) == 1.0



def test_a_step_opened_at_a_forward_hook_names_the_users_own_call():
    # `traceinsight record` of a generate loop steps the profiler at the Decoder's forward hook, so each
    # ProfilerStep range opens inside record_function's enter, inside the hook, inside the user's token()
    # call, and stays open after all of them return. Walking up parent links from the .tolist() that
    # followed named traceinsight's own _advance() (and pybind11's internal type) as the user's code:
    # "pybind11_detail_function_record_v1_..._record_function_enter_new() in _advance(), def at
    # traceinsight/trace/record_profiler.py:162". Only the frames still running at a call's start made it.
    import json

    from traceinsight.report.document import document
    path = MATRIX / "h200_clean27A" / "record" / "holdout30_decode_tolist__stack" / "drive.pt.trace.json.gz"
    a = analyze_model(build_model(load_trace(path)))
    sync = next(f for f in a.findings + a.minor_findings if f.kind == "sync_stall")
    site = sync.evidence["sync_sites"][0]
    assert site["op"] == "aten::to"
    assert site["source"] == "Tensor.tolist() in before(), def at workloads/holdout30_decode_tolist.py:46"
    text = json.dumps(document(a), default=str)
    assert "traceinsight/trace/record" not in text and "pybind11_detail" not in text
    # The host's reading of copied results in an eval loop recorded the same way is the user's numpy, not
    # "step(), def at torch/profiler/profiler.py:884 in _advance() (the profiler's own)".
    path = MATRIX / "h100_record_infer" / "record" / "holdout6_eval_topk_numpy__stack" / "drive.pt.trace.json.gz"
    text = json.dumps(document(analyze_model(build_model(load_trace(path)))), default=str)
    assert "traceinsight/trace/record" not in text and "_advance()" not in text
    assert "workloads/holdout6_eval_topk_numpy.py" in text


def test_callers_pass_over_ranges_that_outlive_their_parent():
    # Rows in nesting order: loop() calls token(), whose hook's enter() opens ProfilerStep#2 and returns;
    # token() returns, and loop() then calls tolist() (nested in ProfilerStep#2 by time).
    import numpy as np

    from traceinsight.trace.pycalls import callers
    names = ["loop", "token", "enter", "ProfilerStep#2", "tolist"]
    kinds = np.array(["python", "python", "python", "annotation", "python"], dtype=object)
    ts = np.array([0.0, 10.0, 20.0, 25.0, 60.0])
    end = np.array([100.0, 40.0, 30.0, 90.0, 70.0])
    parent = np.array([-1, 0, 1, 2, 3])
    assert [names[q] for q in callers(4, parent, kinds, ts, end)] == ["loop"]
    # Inside token(), before the hook: the plain chain.
    assert [names[q] for q in callers(2, parent, kinds, ts, end)] == ["token", "loop"]
