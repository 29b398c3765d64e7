"""Attribution helpers on hand-made arrays."""


def test_blocking_calls_back_to_back_are_one_wait():
    import numpy as np
    from traceinsight.analyses.attribution import _chain_start
    # A pageable copy and its stream sync 2 us later are one wait; a sync after 500 us of host work is not.
    ts = np.array([0.0, 102.0, 700.0, 710.0])
    end = np.array([100.0, 110.0, 705.0, 720.0])
    assert _chain_start(ts, end).tolist() == [0, 0, 2, 2]
