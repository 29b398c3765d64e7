"""What a second expert review (2026-12-02: two subagents with EXPERT_REVIEW.md, ten traces of HTA and TraceLens,
every figure recomputed from the raw events) found wrong, each checked on the trace it was found on."""
from __future__ import annotations

from conftest import doc_of as _doc
from conftest import findings_of as _all

HTA = "tests/data/external/hta/"
LENS = "tests/data/external/tracelens/"
VLLM_CAPTURE = LENS + "inference_vllm_decode_full_capture_traces_graph_capture_rank_0.json.gz"
XDIT = LENS + "inference_xdit_flux.1_capture_traces_capture_trace_rank_0.json.gz"
SGLANG = LENS + "inference_sglang_decode_sglang_Qwen3-8B_decode.json.gz"
ALEXNET = HTA + "a100_alexnet_memcpy_sync_permute.json.gz"


def _kind(d: dict, kind: str) -> dict | None:
    return next((f for f in _all(d) + d["notes"] if f["kind"] == kind), None)


def test_idle_while_a_graph_is_recorded_is_the_captures_not_launch_overhead():
    # vLLM's capture window: capture_32_FULL runs 58.4 ms in which 421 launches ran nothing; 54.5 of its 59.1 ms
    # of idle had read as launch overhead beside the note that the window is a capture.
    d = _doc(VLLM_CAPTURE)
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    assert idle["graph_capture"] > 55.0
    assert idle.get("launch_overhead", 0.0) < 1.0
    assert _kind(d, "graph_capture")["evidence"]["idle_ms_per_step_while_capturing"] > 55.0
    # xDiT: CUDAGraphNode.record spans 243 ms of its 422 ms window.
    idle = _doc(XDIT)["summary"]["idle_by_cause_ms_median_per_step"]
    # (the graph tree's recording frame, CUDAGraphNode's set-up included, since 2026-12-02: 243 -> 283 ms)
    assert 200.0 < idle["graph_capture"] < 300.0 and idle["launch_overhead"] < 100.0


def test_no_fix_in_a_capture_window_claims_more_than_its_own_idle():
    # xDiT's host fix had claimed 88.8 ms against its 31.2 ms of idle (the warm-CPU bonus on graph recording), its
    # sync fix 20.8 against 6.8; vLLM's sync fix 0.80 ms against 0.018.
    for path in (XDIT, VLLM_CAPTURE):
        for f in _all(_doc(path)):
            removed = f["evidence"].get("data_dependent_kernels_ms_per_step", 0.0)
            assert f["estimated_savings_ms"] <= f["measured_cost_ms_per_step"] + removed + 0.1, (path, f["kind"])
    host = _kind(_doc(XDIT), "host_bound")
    assert "0.65 of its time" not in host["estimate_method"]


def test_the_replay_in_a_capture_window_is_measured_and_said():
    # The one steady-state figure xDiT's trace holds: its single graph replay, 993 kernels, 35.5 ms at ~100% busy.
    ev = _kind(_doc(XDIT), "graph_capture")["evidence"]
    assert 35.0 < ev["replay_gpu_busy_ms"] <= ev["replay_span_ms"] < 36.0
    assert "replays a graph once: 993 kernels, 35.50 ms of GPU work" in _doc(XDIT)["verdict"]


def test_a_wait_on_what_the_trace_lacks_is_a_bound_with_low_confidence():
    # SGLang's decode: a kernel launched at +43 us starts at +463 ms behind an event; no GPU work runs in between.
    # It had been "medium" confidence with the generic event advice, and the verdict did not say why it is a bound.
    d = _doc(SGLANG)
    f = _kind(d, "dependency_wait")
    assert f["confidence"] == "low"
    assert f["evidence"]["waits_on_what_the_trace_lacks_ms_per_step"] > 460.0
    assert "does not show" in f["title"] and "cannot show what that was" in f["fix"]
    assert "the GPU waited on something the trace does not show" in d["verdict"]
    assert "the GPU's own work is 9.77 ms in the window" in d["verdict"]     # (no step markers: the window's)


def test_a_wait_with_no_gpu_work_before_it_is_not_called_the_gpus_spacing():
    # HTA's backward_thread excerpt: one kernel, 64 ms after its launch, with no GPU work before it in the file; it
    # had been told "queued kernels start a few microseconds after their predecessor".
    f = _kind(_doc(HTA + "backward_thread.json"), "dependency_wait")
    assert "a few microseconds" not in f["fix"] and "cannot show what that was" in f["fix"]


def test_start_up_window_fixes_claim_no_more_than_their_own_cost():
    # a100_alexnet: the launch, sync and host fixes had each claimed the whole 1,244 ms of idle outside start-up
    # (the launch finding beside "under 1% idle"); its 6.5 s first cudaFree had been read as the allocator's
    # hand-back, with four 1.9 s start-up cudaMallocs counted as refills every step.
    d = _doc(ALEXNET)
    for f in _all(d):
        if f["kind"] in ("launch_overhead", "sync_stall", "host_bound"):
            assert f["estimated_savings_ms"] <= f["measured_cost_ms_per_step"] + 1.0, f["kind"]
    sync = _kind(d, "sync_stall")
    assert sync["evidence"]["allocator_refill_ms_per_step"] < 200.0
    # The cuDNN convolution sm80_xmma_fprop_implicit_gemm_indexed is no data-dependent (index) kernel.
    assert not any("indexed" in k for k in sync["evidence"].get("data_dependent_kernels_per_step", {}))


def test_host_work_is_named_outside_the_start_up_calls_in_it():
    # a100_alexnet: 29.9 s of context creation inside aten::empty_strided is cuda_startup's; the host-bound time is
    # aten::uniform_'s CPU weight initialisation (487 ms), which had been named aten::empty_strided.
    host = _kind(_doc(ALEXNET), "host_bound")
    assert "aten::uniform_" in host["title"] and "empty_strided" not in host["title"]


def test_allocation_advice_says_when_no_driver_call_is_recorded():
    # a100_cuda_event_sync: 2.2 ms inside aten::empty with no runtime call under it: the advice had asserted a
    # cudaMalloc the trace does not hold.
    host = _kind(_doc(HTA + "a100_cuda_event_sync.json.gz"), "host_bound")
    assert "inside aten::empty" in host["fix"] and "no driver call (cudaMalloc, cudaFree) is recorded" in host["fix"]


def test_a_sync_inside_a_library_names_the_library_function_too():
    # BERT's is_nonzero comes from transformers' _prepare_4d_attention_mask_for_sdpa; it had been placed only in
    # the harness's run_on_input(), which calls the model.
    sync = _kind(_doc(LENS + "h100_gaunernst_bert-small-uncased__1016001.json.gz"), "sync_stall")
    site = next(s for s in sync["evidence"]["sync_sites"] if s["op"] == "aten::is_nonzero")
    assert "in run_on_input()" in site["source"]
    assert "inside _prepare_4d_attention_mask_for_sdpa(), def at transformers/modeling_attn_mask_utils.py:429" \
        in site["source"]


def test_the_driver_allocating_inside_a_launching_op_is_host_work_not_launch_overhead():
    # a100_alexnet's measured forward: the CPU sat 8.6, 8.3 and 11.6 ms in cudaMalloc inside conv2d and max_pool2d
    # (cuDNN's workspace) while the GPU idled; those gaps had read as launch overhead (CUDA-graph advice), though a
    # cudaMalloc under aten::empty_strided read as host work.
    from traceinsight.analyses.attribution import attribute_gaps
    from traceinsight.trace.host import HostActivity
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    m = build_model(load_trace(ALEXNET))
    gaps = attribute_gaps(m, HostActivity(m))
    cpu = m.cpu
    top = cpu["top_op"].to_numpy()
    mallocs = cpu[(cpu["name"] == "cudaMalloc").to_numpy() & (cpu["dur"] >= 5000).to_numpy()
                  & (cpu["dur"] < 100_000).to_numpy()]
    under_ops = [r for r in mallocs.itertuples()
                 if r.parent >= 0 and cpu["name"].iat[int(top[r.parent])] in ("aten::conv2d", "aten::max_pool2d")]
    checked = 0
    for r in under_ops:
        g = gaps[(gaps["start"] < r.end).to_numpy() & (gaps["end"] > r.ts).to_numpy() & (gaps["dur"] > 5000).to_numpy()]
        for x in g.itertuples():
            if x.cuda_startup == 0:
                assert x.host_bound > 0.9 * min(x.dur, r.dur) and x.launch_overhead < 0.05 * x.dur
                checked += 1
    assert checked >= 3
