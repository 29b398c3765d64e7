"""torch.compile compiling inside the window (sample_traces/compile/: one H200, torch 2.11, a training step fed a
new sequence length every step; its README has the measured steps)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

ROOT = Path(__file__).resolve().parents[1] / "sample_traces" / "compile"
DIRS = {"static": "h200_compileA", "dynamic": "h200_compileA", "limit": "h200_compileA", "cold": "h200_compileA",
        "midshape": "h200_compileB", "ro_shapes": "h200_compileB", "ro_fixed": "h200_compileB",
        "conv_static": "h200_compileC", "conv_dynamic": "h200_compileC"}
MANIFEST = {c: e for d in set(DIRS.values()) for c, e in
            json.loads((ROOT / d / "manifest.json").read_text())["cases"].items()}
_DOCS: dict = {}


def _doc(case: str, setting: str = "default") -> dict:
    key = (case, setting)
    if key not in _DOCS:
        _DOCS[key] = document(analyze_file(ROOT / DIRS[case] / f"{case}__{setting}.json.gz"))
    return _DOCS[key]


def _kinds(d: dict) -> list[str]:
    return [f["kind"] for f in d["findings"]]


def _minor(d: dict, kind: str) -> dict | None:
    return next((f for f in d["minor_findings"] if f["kind"] == kind), None)


def test_recompiling_every_step_is_the_top_finding_not_host_work():
    d = _doc("static")
    assert _kinds(d)[0] == "recompile", _kinds(d)
    f = d["findings"][0]
    ev = f["evidence"]
    # Every step of the window compiled, frame 0 from its 6th version to its 11th.
    assert ev["steps_compiling"] == "6 of 6 full steps"
    assert ev["compiled_versions"] == {"0": [5, 6, 7, 8, 9, 10]}
    assert "TORCH_LOGS=recompiles" in f["fix"] and "dynamic=True" in f["fix"]
    # The compile is no host work a worker or a background thread takes over (the advice it had got).
    assert "host_bound" not in _kinds(d)
    hb = _minor(d, "host_bound")
    step = d["summary"]["median_step_ms"]
    assert hb is None or (hb["estimated_savings_ms"] < 0.01 * step and "dynamo" not in hb["title"])
    # Nor are the autotuner's benchmark runs and syncs the program's launches and syncs: 90 kernels a step (it
    # had read 1,814), and no sync_stall.
    lo = _minor(d, "launch_overhead")
    assert lo["evidence"]["kernels_per_step"] < 100
    assert "sync_stall" not in _kinds(d) and _minor(d, "sync_stall") is None


def test_the_recompile_saving_matches_the_measured_fix():
    """Measured un-profiled: 3,030 ms a step recompiling (mean of 12, each a new length) against 8.2 ms with
    dynamic=True (median of 60): a saving of 3,022 ms. The estimate is within 15% of it, and no larger than
    the un-profiled step it is a share of."""
    d = _doc("static")
    f = d["findings"][0]
    measured = MANIFEST["static"]["unprofiled"]["mean_ms"] - MANIFEST["dynamic"]["unprofiled"]["median_ms"]
    assert abs(f["estimated_savings_ms"] - measured) <= 0.15 * measured, (f["estimated_savings_ms"], measured)
    assert f["estimated_savings_ms"] <= d["summary"]["unprofiled_step_ms"]
    # The un-profiled step's band is the window's own spread of compiling steps, and holds the measured step.
    lo, hi = d["summary"]["unprofiled_step_range_ms"]
    assert lo <= MANIFEST["static"]["unprofiled"]["mean_ms"] <= hi and d["summary"]["unprofiled_step_range_basis"] == "window"


def test_compiler_gaps_in_correlation_ids_are_not_a_cut_file():
    """The autotuner's benchmark runs use correlation ids they record no call for: 20 stretches in the static
    window, which had been reported as events cut from the file."""
    d = _doc("static")
    assert not any("Events are missing" in x for x in d["trace"]["limits"]), d["trace"]["limits"]


def test_a_warm_up_step_that_compiled_says_so():
    d = _doc("cold")
    note = next(x for x in d["trace"]["limits"] if "taken as warm-up" in x)
    assert "torch.compile compiled in them" in note
    assert "recompile" not in _kinds(d) and _minor(d, "recompile") is None


@pytest.mark.parametrize("case", ["dynamic", "limit"])
def test_no_compile_in_the_window_no_recompile(case):
    for setting in ("default", "stack"):
        d = _doc(case, setting)
        assert "recompile" not in _kinds(d) and _minor(d, "recompile") is None
        assert d["summary"]["idle_by_cause_ms_median_per_step"]["recompile"] == 0


def test_one_recompile_mid_window_is_left_out_of_the_medians():
    """torch.compile's default (dynamic=None) meets one new length in the 4th profiled step: 8.1 s of
    compiling in that step, which the medians leave out and the limits name; the other steps read as the
    launch-bound compiled step they are."""
    d = _doc("midshape")
    note = next(x for x in d["trace"]["limits"] if "past the warm-up" in x)
    assert "step(s) 5 " in note and "TORCH_LOGS=recompiles" in note
    # The steps after it run the new, dynamic graph for the old length too: no more compiles to expect, and a
    # slower program (an expert review had read "each new shape costs a compile like it" as wrong).
    assert "run compiled version 0/1 for every call" in note and "should not compile again" in note
    assert "each new shape the run meets" not in note
    assert d["summary"]["full_steps"] == 7 and d["summary"]["median_step_ms"] < 10
    assert "recompile" not in _kinds(d) and _minor(d, "recompile") is None
    assert _kinds(d)[0] == "launch_overhead"


def test_calls_that_fell_back_to_eager_are_said():
    """dynamic=False, the default recompile_limit (8), 12 lengths in turn: 2 of the window's 6 calls found no
    graph and ran eagerly; the frame's versions reach 7."""
    note = _doc("limit")["trace"]["program_note"]
    assert "2 of its 6 calls into compiled code ran eagerly" in note and "recompile_limit" in note
    assert "ran eagerly" not in (_doc("dynamic")["trace"]["program_note"] or "")
    # The cold window's two extra lookups are inner frames' inside the first run of 0/0: nothing ran eagerly.
    assert "ran eagerly" not in (_doc("cold")["trace"]["program_note"] or "")


@pytest.mark.parametrize("case", ["dynamic", "limit"])
def test_a_compiled_step_whose_shapes_change_is_not_told_to_use_reduce_overhead_first(case):
    """A new length every step: reduce-overhead would record a graph per shape and replay none (ro_shapes, the
    same lengths under it: 13.6 ms a step against 5.4 in the default mode). The advice pads first."""
    d = _doc(case)
    assert "called with other inputs from step to step" in d["trace"]["program_note"]
    f = next(f for f in d["findings"] if f["kind"] == "launch_overhead")
    assert "Pad inputs to a few fixed shapes (buckets) first" in f["fix"] and f["confidence"] == "low"
    for fixed in ("midshape", "ro_fixed"):
        assert "other inputs" not in (_doc(fixed)["trace"]["program_note"] or "")
    slow, fast = MANIFEST["ro_shapes"]["unprofiled"]["step_ms"][:12], MANIFEST["dynamic"]["unprofiled"]["step_ms"][:12]
    assert sorted(slow)[6] > 2 * sorted(fast)[6]        # the figure the advice quotes (same lengths, 152-240)


def test_reduce_overhead_that_never_replays_is_not_told_to_use_reduce_overhead():
    """mode="reduce-overhead" with a new length every step: the CUDA-graph tree warms up each shape and no
    graph replays. The launch advice is fixed shapes, not the mode it runs under, and the tree's own syncs
    inside the compiled backward are no prerequisite."""
    d = _doc("ro_shapes")
    f = d["findings"][0]
    assert f["kind"] == "launch_overhead"
    assert "already runs under torch.compile(mode=\"reduce-overhead\")" in f["fix"]
    assert "drop mode=\"reduce-overhead\"" in f["fix"] and "fixed shapes" in f["fix"] and not f["needs_first"]
    # The tree's own syncs (inside the compiled backward, warming up each shape) are no finding of the program's.
    assert "sync_stall" not in _kinds(d) and _minor(d, "sync_stall") is None
    assert "no graph replays" in d["trace"]["program_note"]
    # The same program at one length replays its graphs and reads GPU-bound (fp32 matmuls).
    fixed = _doc("ro_fixed")
    assert "CUDA-graph replays" in fixed["trace"]["program_note"]
    assert "launch_overhead" not in _kinds(fixed)


def test_dynamos_guard_checks_are_not_host_work_to_move_to_a_worker():
    """limit's host work between launches is zero_grad's loop and Dynamo's cache lookups (27-66 us each): PyTorch's
    own, told how it shrinks, not 'run it every N steps, in a background thread or DataLoader worker'."""
    f = next(f for f in _doc("limit")["findings"] + _doc("limit")["minor_findings"] if f["kind"] == "host_bound")
    assert "TorchDynamo Cache Lookup" in f["fix"] and "fewer compiled regions" in f["fix"]
    assert "DataLoader worker" not in f["fix"]


def test_held_out_conv_net_recompiling_every_step():
    """Pre-registered before it was recorded (sample_traces/compile/README.md): a conv net fed a new image size
    every step under dynamic=False, against dynamic=True timed over the same 12 sizes. Measured un-profiled:
    4,266 ms a step recompiling (mean), 33.8 ms fixed (median): a saving of 4,232 ms."""
    d = _doc("conv_static")
    f = d["findings"][0]
    assert f["kind"] == "recompile"
    measured = MANIFEST["conv_static"]["unprofiled"]["mean_ms"] - MANIFEST["conv_dynamic"]["unprofiled"]["median_ms"]
    assert MANIFEST["conv_static"]["unprofiled"]["sizes"] == MANIFEST["conv_dynamic"]["unprofiled"]["sizes"]
    assert abs(f["estimated_savings_ms"] - measured) <= 0.25 * measured, (f["estimated_savings_ms"], measured)
    u = MANIFEST["conv_static"]["unprofiled"]["mean_ms"]
    assert abs(d["summary"]["unprofiled_step_ms"] - u) <= 0.15 * u
    fixed = _doc("conv_dynamic")
    assert "recompile" not in _kinds(fixed) and _minor(fixed, "recompile") is None
