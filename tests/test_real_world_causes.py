"""Issue 11: the cause an expert names first on real traces recorded by others, and what must not be
claimed (tests/data/external/tracelens/README.md says what an expert sees in each)."""
from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

ROOT = Path(__file__).resolve().parent
CANDIDATES = [ROOT / "data" / "external" / "tracelens"]


def _doc(name: str) -> dict:
    for d in CANDIDATES:
        if (d / name).exists():
            return document(analyze_file(d / name))
    pytest.skip(f"{name} not found")


def kinds(d: dict) -> list[str]:
    return [f["kind"] for f in d["findings"]]


def test_b200_eager_is_launch_bound():
    d = _doc("b200_eager_trace.json.gz")
    assert kinds(d)[0] == "launch_overhead" and "CUDA graph" in d["findings"][0]["fix"]
    assert "profiler_overhead" not in kinds(d)              # a note, not a fix
    assert "profiler_overhead" in [n["kind"] for n in d["notes"]]


def test_bert_small_is_launch_bound():
    d = _doc("h100_gaunernst_bert-small-uncased__1016001.json.gz")
    assert kinds(d)[0] == "launch_overhead"
    # The harness's cudaDeviceSynchronize comes before the step launches anything: a CUDA graph of the step
    # captures fine around it. What the graph needs gone first is the model's `if tensor:` (is_nonzero).
    sync = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")
    edge = {s["op"]: s["at_step_edge"] for s in sync["evidence"]["sync_sites"]}
    assert edge == {"cudaDeviceSynchronize": True, "aten::is_nonzero": False}
    first = d["findings"][0]["fix"].split(" (fix that before this one")[0]
    assert first.startswith("First: the syncs inside the step: aten::is_nonzero (in run_on_input()")
    assert "cudaDeviceSynchronize" not in first


def test_gpu_only_trace_says_what_it_cannot_show():
    d = _doc("mi210_gpu_only_trace_gpu_only_trace.json.gz")
    assert "host_bound" not in kinds(d)
    assert any("No CPU op events" in x for x in d["trace"]["limits"])


def test_communication_bound_step_is_not_healthy():
    d = _doc("mi300_resnet_act_checkpoint.json.gz")
    assert not d["healthy"]
    assert kinds(d)[0] == "exposed_communication"
    ev = d["findings"][0]["evidence"]
    assert ev["compute_utilisation_pct"] < 60 and ev["exposed_communication_ms_per_step"] > 5


def test_compiled_triton_trace_is_healthy():
    d = _doc("torch_compile_triton_trace.json.gz")
    assert d["healthy"] and d["findings"] == []
    # The step thread's time outside any op is one hipDeviceSynchronize: the CPU waiting for the GPU, not
    # Python, and the CPU table says so.
    # (Raw trace: a 12.94 ms window, 0.879 ms inside the two top-level ops (the Triton ops nested in the
    # compiled region under an annotation are no extra time), hipDeviceSynchronize 11.871 ms, 0.19 ms else.)
    c = d["cpu_time"]
    assert c["in_ops_ms"] == pytest.approx(0.879, abs=0.002) and c["waiting_for_gpu_ms"] == pytest.approx(11.871, abs=0.002)
    assert c["outside_ops_ms"] - c["waiting_for_gpu_ms"] == pytest.approx(0.19, abs=0.01)
    from traceinsight.render.sections import outside_ops
    assert outside_ops(c).startswith(f"{c['waiting_for_gpu_ms']} ms of it waiting in runtime calls for the GPU")


@pytest.mark.parametrize("name", ["inference_vllm_decode_full_capture_traces_graph_capture_rank_0.json.gz",
                                  "inference_xdit_flux.1_capture_traces_capture_trace_rank_0.json.gz"])
def test_graph_capture_is_not_a_steady_state_step(name):
    d = _doc(name)
    assert "graph capture" in d["verdict"].lower()
    assert "launch_overhead" not in kinds(d)                 # no "use CUDA graphs" to a capture
    assert not any("reduce-overhead" in f["fix"] for f in d["findings"])
    assert "graph_capture" in [n["kind"] for n in d["notes"]]


def test_graph_replay_window_opening_in_a_sync_is_not_idle():
    d = _doc("inference_vllm_decode_full_graph_execution.json.gz")
    assert "launch_overhead" not in kinds(d) and "host_bound" not in kinds(d)
    assert any("before the first recorded GPU activity" in x for x in d["trace"]["limits"])
    assert d["summary"]["gpu_idle_pct"] < 10


def test_kernel_waiting_behind_an_event_is_a_dependency_wait():
    d = _doc("inference_sglang_decode_sglang_Qwen3-8B_decode.json.gz")
    assert kinds(d)[0] == "dependency_wait"
    assert "launch_overhead" not in kinds(d)
    # The CPU blocks 463 ms in hipMemcpyWithStream while the GPU is idle: a copy waiting behind an event,
    # not the driver's start-up (which only calls that wait on nothing can be).
    assert not any(x.startswith("The window includes start-up") for x in d["trace"]["limits"])
