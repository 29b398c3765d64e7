"""Which Python call a stretch of host time went to (trace/pycalls.py): the memoised labeller against the
plain walk up the tree it stands in for."""
from pathlib import Path

import numpy as np
import pytest

from traceinsight.trace import pycalls
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces" / "matrix"
# with_stack traces: a main-process loader's Python (deep user and library stacks), and one recorded by
# `traceinsight record`, whose hooks step the profiler (ProfilerStep ranges that outlive their parent).
TRACES = ["h200_clean34A/holdout18_loader_json_records__before__stack.json.gz",
          "h100_clean13A/record/item_logging__stack/drive.pt.trace.json.gz"]


def _tree(cpu):
    return tuple(cpu[c].to_numpy() for c in ("parent", "name", "kind", "ts", "end"))


@pytest.mark.parametrize("rel", TRACES)
def test_the_labeller_names_each_event_as_the_walk_up_the_tree_does(rel):
    cpu = build_model(load_trace(MATRIX / rel)).cpu
    parent, names, kinds, ts, end = _tree(cpu)
    rows = np.flatnonzero(kinds != "runtime")
    rows = rows[~pycalls._detached(rows, parent, kinds, end)]
    labels = pycalls._Labeller(parent, names, kinds, ts, end)
    got = [labels.of(e) for e in rows.tolist()]
    want = [pycalls._label(e, *labels.tree) for e in rows.tolist()]
    assert len(rows) > 5000
    assert got == want
    # Most of them are user code's calls, named with where the user's frame is.
    assert sum(" in " in g or " itself, " in g for g in got) > 0.5 * len(got)


def test_an_event_under_a_range_that_outlives_its_parent_is_named_by_the_walk():
    # loop() calls token(), whose hook's enter() opens ProfilerStep#2 and returns; token() returns, and
    # loop() then calls tolist() (nested in ProfilerStep#2 by time): tolist() is loop()'s call.
    names = np.array(["train.py(10): loop", "train.py(40): token", "torch/profiler/profiler.py(5): enter",
                      "ProfilerStep#2", "<built-in method tolist of Tensor object at 0x1>"], dtype=object)
    kinds = np.array(["python", "python", "python", "annotation", "python"], dtype=object)
    ts = np.array([0.0, 10.0, 20.0, 25.0, 60.0])
    end = np.array([100.0, 40.0, 30.0, 90.0, 70.0])
    parent = np.array([-1, 0, 1, 2, 3])
    labels = pycalls._Labeller(parent, names, kinds, ts, end)
    assert labels.of(4) == "Tensor.tolist() in loop(), def at train.py:10"
    assert labels.of(2) == ("enter(), def at torch/profiler/profiler.py:5 in token(), def at train.py:40 "
                            "(the profiler's own)")
    assert labels.of(1) == "token() itself, def at train.py:40"


def test_the_rows_a_span_overlaps_are_found_per_depth_as_a_scan_finds_them():
    cpu = build_model(load_trace(MATRIX / TRACES[0])).cpu
    rows = np.arange(len(cpu))
    ts, end, depth = (cpu[c].to_numpy()[rows] for c in ("ts", "end", "depth"))
    levels = pycalls._by_level(ts, end, depth)
    assert levels is not None and len(levels) > 5
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = rng.uniform(ts.min(), end.max())
        b = a + rng.exponential((end.max() - ts.min()) / 50)
        assert np.array_equal(pycalls._overlapping(levels, end, a, b), np.flatnonzero((ts < b) & (end > a)))
    # Rows of one depth out of time order: no index, each span is scanned.
    assert pycalls._by_level(np.array([5.0, 1.0]), np.array([6.0, 2.0]), np.array([0, 0])) is None
