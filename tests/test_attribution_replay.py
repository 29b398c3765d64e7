"""Gap attribution and the what-if replay on hand-built traces whose answer is known."""
from __future__ import annotations

from pathlib import Path

from synth import Trace

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document as to_dict


def _sync_trace() -> Trace:
    """Each 1000 us step: a 600 us kernel, then .item() blocks until it ends, then 300 us of
    framework work before the next kernel: the GPU idles ~400 us per step because of the sync."""
    t = Trace()
    for s in range(5):
        base = s * 1000.0
        t.step(s, base, 1000.0)
        t.op("aten::linear", base + 1, 10)
        t.launch("gemm_kernel", base + 5, base + 20, 600)
        item = t.op("aten::item", base + 20, 605)
        t.op("aten::_local_scalar_dense", base + 21, 603)
        c = t.runtime("cudaMemcpyAsync", base + 22, 600)          # returns when the copy is done
        t.gpu("Memcpy DtoH (Device -> Pageable)", base + 620, 1.0, c, cat="gpu_memcpy", bytes=4)
        del item
        t.op("aten::relu", base + 700, 300)                      # dispatch of the next op ...
        t.launch("relu_kernel", base + 990, base + 995, 4)       # ... whose kernel comes late
    return t


def test_sync_stall_is_found_named_and_replayed(tmp_path: Path):
    d = to_dict(analyze_file(_sync_trace().write(tmp_path / "sync.json")))
    kinds = [f["kind"] for f in d["findings"]]
    assert kinds[0] == "sync_stall", kinds
    f = d["findings"][0]
    assert f["evidence"]["sync_sites"][0]["op"] == "aten::item"
    assert f["evidence"]["sync_sites"][0]["per_step"] == 1.0
    # Idle after the copy returns: from the memcpy end (621) to the relu kernel (995) = 374 us per step.
    assert abs(f["measured_cost_ms_per_step"] - 0.374) < 0.01
    # Without the sync the CPU runs ahead: the step is bounded by the GPU (604 us) or the CPU's own work.
    assert 0.2 < f["estimated_savings_ms"] <= 0.45


def _launch_bound_trace() -> Trace:
    """1000 tiny kernels per step, 2 us each, one every 20 us of CPU dispatch: the GPU idles 90%."""
    t = Trace()
    for s in range(4):
        base = s * 20_000.0
        t.step(s, base, 20_000.0)
        for k in range(1000):
            ts = base + k * 20.0
            t.op("aten::add", ts, 15)
            t.launch("vectorized_elementwise_kernel<add>", ts + 5, ts + 12, 2.0)
    return t


def test_launch_overhead_found_and_cuda_graphs_estimated(tmp_path: Path):
    d = to_dict(analyze_file(_launch_bound_trace().write(tmp_path / "launch.json.gz", gz=True)))
    assert d["findings"][0]["kind"] == "launch_overhead"
    f = d["findings"][0]
    assert f["evidence"]["kernels_per_step"] == 1000
    assert d["summary"]["gpu_idle_pct"] > 85
    # With the launches captured, the step is 1000 x (2 us + 1 us graph gap) ~ 3 ms. The saving is counted
    # from the un-profiled step (the profiler's ~6 us per recorded runtime call taken out), not the 20 ms.
    unprof = d["summary"]["unprofiled_step_ms"]
    assert 12.0 < unprof < d["summary"]["median_step_ms"]
    assert abs((unprof - f["estimated_savings_ms"]) - 3.0) < 1.0
    assert abs(d["whatif"]["replay_error_pct"]) < 2


def _healthy_trace() -> Trace:
    """Big kernels queued back to back; the CPU is far ahead and never waits."""
    t = Trace()
    for s in range(4):
        base = s * 10_000.0
        t.step(s, base, 10_000.0)
        for k in range(10):
            ts = base + k * 50.0
            t.op("aten::mm", ts, 40)
            t.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", ts + 5,
                     5000.0 + base + k * 1000.0 - 5000.0 + 0.5, 999.0)
    return t


def test_healthy_trace_is_called_healthy(tmp_path: Path):
    d = to_dict(analyze_file(_healthy_trace().write(tmp_path / "healthy.json")))
    assert d["healthy"] is True, d["verdict"]
    assert d["findings"] == []
    assert d["verdict"].startswith("Healthy")


def test_host_bound_data_loading(tmp_path: Path):
    """5 ms of DataLoader work per step, then 1 ms of GPU work: host_bound, named after the loader."""
    t = Trace()
    for s in range(4):
        base = s * 6000.0
        t.step(s, base, 6000.0)
        t.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base + 1, 4990,
             cat="user_annotation")
        t.op("aten::mm", base + 5000, 30)
        t.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", base + 5005, base + 5010, 980)
    d = to_dict(analyze_file(t.write(tmp_path / "host.json")))
    f = d["findings"][0]
    assert f["kind"] == "host_bound"
    assert "DataLoader" in f["evidence"]["cpu_work_during_idle"][0]["name"]
    assert "num_workers" in f["fix"]
    assert 4.0 < f["estimated_savings_ms"] < 5.1


def test_fp32_gemm_flagged_only_on_tensor_core_gpus(tmp_path: Path):
    def make(cc):
        t = Trace(cc=cc, gpu_name="GPU")
        for s in range(4):
            base = s * 2000.0
            t.step(s, base, 2000.0)
            t.op("aten::mm", base + 1, 20)
            t.launch("ampere_sgemm_128x64_nn", base + 5, base + 30, 1900)
            t.runtime("cudaDeviceSynchronize", base + 40, 1895)    # the loop waits for the step's work
        return t
    on_a100 = to_dict(analyze_file(make((8, 0)).write(tmp_path / "a100.json")))
    on_v100 = to_dict(analyze_file(make((7, 0)).write(tmp_path / "v100.json")))
    on_p100 = to_dict(analyze_file(make((6, 0)).write(tmp_path / "p100.json")))
    assert on_a100["findings"][0]["kind"] == "fp32_matmul"
    lo, hi = on_a100["findings"][0]["savings_range_ms"]
    assert lo < on_a100["findings"][0]["estimated_savings_ms"] < hi
    assert "allow_tf32" in on_a100["findings"][0]["fix"]
    # Volta's tensor cores take fp16 only: mixed precision, a lower central speed-up, low confidence.
    v = on_v100["findings"][0]
    assert v["kind"] == "fp32_matmul" and v["confidence"] == "low"
    assert "GradScaler" in v["fix"] and "allow_tf32" not in v["fix"]
    assert v["estimated_savings_ms"] < on_a100["findings"][0]["estimated_savings_ms"]
    # Pascal has no tensor cores: nothing to switch to.
    assert "fp32_matmul" not in {f["kind"] for f in on_p100["findings"] + on_p100["minor_findings"]}


def test_fusion_candidates_only_when_gpu_bound(tmp_path: Path):
    """A GPU-bound step in which each GEMM is followed by a chain of four small elementwise kernels:
    fusing a chain saves all but ~1.5 of its kernels. The launch-bound trace, full of elementwise
    kernels too, must not get this finding."""
    t = Trace()
    for s in range(4):
        base = s * 4000.0
        t.step(s, base, 4000.0)
        for k in range(10):
            ts = base + k * 30.0
            t0 = base + 100 + k * 390.0
            t.op("aten::mm", ts, 10)
            t.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", ts + 2, t0, 150.0)
            for j in range(4):
                t.op("aten::add", ts + 10 + 4 * j, 3)
                t.launch("void at::native::vectorized_elementwise_kernel<4, add>", ts + 12 + 4 * j,
                         t0 + 150 + 55 * j, 50.0)
        t.runtime("cudaDeviceSynchronize", base + 300, 3695)   # returns when the last kernel ends
    d = to_dict(analyze_file(t.write(tmp_path / "fusion.json")))
    f = next(x for x in d["findings"] + d["minor_findings"] if x["kind"] == "fusion_candidates")
    ev = f["evidence"]
    assert ev["chains_per_step"] == 10 and ev["mean_chain_length"] == 4
    # A chain of four 50 us kernels fused into ~75 us: 125 us saved per chain, 1.25 ms per step.
    assert abs(f["measured_cost_ms_per_step"] - 1.25) < 0.01
    lo, hi = f["savings_range_ms"]
    assert lo <= f["estimated_savings_ms"] <= hi and 0.5 < f["estimated_savings_ms"] <= 1.5
    launch = to_dict(analyze_file(_launch_bound_trace().write(tmp_path / "launch.json")))
    assert "fusion_candidates" not in {x["kind"] for x in launch["findings"] + launch["minor_findings"]}
