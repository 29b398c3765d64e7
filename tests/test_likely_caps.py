"""No end of a range promises more than the fix can recover (estimate/rank.py, bounds.recoverable_us): the caps
the point estimate has (a fix of idle time: the un-profiled step's recoverable idle, so no step shorter than its
GPU work; a kind whose estimate is its measured idle: that idle) hold for the replay's range, the likely range and
an alternative's too, and a range the cap cut says so. A review found a launch fix "likely" to save more than the
estimated step less its GPU work, and a host fix "likely" to 18.6 ms beside its 0.78 ms of measured idle."""
from __future__ import annotations

import pytest

from traceinsight.estimate.bounds import CAP_GPU, CAP_IDLE, cut_range, recoverable_us
from traceinsight.estimate.likely import likely

from conftest import doc_of

BERT = "sample_traces/matrix/h200_clean44A/holdout40_hf_bert_token_mask_loss__before__stack.json.gz"
NCCL = "tests/data/external/hta/a100_rank0_of2_nccl.json.gz"
MULTI = "tests/data/external/hta/a100_cuda_event_sync_multi_stream.json.gz"
TL_BERT = "tests/data/external/tracelens/h100_gaunernst_bert-small-uncased__1016001.json.gz"
# (rounding: the document's figures are to the microsecond)
EPS = 0.0015


def _finding(path: str, kind: str) -> dict:
    d = doc_of(path)
    return next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == kind)


def _gpu_floor(path: str) -> float:
    """What a fix of idle time can save at most here: the estimated un-profiled step less its GPU busy time (ms)."""
    d = doc_of(path)
    return d["summary"]["unprofiled_step_ms"] - d["whatif"]["gpu_busy_ms"]


def _tops(f: dict, idle_only: bool = False) -> list[float]:
    """The top of every range a finding shows: the replay's, the likely one, each alternative's (idle_only: not the
    launch fix's torch.compile, which also fuses kernels, so it takes GPU work away too)."""
    rngs = [f.get("savings_range_ms"), f.get("likely_savings_range_ms")]
    for a in f.get("alternatives") or ():
        if not (idle_only and a["option"] == "torch_compile"):
            rngs += [a.get("savings_range_ms"), a.get("likely_savings_range_ms")]
    return [r[1] for r in rngs if r]


def test_a_launch_fix_is_never_likely_to_leave_a_step_shorter_than_its_gpu_work():
    # BERT with a token-mask loss, with_stack: 23.969 ms estimated, 6.722 ms of GPU work a step. The band of our
    # measured launch fixes reached 18.772 ms; no graph of the launches saves more than 17.247 ms there.
    f = _finding(BERT, "launch_overhead")
    cap = _gpu_floor(BERT)
    lo, hi = f["likely_savings_range_ms"]
    assert lo < f["estimated_savings_ms"] <= hi <= cap + EPS
    assert hi == pytest.approx(cap, abs=EPS), (hi, cap)        # (the cap bit: the band went past it)
    assert "its top cut to" in f["likely_basis"] and CAP_IDLE in f["likely_basis"]
    # (no longer the band's top of the un-profiled step, which allowed a step longer than the estimate)
    assert "top of its band" not in f["likely_basis"]


def test_a_host_fix_whose_estimate_is_its_idle_promises_no_more_than_that_idle():
    # HTA's DDP rank: the host fix's replay (30.094 ms) is under its measured idle (32.694 ms), and the likely
    # range had reached 67.47 ms; the launch fix's estimate is already the whole step less its GPU work.
    host = _finding(NCCL, "host_bound")
    lo, hi = host["likely_savings_range_ms"]
    assert lo < host["estimated_savings_ms"] < hi <= host["measured_cost_ms_per_step"] + EPS
    assert "its top cut to" in host["likely_basis"] and "the idle the finding measured" in host["likely_basis"]
    launch = _finding(NCCL, "launch_overhead")
    assert launch["estimated_savings_ms"] <= _gpu_floor(NCCL) + EPS
    assert launch["likely_savings_range_ms"][1] == pytest.approx(launch["estimated_savings_ms"], abs=EPS)


def test_the_replay_of_all_host_work_is_no_range_past_the_measured_idle():
    # HTA's multi-stream event sync: 0.782 ms of idle during host work; a replay with all host work removed gave
    # 18.638 ms, the stretch the report's limits call unattributed. It was the replay's range and the likely top.
    f = _finding(MULTI, "host_bound")
    cost = f["measured_cost_ms_per_step"]
    assert f["estimated_savings_ms"] == pytest.approx(cost, abs=EPS)
    assert all(t <= cost + EPS for t in _tops(f)), f
    assert f["savings_range_ms"] is None
    assert f["likely_savings_range_ms"][0] < 0.0     # (a small fix may cost time: the low end is the band's)
    # The report still says what the replay gave, as what it is not.
    assert "the most its fix recovers" in f["estimate_method"] and "18.6" in f["estimate_method"]


def test_a_small_host_fix_stays_under_its_idle():
    # TraceLens's H100 BERT: 0.273 ms replayed against 0.373 ms of idle; the likely top had been 0.675 ms.
    f = _finding(TL_BERT, "host_bound")
    assert max(_tops(f)) <= f["measured_cost_ms_per_step"] + EPS
    assert f["likely_savings_range_ms"][1] == pytest.approx(f["measured_cost_ms_per_step"], abs=EPS)


@pytest.mark.parametrize("path", ["sample_traces/launch_small_mlp__before.json.gz",
                                  "sample_traces/sync_mask_loss__before.json.gz",
                                  "sample_traces/host_preprocess__before.json.gz",
                                  "sample_traces/pageable_h2d__before.json.gz",
                                  BERT, NCCL, MULTI, TL_BERT])
def test_every_range_holds_its_point_and_no_fix_of_idle_passes_the_gpu_work(path):
    d = doc_of(path)
    for f in d["findings"] + d["minor_findings"]:
        for rng in (f.get("savings_range_ms"), f.get("likely_savings_range_ms")):
            if rng:
                assert rng[0] <= f["estimated_savings_ms"] + EPS and f["estimated_savings_ms"] <= rng[1] + EPS, f
        for a in f.get("alternatives") or ():
            for rng in (a.get("savings_range_ms"), a.get("likely_savings_range_ms")):
                if rng:
                    assert rng[0] <= a["estimated_savings_ms"] + EPS <= rng[1] + 2 * EPS, a
        if f["kind"] in ("launch_overhead", "host_bound"):      # (fixes of idle time: the GPU's work stays)
            assert max(_tops(f, idle_only=True) + [f["estimated_savings_ms"]]) <= _gpu_floor(path) + EPS, (path, f["kind"])
            # torch.compile also fuses kernels: it may pass the idle, never the step (the GPU work it leaves stays).
            compiled = [a for a in f.get("alternatives") or () if a["option"] == "torch_compile"]
            assert all(max(_tops({"alternatives": [a]}) + [a["estimated_savings_ms"]])
                       < d["summary"]["unprofiled_step_ms"] for a in compiled), (path, compiled)


def test_a_fix_of_the_kernels_keeps_its_own_cap():
    # TF32 shortens the GPU's work itself: its range may pass the step less its GPU busy time (the cap is the idle
    # and the kernels it changes), which a fix of idle time may not.
    path = "sample_traces/fp32_matmul__before.json.gz"
    f = _finding(path, "fp32_matmul")
    assert f["likely_savings_range_ms"][1] > _gpu_floor(path) + 0.01
    assert f["estimated_savings_ms"] <= f["likely_savings_range_ms"][1]


def test_a_copy_fix_is_held_to_the_kernels_it_leaves_not_to_its_modelled_copies():
    # holdout2_d2h_features (H100): 33.5 MB of pageable copies a step. The point stops where the step reaches its
    # copies at the 50 GB/s assumed (0.671 ms); pinned and overlapped, the fixed step measured 0.621 ms, under it.
    # The modelled copy time is no physics: the likely range stops at the kernels the fix leaves, and holds it.
    import json
    from pathlib import Path
    run = Path(__file__).resolve().parents[1] / "sample_traces/matrix/h100_clean4A"
    path = str((run / "holdout2_d2h_features__before__default.json.gz").relative_to(run.parents[2]))
    d = doc_of(path)
    f, w, u = d["findings"][0], d["whatif"], d["summary"]["unprofiled_step_ms"]
    assert f["kind"] == "pageable_memcpy"
    assert u - f["estimated_savings_ms"] == pytest.approx(w["pinned_copy_ms"], abs=EPS)
    lo, hi = f["likely_savings_range_ms"]
    assert u - hi >= w["kernel_busy_ms"] - EPS and hi > u - w["pinned_copy_ms"]
    step = {e["variant"]: e["step_ms"]["median"] for e in json.loads((run / "manifest.json").read_text())["entries"]
            if e["workload"] == "holdout2_d2h_features"}
    assert u / (u - lo) <= step["before"] / step["after_overlap"] <= u / (u - hi)


def test_cut_range_and_recoverable_us():
    # A range past the cap is cut there, never below the point; one whose ends then agree is none.
    assert cut_range((1000.0, 5000.0), 2000.0, 3000.0) == ((1000.0, 3000.0), True)
    assert cut_range((1000.0, 5000.0), 2000.0, 6000.0) == ((1000.0, 5000.0), False)
    assert cut_range((2000.0, 5000.0), 2000.0, 1500.0) == (None, True)
    assert cut_range(None, 2000.0, 1500.0) == (None, False)
    # A fix of idle time: the idle and its cost beyond it; the GPU's busy time is no floor for a fix of the kernels
    # (TF32 at 6 ms of GPU work a step in a 10 ms step: the idle and the kernels it changes).
    from traceinsight.analyses.fixes import ScaleKernels
    info = {"gpu_busy_ms": 6.0}
    assert recoverable_us((), 10_000.0, info, 3000.0, 200.0, idle_fix=True) == (3200.0, CAP_IDLE)
    tf32 = (ScaleKernels("gemm", 0.2),)
    assert recoverable_us(tf32, 10_000.0, info, 3000.0, 0.0, touched_us=5000.0) == (8000.0, CAP_GPU)
    assert recoverable_us(tf32, 10_000.0, info, 3000.0, 0.0, touched_us=5000.0, idle_fix=True)[0] == 8000.0


def test_the_likely_range_says_where_the_cap_cut_it():
    # 2 ms estimated of 10 ms (sync_stall's own band at 1.25x reaches past 2.2 ms): cut at 2.2 ms, and said.
    rng, why = likely("sync_stall", 2000.0, 10_000.0, (2200.0, 2200.0), None, cap_why="what it can recover")
    assert rng[1] == 2200.0 and "its top cut to 2.200 ms, what it can recover" in why
    rng, why = likely("sync_stall", 2000.0, 10_000.0, (9000.0, 9000.0), None, cap_why="what it can recover")
    assert rng[1] < 9000.0 and "cut" not in why
