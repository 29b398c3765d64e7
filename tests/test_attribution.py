"""Attribution helpers on hand-made arrays."""


def test_blocking_calls_back_to_back_are_one_wait():
    import numpy as np
    from traceinsight.analyses.attribution import _chain_start
    # A pageable copy and its stream sync 2 us later are one wait; a sync after 500 us of host work is not.
    ts = np.array([0.0, 102.0, 700.0, 710.0])
    end = np.array([100.0, 110.0, 705.0, 720.0])
    assert _chain_start(ts, end).tolist() == [0, 0, 2, 2]


def test_the_last_steps_trailing_gap_is_the_cpus_not_unattributed():
    # No GPU work follows the trace's last gap, which ends where the loop's last ProfilerStep ends: the
    # eval loop's numpy on its last copied batch is the sync's, as in every other step (the expert review
    # found 18.8 ms of it "unattributed" and the sync counted 0.8 times per step).
    from pathlib import Path
    from traceinsight.report.analyze import analyze_file
    root = Path(__file__).resolve().parents[1]
    a = analyze_file(root / "sample_traces/matrix/h100_holdout11/holdout11_seg_eval_numpy__before__default.json.gz")
    last = a.per_step.iloc[-1]
    assert last["unattributed"] == 0 and last["sync_stall"] > 15000
    site = next(f for f in a.findings if f.kind == "sync_stall").evidence["sync_sites"][0]
    assert site["stalls_per_step"] == 1.0 and site["per_step"] == 1.0
