"""What session 72 found in its reviews of 2026-12-04, each checked where it was seen."""
from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.verdict import verdict

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "sample_traces" / "matrix"


@pytest.mark.parametrize("path, opening", [
    # timm's ResNet-50 (bf16, channels_last) as its docs advise: the GPU busy about 96% of the un-profiled step, one
    # 3% launch fix above the bar. It had opened "Launch-bound", which it is not.
    (MATRIX / "h200_clean44C" / "holdout40_timm_resnet50_bf16_healthy__before__default.json.gz",
     "Mostly GPU-bound, a little launch-bound: "),
    # Idle 9% of the step, but pinning the copies shortens GPU work (the copies are busy time): copy-bound it is.
    (ROOT / "sample_traces" / "pageable_h2d__before.json.gz", "Copy-bound: "),
    # A launch-bound step stays one.
    (ROOT / "sample_traces" / "launch_small_mlp__before.json.gz", "Launch-bound: "),
])
def test_an_idle_cause_names_what_bounds_the_step_only_where_the_idle_does(path, opening):
    assert verdict(analyze_file(path)).startswith(opening)
