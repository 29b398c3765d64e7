"""A loop over data-dependent groups, one sync per group (analyses/split_loop.py): the fix is one batched turn, which
also takes the other turns' CPU work, forward and backward (a fixes.Unblock of those turns). Checked against the forty-sixth set's
measured fixes of a mixture-of-experts dispatch written as `for e in experts: (idx == e).nonzero()` -> a
fixed-capacity dispatch (training and bf16 inference, four processes of one H100 host, h100_clean53A-D): the syncs'
idle alone had read 1.2-1.3x against 1.8-2.9x measured, and launch_overhead had ranked first on all 16."""
from __future__ import annotations

import json
from pathlib import Path

from matrix_runs import measured_speedup
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces/matrix"
RUNS = sorted(p.name for p in MATRIX.glob("h*_clean53?") if (p / "manifest.json").exists())
WORKLOADS = ("holdout46_moe_loop_train", "holdout46_moe_loop_infer")


def test_the_batched_turn_estimate_holds_the_measured_dispatch_fixes():
    assert len(RUNS) == 4, RUNS
    within, top, n = 0, 0, 0
    for run in RUNS:
        for workload in WORKLOADS:
            for setting in ("default", "stack"):
                d = document(analyze_file(MATRIX / run / f"{workload}__before__{setting}.json.gz"))
                f = next(x for x in d["findings"] if x["kind"] == "sync_stall")
                loop = f["evidence"]["group_loop"]
                assert (loop["loops_per_step"], loop["groups_each"], loop["ops_each_turn"]) == (4.0, 8, 14), loop
                # the backward's turns are found where there is a backward
                assert loop["backward_loops_per_step"] == (4.0 if workload.endswith("train") else 0.0), loop
                assert "one batched turn for all the groups" in f["fix"]
                u = d["summary"]["unprofiled_step_ms"]
                pred, meas = u / (u - f["estimated_savings_ms"]), measured_speedup(run, workload)
                assert abs(pred - meas) <= 0.5 * meas, (run, workload, setting, round(pred, 2), round(meas, 2))
                within += abs(pred - meas) <= 0.25 * meas
                top += d["findings"][0]["kind"] == "sync_stall"
                n += 1
                # Physics: the step after the fix is no shorter than its GPU work (kept: the batched turn's kernels).
                assert u - f["estimated_savings_ms"] >= 0.95 * d["summary"]["median_gpu_busy_ms"], (run, workload)
    # (12 of 16 within 25% and 15 of 16 ranked first on 2026-12-05: the inference rows over on C and D, +23..+43%,
    # where the fixed step measured 5.8 ms against 3.9-4.4 on A and B; A's default inference trace, its un-profiled
    # step estimated 29% short, ranked the launch fix first)
    assert within >= 11, within
    assert top >= 14, top


def test_other_syncs_are_no_group_loop():
    # A masked loss's one nonzero a step, a vocabulary's unique, a decode loop's per-token end check and a per-block
    # finite check (bool() of a tensor: aten::is_nonzero, in a loop), per-parameter .item() calls: no group loop.
    for run, name in (("h200_clean34A", "sync_mask_loss"), ("h200_clean34A", "holdout4_masked_seq_loss"),
                      ("h200_clean34A", "nonzero_unique_sync"), ("h100_clean13C", "holdout13_vocab_unique_numpy"),
                      ("h200_clean27A", "holdout30_decode_eos_check"), ("h200_clean36A", "holdout32_compiled_nan_assert"),
                      ("h200_clean26A", "holdout29_clip_per_tensor")):
        path = MATRIX / run / f"{name}__before__stack.json.gz"
        assert path.exists(), path
        d = document(analyze_file(path))
        for f in d["findings"] + d["minor_findings"]:
            assert "group_loop" not in f["evidence"], (name, f["kind"])


def test_the_report_says_what_the_loop_costs():
    # (an expert review of 53A-C's reports, 2026-12-05)
    d = document(analyze_file(MATRIX / "h100_clean53B/holdout46_moe_loop_infer__before__default.json.gz"))
    top = d["findings"][0]
    assert top["kind"] == "sync_stall"
    # The loop's CPU work is what costs, not the waits: the verdict and the title say so.
    assert d["verdict"].startswith("CPU-bound in a loop over groups, a sync in each turn")
    assert top["title"].startswith("A loop over data-dependent groups, a sync in each turn (aten::nonzero_numpy)")
    # An inference loop has no backward to batch; nor is a group loop's turn a generate loop's forward to graph.
    assert "forward (no backward here)" in top["fix"] and "forward and backward" not in top["fix"]
    assert "generate loop" not in json.dumps(d)
    # The launch fix comes after the loop's in the plan: its saving alone is no rival to measure.
    assert "may save as much or more" not in d["verdict"] and "measure both" not in d["verdict"]
    # The healthy MoE's index_put sorts are no sync's data-dependent kernels: no sync_stall, ranked or minor.
    h = document(analyze_file(MATRIX / "h100_clean53C/holdout46_moe_capacity_healthy__before__stack.json.gz"))
    assert h["healthy"] and not any(f["kind"] == "sync_stall" for f in h["findings"] + h["minor_findings"])
