"""activation_checkpointing: the fifty-second held-out set (sample_traces/matrix/h100_clean65*, registered before it
was recorded) and a real trace recorded by others (MI300 ResNet with checkpointing, communication-bound). Estimates are
checked against the set's measured un-profiled steps (each run's manifest), not against themselves."""
from __future__ import annotations

from pathlib import Path

import pytest

from matrix_runs import doc, kinds, measured_speedup, predicted_speedup, trace_path
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model
from traceinsight.trace.recompute import segments

RUNS = ("h100_clean65A", "h100_clean65C")
PAIRS = ("holdout52_ckpt_tagger_train", "holdout52_ckpt_convnet_train")
EXTERNAL = Path(__file__).resolve().parent / "data" / "external" / "tracelens" / "mi300_resnet_act_checkpoint.json.gz"


def _finding(d: dict) -> dict:
    return next(f for f in d["findings"] if f["kind"] == "activation_checkpointing")


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("wl", PAIRS)
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_top_finding_and_estimate_against_the_measured_fix(run, wl, setting):
    d = doc(run, wl, "before", setting)
    assert kinds(d)[0] == "activation_checkpointing"
    f = _finding(d)
    step = d["whatif"]["unprofiled_step_ms"]
    predicted, truth = predicted_speedup(d, f), measured_speedup(run, wl)
    assert abs(predicted / truth - 1) <= 0.25, (predicted, truth)
    # Never a step shorter than its GPU work less the recomputed kernels.
    assert step - f["estimated_savings_ms"] >= d["whatif"]["gpu_busy_ms"] - f["gpu_work_removed_ms"] - 0.05


@pytest.mark.parametrize("wl", PAIRS)
def test_the_advice_names_checkpointing_and_what_the_trace_cannot_show(wl):
    f = _finding(doc("h100_clean65A", wl, "before"))
    assert "torch.utils.checkpoint" in f["fix"] and "gradient_checkpointing_disable()" in f["fix"]
    assert "cannot show whether they fit" in f["fix"]
    style = f["evidence"]["checkpoint_style"]
    assert style.startswith("re-entrant" if "convnet" in wl else "non-re-entrant")


def test_launch_fix_waits_for_checkpointing():
    d = doc("h100_clean65A", "holdout52_ckpt_tagger_train", "before")
    launch = next(f for f in d["findings"] if f["kind"] == "launch_overhead")
    assert launch["needs_first"] == ["activation_checkpointing"]
    assert [p["kind"] for p in d["whatif"]["plan"]][:2] == ["activation_checkpointing", "launch_overhead"]


@pytest.mark.parametrize("setting", ("default", "stack"))
def test_no_recompute_without_a_backward_pass(setting):
    """The control: the checkpointed model under no_grad runs each forward once."""
    path = trace_path("h100_clean65A", "holdout52_ckpt_eval_healthy", "before", setting)
    assert segments(build_model(load_trace(path))).empty
    d = doc("h100_clean65A", "holdout52_ckpt_eval_healthy", "before", setting)
    assert "activation_checkpointing" not in kinds(d) + [f["kind"] for f in d["minor_findings"]]


def test_the_fixed_step_has_no_recompute():
    path = trace_path("h100_clean65A", "holdout52_ckpt_tagger_train", "after")
    assert segments(build_model(load_trace(path))).empty


def test_real_communication_bound_trace_keeps_its_headline():
    """MI300 ResNet with checkpointing (recorded by others): its recomputation is found, under ReluBackward0, and
    claims nothing in a step that waits on NCCL."""
    if not EXTERNAL.exists():
        pytest.skip("external trace not copied")
    d = document(analyze_file(EXTERNAL))
    assert kinds(d)[0] == "exposed_communication"
    f = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "activation_checkpointing")
    assert f["evidence"]["segments_recomputed_per_step"] >= 1
    assert "ReluBackward0" in f["evidence"]["recomputed_under"]
    assert f["estimated_savings_ms"] < 0.5
