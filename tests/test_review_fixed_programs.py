"""A review of reports on fixed programs (a subagent briefed with EXPERT_REVIEW.md, session 77): what the program
already does changes what its idle means. Each test is a trace of the matrix's "after" variants and what the raw
events showed the reviewer."""
from __future__ import annotations

from pathlib import Path

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document
from traceinsight.trace.generation import replayed_loop
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces/matrix"


def _doc(run: str, name: str) -> dict:
    return document(analyze_file(MATRIX / run / f"{name}.json.gz"))


def _all(d: dict) -> list[dict]:
    return d["findings"] + d["minor_findings"]


def test_spacing_inside_one_graph_replay_is_no_launch_overhead():
    # A MobileNetV3 replayed from one CUDA graph a step: the GPU 86% busy and 0.7 ms behind the CPU; its idle is
    # ~300 gaps of 0.5 us between the graph's own kernels, which no CPU fix shortens. It had read launch-bound.
    d = _doc("h200_clean48A", "holdout42_timm_mobilenetv3_infer_graph__after__default")
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    assert idle["graph_spacing"] > 0.1 and idle["launch_overhead"] < 0.01
    assert d["healthy"] and not d["findings"]


def test_a_generation_loop_already_graphed_gets_advice_its_caller_can_use():
    # transformers' generate() with the static cache: 15 forwards a step replayed as graphs, the library's own
    # per-token work eager between them.
    name = "holdout44_hf_llama_generate_static__after__default"
    assert replayed_loop(build_model(load_trace(MATRIX / "h200_clean51B" / f"{name}.json.gz"))) == 15
    assert replayed_loop(build_model(load_trace(
        MATRIX / "h200_clean48A" / "holdout42_timm_mobilenetv3_infer_graph__after__default.json.gz"))) == 0
    d = _doc("h200_clean51B", name)
    launch = next(f for f in _all(d) if f["kind"] == "launch_overhead")
    assert "15 a step" in launch["fix"] and "No further graph of the model removes it" in launch["fix"]
    assert "static buffers" not in launch["fix"]
    # Its host work is the loop's: no warm-cache multiple (it had read 12.3 ms from 3.4 ms of idle).
    host = next(f for f in _all(d) if f["kind"] == "host_bound")
    assert host["estimated_savings_ms"] <= host["measured_cost_ms_per_step"] + 0.01


def test_an_optimizers_own_python_is_named_as_such_and_not_multiplied():
    # A Llama step replaying eager launches with Adam's Python in its host-bound gaps (2.1 ms a step of a 74 ms
    # launch-bound step): it had been told to move it to a DataLoader worker, and the warm-cache factor had made it
    # 12.6 ms. The warm bonus is at most the host work's own time again.
    d = _doc("h200_clean49A", "holdout42_hf_llama_loss_item_accum__after__stack")
    host = next(f for f in _all(d) if f["kind"] == "host_bound")
    assert host["estimated_savings_ms"] <= 2 * host["measured_cost_ms_per_step"] + 0.01
