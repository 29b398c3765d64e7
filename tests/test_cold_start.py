"""A profile that starts with the process and has no ProfilerStep markers (a profile() without a schedule):
sample_traces/coldstart, recorded on an H200 by record_cold.py, with the steady step timed un-profiled after
the profiler. The steps come from the optimizer's; CUDA start-up and the first runs are the first, partial
step's, not the loop's."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from traceinsight.render import sections
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

COLD = Path(__file__).resolve().parents[1] / "sample_traces" / "coldstart"


@lru_cache(maxsize=None)
def _doc(batch: int) -> tuple[dict, dict]:
    return (document(analyze_file(COLD / f"cold_conv_b{batch}.json.gz")),
            json.loads((COLD / f"cold_conv_b{batch}.manifest.json").read_text()))


def test_steps_come_from_the_optimizer_and_the_cold_start_is_left_out():
    d, man = _doc(512)
    assert d["trace"]["step_source"] == "Optimizer.step" and d["summary"]["steps"] == man["steps_profiled"]
    first = d["steps"][0]
    assert first["partial"] and first["duration_ms"] > 500 and first["idle_by_cause_ms"]["cuda_startup"] > 100
    assert any(x.startswith("No ProfilerStep markers: the steps are the training loop's optimizer steps")
               for x in d["trace"]["limits"])
    assert sections.step_counts(d).startswith("6 steps (Optimizer.step, 2 partial or warm-up, left out of the medians")
    # The GPU-bound loop reads as it ran: a 16 ms step (15.99 ms measured un-profiled), the GPU busy, no launch
    # fix. Read as one window it had been "launch-bound, 92% idle", its launch fix "saving" 697 ms a step.
    measured = man["unprofiled_steady_step_ms"]["median_ms"]
    assert d["summary"]["unprofiled_step_ms"] == pytest.approx(measured, rel=0.05)
    assert d["summary"]["median_step_ms"] == pytest.approx(measured, rel=0.05)
    kinds = [f["kind"] for f in d["findings"]]
    assert "launch_overhead" not in kinds and d["summary"]["gpu_idle_pct"] < 5


def test_a_launch_bound_cold_run_is_still_launch_bound():
    d, _man = _doc(1)
    assert d["findings"][0]["kind"] == "launch_overhead"
    # Start-up is said, with the kernels' first launches (lazy module loading) now in the first two steps.
    start = next(x for x in d["trace"]["limits"] if x.startswith("The window includes start-up"))
    assert "cudaDeviceGetStreamPriorityRange" in start and "cudaLaunchKernel" in start
    # Ids the driver used while it loaded kernels are not a cut file.
    assert not any(x.startswith("Events are missing") for x in d["trace"]["limits"])
    lib = next(x for x in d["trace"]["limits"] if x.startswith("Calls the profiler does not write"))
    assert "inside aten::cudnn_convolution or as a start-up call returned" in lib
