"""host_built_tensors: the fifty-third held-out set (sample_traces/matrix/h100_clean66*, registered before it was
recorded): a YOLO-style detector and a decoder LM that build constants (grids; a causal mask and rotary tables) on the
CPU every call and copy them to the GPU, and an LM fed from pinned memory as the control. Estimates are checked against
the set's measured un-profiled steps (each run's manifest), not against themselves."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix_runs import ROOT, doc, kinds, measured_speedup, predicted_speedup

RUNS = ("h100_clean66A", "h100_clean66B", "h100_clean66C", "h100_clean66D")
DETECT, LM, CONTROL = "holdout53_host_grid_detect_infer", "holdout53_host_mask_lm_train", "holdout53_pinned_feed_healthy"
ALEXNET = Path(__file__).resolve().parent / "data" / "external" / "hta" / "a100_alexnet_memcpy_sync_permute.json.gz"


def _finding(d: dict) -> dict:
    return next(f for f in d["findings"] if f["kind"] == "host_built_tensors")


def _spread(run, wl):
    """The measured speed-up's p10-p90 spread: (before's p10 / after's p90, before's p90 / after's p10)."""
    man = json.loads((ROOT / run / "manifest.json").read_text())
    b, a = (next(e for e in man["entries"] if e["workload"] == wl and e["variant"] == v)["step_ms"]
            for v in ("before", "after"))
    return b["p10"] / a["p90"], b["p90"] / a["p10"]


def _speedups(run, wl, setting):
    d = doc(run, wl, "before", setting)
    return d, predicted_speedup(d, _finding(d)), measured_speedup(run, wl)


@pytest.mark.parametrize("run", RUNS[1:])
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_detector_top_finding_and_estimate_against_the_measured_fix(run, setting):
    d, predicted, truth = _speedups(run, DETECT, setting)
    assert kinds(d)[0] == "host_built_tensors"
    assert abs(predicted / truth - 1) <= 0.25, (predicted, truth)


@pytest.mark.parametrize("setting", ("default", "stack"))
def test_detector_first_process_is_an_under_estimate(setting):
    """clean66A's process measured 2.12x where the same host's other three measured 1.48-1.68x: the estimate reads
    the trace's host time and stays below, never over (a known miss, in the matrix README)."""
    _d, predicted, truth = _speedups("h100_clean66A", DETECT, setting)
    assert 1.1 < predicted < truth


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_lm_finding_and_the_launch_fix_waits_for_it(run, setting):
    """The LM is launch-bound with or without its constants: the CUDA graph ranks by what it adds after them, and names
    them first (a blocking copy's stream sync cannot be captured). Its un-profiled steps were noisy (the mask's host
    ops on the CPU's thread pool: one process's p10-p90 ran 29-69 ms; README), so the estimate is held to what the
    measurement can say: a saving, and none past the top of the measured spread (before's p90 over after's p10)."""
    d, predicted, _truth = _speedups(run, LM, setting)
    assert "host_built_tensors" in kinds(d)
    launch = next(f for f in d["findings"] if f["kind"] == "launch_overhead")
    assert "host_built_tensors" in [p["kind"] for p in launch["evidence"]["prerequisites"]]
    assert launch["fix"].startswith("First: tensors built on the host")
    assert 1.1 < predicted <= _spread(run, LM)[1]
    assert d["whatif"]["unprofiled_step_ms"] - _finding(d)["estimated_savings_ms"] >= d["whatif"]["gpu_busy_ms"]


@pytest.mark.parametrize("wl", (DETECT, LM))
def test_the_advice_is_to_build_them_on_the_device_or_once(wl):
    f = _finding(doc("h100_clean66B", wl, "before", "stack"))
    assert "device=" in f["fix"] and "register_buffer" in f["fix"] and "Pinning them would not help" in f["fix"]
    # Where: the user's function that copies them (with Python stacks), and what built them.
    assert "_host_consts.py" in f["title"]
    assert ("aten::arange" if wl == DETECT else "aten::full") in f["evidence"]["built_by"]
    per_step = f["evidence"]["tensors_copied_per_step"]
    assert per_step == (6 if wl == DETECT else 18)          # two grids for each of 3 levels; 3 tensors in 6 blocks


def test_pinning_is_not_advised_for_the_same_copies():
    d = doc("h100_clean66B", DETECT, "before", "stack")
    assert "pageable_memcpy" not in kinds(d) + [f["kind"] for f in d["minor_findings"]]


@pytest.mark.parametrize("run", RUNS)
def test_fixed_programs_and_the_control_build_nothing_on_the_host(run):
    for wl, var in ((DETECT, "after"), (LM, "after"), (CONTROL, "before")):
        for setting in ("default", "stack"):
            d = doc(run, wl, var, setting)
            every = kinds(d) + [f["kind"] for f in d["minor_findings"]]
            assert "host_built_tensors" not in every, (wl, var, setting)
            if wl == CONTROL:
                assert not {"pageable_memcpy", "sync_stall"} & set(every), (run, setting)


def test_one_window_cannot_show_a_copy_repeats():
    """a100_alexnet's window (no step markers) builds its model on the CPU and moves the weights once."""
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ALEXNET))
    assert "host_built_tensors" not in [f["kind"] for f in d["findings"] + d["minor_findings"]]


def test_data_made_in_the_main_thread_is_not_a_constant():
    """An MLM's masked ids made from Python lists in the main thread and copied each step (torch.tensor(ids): an
    outermost aten::empty, then lift_fresh) are data (making them on the device is not the fix): an expert review found them read as host-built."""
    d = doc("h100_clean17C", "holdout20_mlm_masking_main", "before")
    assert "host_built_tensors" not in kinds(d) + [f["kind"] for f in d["minor_findings"]]
