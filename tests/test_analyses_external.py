"""Every trace recorded by others gets a sensible diagnosis, spelled out per trace."""
from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document as to_dict

EXT = Path(__file__).resolve().parent / "data" / "external" / "hta"


def _doc(name: str) -> dict:
    return to_dict(analyze_file(EXT / name))


def _kinds(d: dict, minor: bool = True) -> set[str]:
    ks = {f["kind"] for f in d["findings"]}
    if minor:
        ks |= {f["kind"] for f in d["minor_findings"]}
    return ks


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    return {p.name: _doc(p.name) for p in sorted(EXT.iterdir()) if p.name.endswith((".json", ".json.gz"))}


def test_every_external_trace_is_diagnosed(docs):
    assert len(docs) == 10
    for name, d in docs.items():
        assert d["schema_version"] == 1
        assert d["verdict"], name
        # Findings are sorted by the estimated saving and carry the fields the JSON promises.
        savings = [f["estimated_savings_ms"] for f in d["findings"]]
        assert savings == sorted(savings, reverse=True), name
        for f in d["findings"]:
            assert f["kind"] and f["title"] and f["fix"] and f["confidence"] in ("high", "medium", "low")
            assert f["estimated_savings_pct"] is not None


def test_cpu_only_traces_have_no_gpu_findings(docs):
    for name in ("cpu_only.pt.trace.json.gz", "rank_non_gpu.json.gz"):
        d = docs[name]
        assert d["findings"] == [] and d["minor_findings"] == []
        # (rank_non_gpu ran NCCL and FusedAdam: a GPU job whose GPU side was not recorded, not CPU-only)
        assert d["verdict"].startswith("CPU-only trace" if name == "cpu_only.pt.trace.json.gz" else
                                       "No GPU activity was recorded, though the CPU drove GPU work")
        assert d["healthy"] is False


def test_alexnet_shows_permutes_pageable_copies_and_syncs(docs):
    d = docs["a100_alexnet_memcpy_sync_permute.json.gz"]
    kinds = _kinds(d)
    assert {"layout_permute", "pageable_memcpy", "sync_stall"} <= kinds
    permute = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "layout_permute")
    assert any("nchwToNhwc" in k for k in permute["evidence"]["kernels"])


def test_nccl_rank_shows_permutes_and_its_collectives(docs):
    d = docs["a100_rank0_of2_nccl.json.gz"]
    assert "layout_permute" in _kinds(d)
    assert d["trace"]["world_size"] == 2
    assert any("AllReduce" in k["name"] for k in d["top_kernels"][:3])
    # The GPU is idle most of each step in this trace: it is not healthy.
    assert d["healthy"] is False and d["summary"]["gpu_idle_pct"] > 50


def test_v100_resnet_in_fp32_is_told_to_use_mixed_precision(docs):
    # The GPU is never idle (99% busy), but 62% of its time is FP32 GEMMs and cuDNN's FP32 convolutions
    # (sgemm, scudnn, dgrad_engine<float>) on a GPU whose tensor cores take fp16: mixed precision is the
    # fix, TF32 does not exist.
    d = docs["v100_resnet_ns_timestamps.pt.trace.json.gz"]
    assert d["summary"]["gpu_idle_pct"] < 5
    assert d["healthy"] is False
    top = d["findings"][0]
    assert top["kind"] == "fp32_matmul" and top["confidence"] == "low"
    assert "float16" in top["fix"] and "GradScaler" in top["fix"] and "allow_tf32" not in top["fix"]
    assert "convolutions" in top["title"]
    assert "not calibrated" in top["evidence"]["assumed_speedup"]
    # The saving stays under the FP32 kernels' own time: at most all of it goes.
    fp32_share = top["evidence"]["pct_of_gpu_time"] / 100
    assert 55 < top["evidence"]["pct_of_gpu_time"] < 70      # sgemm, scudnn and dgrad_engine<float>
    assert top["estimated_savings_ms"] < fp32_share * d["summary"]["median_gpu_busy_ms"]


def test_fp32_convolutions_count_only_where_tf32_is_off(docs):
    # HTA's AlexNet on an A100 runs TF32 convolutions (xmma tf32f32) beside one cuDNN picked in FP32
    # (scudnn, 1 ms): TF32 is on, so that one is cuDNN's choice, not a setting to change. Its FP32 sgemm
    # (matmul TF32 is off by default) stays the finding.
    d = docs["a100_alexnet_memcpy_sync_permute.json.gz"]
    f = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "fp32_matmul")
    assert any("sgemm" in k for k in f["evidence"]["kernels"])
    assert not any("scudnn" in k for k in f["evidence"]["kernels"])
    assert f["title"].startswith("Matrix multiplies run")


def test_kernels_too_short_for_tensor_cores_are_no_fp32_finding():
    # A batch-1 conv net (launch_tiny_conv, H200): cuDNN runs its 6 us convolutions as FP32 FFMA kernels
    # under TF32 too, and its Linear is a 2 us gemv. TF32 shortens neither; the graphed version had been
    # told that TF32 would save 20% of its step.
    samples = Path(__file__).resolve().parents[1] / "sample_traces"
    # (The H100's trace: 4 of the convolution's 25 runs took 10.0 us; a kernel counts by its typical run.)
    for name in ("launch_tiny_conv__after.json.gz", "launch_small_mlp__after.json.gz",
                 "matrix/h100/launch_tiny_conv__before__default.json.gz"):
        d = to_dict(analyze_file(samples / name))
        assert "fp32_matmul" not in _kinds(d), name


def test_fp32_kernels_of_a_sliver_of_gpu_time_are_no_finding(docs):
    # 0.1% of the A100 NCCL rank's GPU time had read as an fp32_matmul minor finding that "saves next to
    # nothing", beside advice its TF32 convolutions already follow.
    assert "fp32_matmul" not in _kinds(docs["a100_rank0_of2_nccl.json.gz"])


def test_event_sync_trace_names_the_syncing_op(docs):
    d = docs["a100_cuda_event_sync.json.gz"]
    sync = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")
    assert sync["evidence"]["sync_sites"][0]["op"] == "aten::is_nonzero"


def test_amd_and_triton_launches_are_linked():
    for name in ("amd_mi250_minitoy_train.json.gz", "triton_example.json.gz"):
        a = analyze_file(EXT / name)
        kernels = a.model.gpu[a.model.gpu["kind"] == "kernel"]
        assert len(kernels) > 0
        assert (kernels["launcher"] >= 0).all(), name
        names = set(a.model.cpu.loc[kernels["launcher"], "name"])
        assert names & {"hipLaunchKernel", "hipExtLaunchKernel", "cuLaunchKernel"}, names


def test_a_step_that_runs_past_the_recorded_events_ends_where_they_do(docs):
    # triton_example: ProfilerStep#1 spans 13.3 s, yet every other event ends 1.5 ms into it (the profiler
    # stopped recording while the step's range stayed open). The rest is not idle: it is not in the trace.
    d = docs["triton_example.json.gz"]
    assert d["summary"]["median_step_ms"] < 2.0
    limits = " ".join(d["trace"]["limits"])
    assert "runs 13336.3 ms but the trace's events end 1.53 ms into it" in limits
    assert "No complete step in the window" in limits
    assert all(f["confidence"] == "low" for f in d["findings"])


def test_a_window_of_cuda_start_up_says_so_and_ranks_nothing(docs):
    # a100_alexnet: 43 s of window for 66 ms of GPU work; CUDA context creation (29.9 s in
    # cudaDeviceGetStreamPriorityRange), lazy module loading (one 3.1 s cudaLaunchKernel) and first
    # allocations ran while the GPU sat idle.
    d = docs["a100_alexnet_memcpy_sync_permute.json.gz"]
    start = next(x for x in d["trace"]["limits"] if x.startswith("The window includes start-up"))
    assert "cudaDeviceGetStreamPriorityRange 29.93 s" in start and "cudaLaunchKernel 3.06 s" in start
    # An allocation's implicit sync has nothing to wait for while the GPU idles: cudaFree's counts, summed by
    # name (a review read "cudaFree 6.01 s" as the total: that was its longest call of two).
    assert "cudaFree 6.53 s in 2 calls" in start and "ran 42.12 s while the GPU sat idle" in start
    # Start-up is 42 of the window's 43 s: the verdict says so first, and no fix is ranked for it (its
    # host_bound fix had "saved" 14.5 s a step, a sync fix 6.6 s).
    assert d["verdict"].startswith("GPU start-up, not a steady-state step: This trace records CUDA start-up: "
                                   "42.12 s of the 43.43 s")
    assert not d["findings"] and {"host_bound", "sync_stall"} <= {f["kind"] for f in d["minor_findings"]}
    assert [n["kind"] for n in d["notes"]].count("cuda_startup") == 1
    # The idle while those calls ran is start-up's, not the host work, sync or launches around them; no
    # listed fix saves more than the window's idle without it (each had claimed 8.6-14.5 s of the start-up).
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    assert 42000 < idle["cuda_startup"] < 42130 and idle["host_bound"] < 1000 and idle["sync_stall"] < 1
    steady_idle = sum(idle.values()) - idle["cuda_startup"]
    assert all(f["estimated_savings_ms"] <= steady_idle + 5 for f in d["minor_findings"])
    assert max(f["estimated_savings_ms"] for f in d["minor_findings"]) > 500
    # Our measured fixes are all of steady steps: no likely range, and the report says why.
    assert all(f["likely_savings_range_ms"] is None for f in d["minor_findings"])
    # (what is left of them is under 3% of the 43 s window: below the bar, so no likely range's basis either)
    assert all(f["estimated_savings_pct"] < 5 and not f["likely_basis"] for f in d["minor_findings"])
    # Its blocking copies are the model's weights going to the GPU from pageable memory: pinning's to fix,
    # not a result to keep on the GPU.
    sync = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")
    assert sync["title"].startswith("A blocking copy to the device in aten::to")
    assert "pin the source" in sync["fix"] and ".cpu()" not in sync["fix"]
    assert sync["evidence"]["sync_sites"][0]["copy_direction"] == "to the device"


def test_steady_traces_have_no_start_up_or_cut_steps(docs):
    # A long blocking copy behind another stream's event (the SGLang decode) is a wait, not start-up; none
    # of the steady traces here has either limit.
    for name, d in docs.items():
        # (the MI250's one complete step is its first, with a 6.5 ms first launch: test_review_labels.py)
        if name in ("triton_example.json.gz", "a100_alexnet_memcpy_sync_permute.json.gz",
                    "amd_mi250_minitoy_train.json.gz"):
            continue
        assert not any(x.startswith("The window includes start-up") or "trace's events end" in x
                       for x in d["trace"]["limits"]), name
