"""What the expert reviews of 2026-12-02 found wrong (EXPERT_REVIEW.md, every figure recomputed from the raw
events), each checked on the trace where it was seen."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import build_report

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = ROOT / "tests" / "data" / "external"
SAMPLES = ROOT / "sample_traces"


@lru_cache(maxsize=None)
def _doc(path: Path) -> dict:
    if not path.exists():
        pytest.skip(f"{path.name} not found")
    return build_report(analyze_file(path)).doc


def _note(d: dict, kind: str) -> dict:
    return next(f for f in d["notes"] if f["kind"] == kind)


def test_record_shapes_is_not_blamed_where_no_op_was_recorded():
    # MI210's GPU-only trace says record_shapes=1 but holds no op: its 0.64 ms of profiler cost is the runtime
    # calls', so "record with record_shapes=False" would change nothing.
    note = _note(_doc(EXTERNAL / "tracelens" / "mi210_gpu_only_trace_gpu_only_trace.json.gz"), "profiler_overhead")
    assert "runtime calls only" in note["evidence"]["options_seen"]
    assert "record_shapes=False" not in note["fix"]
    # Where ops were recorded with shapes, the advice stays.
    note = _note(_doc(SAMPLES / "launch_tiny_conv__before.json.gz"), "profiler_overhead")
    assert "record_shapes=False" in note["fix"]


def _find(d: dict, kind: str) -> dict:
    return next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == kind)


def test_collectives_that_ran_while_compute_waited_for_the_cpu_are_not_recoverable_overlap():
    # HTA's a100 DDP rank: its 5 all-reduces run on stream 40 during the backward, while the compute stream waits
    # for a launch-bound CPU; the last ends ~15 ms before the optimizer starts. 10.43 ms per step "overlap no
    # compute", but compute was waiting for them only about 1 ms: overlap gives back that much, not 10.43.
    d = _doc(EXTERNAL / "hta" / "a100_rank0_of2_nccl.json.gz")
    f = _find(d, "exposed_communication")
    ev = f["evidence"]
    assert ev["exposed_communication_ms_per_step"] > 10
    assert ev["exposed_while_compute_waited_on_it_ms_per_step"] < 0.2 * ev["exposed_communication_ms_per_step"]
    assert f["estimated_savings_ms"] <= ev["exposed_while_compute_waited_on_it_ms_per_step"] + 1e-3
    assert f["confidence"] == "low" and "waited for the CPU" in f["fix"]
    assert d["findings"][0]["kind"] != "exposed_communication"
    # A DDP program is told about DDP's buckets, not FSDP's prefetch.
    assert "FSDP" not in f["fix"] + _find(d, "collective_wait")["fix"]


def test_communication_compute_waits_for_stays_exposed():
    # TraceLens' MI300 ResNet (DDP): compute kernels wait behind the all-reduces, which run 11.9 ms per step with
    # no compute beside them: all of it counts, and the verdict stays communication-bound.
    d = _doc(EXTERNAL / "tracelens" / "mi300_resnet_act_checkpoint.json.gz")
    f = _find(d, "exposed_communication")
    ev = f["evidence"]
    assert ev["exposed_while_compute_waited_on_it_ms_per_step"] == ev["exposed_communication_ms_per_step"]
    assert d["findings"][0]["kind"] == "exposed_communication" and f["confidence"] == "medium"
    assert "DDP buckets" in f["fix"] and "FSDP" not in f["fix"]


def test_an_ops_work_before_a_lazily_loaded_first_launch_is_start_up_not_launch_overhead():
    # The B200 eager trace: four aten::addmm / aten::mm (and a FlashInfer call) sat 1.1-2.5 ms each before a
    # launch CUDA loaded lazily, where its steady launches take 6 us. That idle is paid once per process: start-up,
    # out of launch_overhead and out of what any fix can save.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.trace.coverage import first_load_spans
    a = analyze_file(EXTERNAL / "tracelens" / "b200_eager_trace.json.gz")
    fa, fb = first_load_spans(a.model)
    long_ = (fb - fa)[(fb - fa) > 1000]
    assert len(long_) == 5 and 1000 < long_.min() and long_.max() < 2700, fb - fa
    d = build_report(a).doc
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    assert 7.0 <= idle["cuda_startup"] <= 10.0, idle
    u = d["summary"]["unprofiled_step_ms"]
    launch = _find(d, "launch_overhead")
    # No fix of idle gives back more than the un-profiled step's idle outside start-up.
    assert launch["estimated_savings_ms"] <= u - d["whatif"]["gpu_busy_ms"] - idle["cuda_startup"] + 0.01
    lim = next(x for x in d["trace"]["limits"] if x.startswith("The window is not warm"))
    assert "counted as start-up (cuda_startup)" in lim
    # A warm trace has no such spans.
    warm = analyze_file(SAMPLES / "sync_mask_loss__before.json.gz")
    assert not len(first_load_spans(warm.model)[0])


def test_a_gpu_side_finding_ranked_only_after_a_fix_is_not_called_new():
    # unfused_optimizer's fix leaves the model's forward and backward chains as they were; they rank as
    # fusion_candidates only once the step is GPU-bound. The diff had said "New or larger after the change".
    from traceinsight.report.diff import compare
    from traceinsight.report.diff_inputs import load_side
    d = compare(load_side(SAMPLES / "unfused_optimizer__before.json.gz"),
                load_side(SAMPLES / "unfused_optimizer__after.json.gz"))
    notes = " ".join(d["notes"])
    assert "Ranked after the change, not before: fusion_candidates" in notes
    assert "New or larger after the change: fusion_candidates" not in notes


def test_a_gpu_job_whose_gpu_went_unrecorded_is_not_called_cpu_only(tmp_path):
    # HTA's rank_non_gpu: nccl:all_to_all and FusedAdam, no kernel recorded. The HTML had said "CPU-only run"
    # beside the limit "this is not a CPU-only program", and its step table had shown the whole step as GPU idle.
    from traceinsight.render import write_outputs
    rep = build_report(analyze_file(EXTERNAL / "hta" / "rank_non_gpu.json.gz"))
    d = rep.doc
    assert d["trace"]["gpu_work_unrecorded"]
    assert all(s["gpu_idle_ms"] is None for s in d["steps"])
    out = tmp_path / "r.html"
    write_outputs([rep], html=out)
    html = out.read_text()
    assert "GPU side not recorded." in html and "CPU-only run." not in html


def test_no_dependency_wait_finding_where_nothing_waited():
    # TraceLens' torch.compile trace (97% busy): a dependency_wait finding whose table read "waited 0.000 ms".
    d = _doc(EXTERNAL / "tracelens" / "torch_compile_triton_trace.json.gz")
    assert "dependency_wait" not in [f["kind"] for f in d["findings"] + d["minor_findings"] + d["notes"]]
    assert d["healthy"]


def test_the_wait_for_an_unrecorded_backward_thread_is_not_called_python():
    # HTA's rank_non_gpu records one thread: 34 ms of its 47 ms "outside any op" sit inside '## backward ##',
    # where the loop waits for autograd's (unrecorded) thread. They had been called Python and host code.
    from traceinsight.render import sections
    c = _doc(EXTERNAL / "hta" / "rank_non_gpu.json.gz")["cpu_time"]
    assert 32.0 <= c["waiting_for_backward_ms"] <= 34.2 and not c["backward_thread_recorded"]
    assert "which the trace does not hold" in sections.outside_ops(c)
    # A GPU trace with autograd's thread recorded keeps its reading.
    c = _doc(SAMPLES / "sync_mask_loss__before.json.gz")["cpu_time"]
    assert c["backward_thread_recorded"]


def test_cpu_side_fixes_on_a_slow_host_are_not_high_confidence():
    # HTA's a100 DDP rank runs aten::view at ~27 us (a stated limit: check the host first); its launch fix had been
    # "high" at 3.9x. The figures say more about the machine than the program.
    d = _doc(EXTERNAL / "hta" / "a100_rank0_of2_nccl.json.gz")
    assert any(x.startswith("The host runs PyTorch's ops slowly") for x in d["trace"]["limits"])
    assert d["findings"][0]["kind"] == "launch_overhead"
    assert all(f["confidence"] != "high" for f in d["findings"] + d["minor_findings"])
    # A normal host keeps its confidence.
    assert _doc(SAMPLES / "launch_tiny_conv__before.json.gz")["findings"][0]["confidence"] == "high"
