"""What session 72 found in its reviews of 2026-12-04, each checked where it was seen."""
from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document
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
    # transformers' GPT-2 with per-tensor AdamW, about 5% idle without the profiler, its fused update 8% of the step.
    (MATRIX / "h200_clean44A" / "holdout40_hf_gpt2_unfused_adamw__before__stack.json.gz",
     "Mostly GPU-bound, a little optimizer-bound: "),
    # The root unfused-Adam sample, about 16% idle without the profiler: optimizer-bound it is.
    (ROOT / "sample_traces" / "unfused_optimizer__before.json.gz", "Optimizer-bound: "),
])
def test_an_idle_cause_names_what_bounds_the_step_only_where_the_idle_does(path, opening):
    assert verdict(analyze_file(path)).startswith(opening)


EXTERNAL = ROOT / "tests" / "data" / "external"


def _dependency_waits(d: dict) -> list[dict]:
    return [f for f in d["findings"] + d["minor_findings"] if f["kind"] == "dependency_wait"]


@pytest.mark.parametrize("path", [
    # Each ended its window in a sync that waited for queued work while the GPU ran it (timm's ViT: 174 ms, 999
    # kernels, after the last ProfilerStep; the GPU busy 99% of it), and the sync had been named beside microsecond
    # gaps between kernels as "blocked behind the same wait".
    MATRIX / "h200_clean44A" / "holdout40_timm_vit_fp32__before__stack.json.gz",
    EXTERNAL / "hta" / "v100_resnet_ns_timestamps.pt.trace.json.gz",
    EXTERNAL / "tracelens" / "mi300_resnet_act_checkpoint.json.gz",
    EXTERNAL / "tracelens" / "mi210_gpu_only_trace_gpu_only_trace.json.gz",
    EXTERNAL / "hta" / "a100_alexnet_memcpy_sync_permute.json.gz",
])
def test_a_wait_names_no_host_call_that_waited_for_queued_gpu_work(path):
    d = document(analyze_file(path))
    found = _dependency_waits(d)
    assert found, "the trace has a dependency_wait finding"
    for f in found:
        assert "Meanwhile the host" not in f["fix"], f["fix"]
        assert not any(w.get("host_blocked_in") for w in f["evidence"]["largest_waits"])


def test_a_wait_still_names_the_host_call_behind_it_while_the_gpu_sat_idle():
    """SGLang's decode: the step thread sat 463 ms in hipMemcpyWithStream while the GPU ran nothing."""
    f, = _dependency_waits(document(analyze_file(EXTERNAL / "tracelens" /
                                                 "inference_sglang_decode_sglang_Qwen3-8B_decode.json.gz")))
    assert "Meanwhile the host sat 463." in f["fix"] and "hipMemcpyWithStream" in f["fix"]


RESNET = MATRIX / "h200_clean44A" / "holdout40_timm_resnet50_bf16_healthy__before__stack.json.gz"


def test_the_busy_share_is_one_figure_of_the_same_steps_everywhere():
    """timm's ResNet-50 (healthy): "busy 72% of each step" was step 6's idle over step 3's length; the steps' own
    busy shares are 74, 72, 51, 66 and 47%. Verdict, JSON, Markdown and HTML now give their median, 66%."""
    from traceinsight.render.html import render as html
    from traceinsight.render.markdown import render as markdown
    from traceinsight.report.document import build_report

    a = analyze_file(RESNET)
    r = build_report(a)
    d = r.doc
    full = [s for s in d["steps"] if not s["partial"]]
    shares = sorted(s["gpu_idle_ms"] / s["duration_ms"] for s in full)
    assert [round(100 * (1 - x)) for x in sorted(shares, reverse=True)] == [47, 51, 66, 72, 74]
    assert d["summary"]["gpu_idle_pct"] == pytest.approx(100 * shares[len(shares) // 2], abs=0.06)
    assert d["summary"]["gpu_idle_pct"] == 33.8
    assert d["verdict"].startswith("Healthy: the GPU is busy 66% of each step (median of the steps' shares; "
                                   "median step 52.16 ms"), d["verdict"]
    assert "GPU idle 33.8% of each step (median of the steps' shares)" in markdown([r])
    assert "idle 33.8% of each step (median of the steps' shares)" in html([r])


def test_the_prewindow_note_says_whether_its_step_moves_the_medians():
    """ResNet-50's median step is step 3 itself, which holds 10.6 ms of GPU work queued before the window: the note
    had said "one step does not move the medians" (49.0 ms without it). fp32_matmul's first step, 91 ms beside
    30 ms ones, truly does not."""
    lim = [x for x in document(analyze_file(RESNET))["trace"]["limits"] if "no launch call" in x]
    assert len(lim) == 1 and "run into step 3" in lim[0], lim
    assert "does not move the medians" not in lim[0]
    assert "without it the median step is 49.0 ms, not 52.2 ms, and the GPU idle 42% of each step, not 34%" in lim[0]
    lim = [x for x in document(analyze_file(ROOT / "sample_traces" / "fp32_matmul__before.json.gz"))["trace"]["limits"]
           if "no launch call" in x]
    assert len(lim) == 1 and lim[0].endswith("one step does not move the medians."), lim


def test_one_long_last_step_is_no_rising_trend():
    """GPT-2 with a per-tensor AdamW: steps of 59.9, 61.8, 65.0, 63.6 and 75.9 ms (the last one's optimizer step
    took 27 ms of CPU against 15-20 ms), GPU work flat, the un-profiled run steady: no "not a steady state". A loop
    whose prefetched batches run out (13.0, 17.7, 17.5, 18.0, 19.0 ms) still rises."""
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    from traceinsight.trace.facts import rising_steps

    gpt2 = build_model(load_trace(MATRIX / "h200_clean44A" / "holdout40_hf_gpt2_unfused_adamw__before__stack.json.gz"))
    assert rising_steps(gpt2) is None
    loader = build_model(load_trace(MATRIX / "h200_holdout10" / "holdout10_loader_one_worker__before__default.json.gz"))
    assert rising_steps(loader) == "13.0 -> 19.0 ms over 5 steps"
    d = document(analyze_file(MATRIX / "h200_clean44A" / "holdout40_hf_gpt2_unfused_adamw__before__stack.json.gz"))
    assert not any("steady state" in x for x in d["trace"]["limits"]), d["trace"]["limits"]


def test_a_pageable_copy_names_the_op_and_the_users_function_that_make_it():
    # The forty-first set's ResNet-18, fed 147 MiB fp32 batches from ordinary host memory: the report said how much
    # and how fast, not where. With Python stacks it names the op and the step() that calls .to().
    d = document(analyze_file(MATRIX / "h200_clean46A" / "holdout41_timm_resnet18_pageable_batches__before__stack.json.gz"))
    f = next(f for f in d["findings"] if f["kind"] == "pageable_memcpy")
    site = f["evidence"]["copy_sites"][0]
    assert site["op"] == "aten::to" and "step()" in site["source"] and site["mb_per_step"] > 140
    assert "in aten::to (Tensor.to() in step()" in f["title"]
    # Without stacks the op alone.
    d = document(analyze_file(MATRIX / "h200_clean46A" / "holdout41_timm_resnet18_pageable_batches__before__default.json.gz"))
    f = next(f for f in d["findings"] if f["kind"] == "pageable_memcpy")
    assert f["evidence"]["copy_sites"][0]["op"] == "aten::to" and not f["evidence"]["copy_sites"][0]["source"]


def test_one_complete_step_ranks_every_fix_with_low_confidence():
    # HTA's a100_cuda_event_sync: one ProfilerStep, 2.9 ms of it inside one aten::empty. host_bound read 17x at
    # "medium"; nothing in one step shows that the stall repeats.
    d = document(analyze_file(EXTERNAL / "hta" / "a100_cuda_event_sync.json.gz"))
    assert d["findings"] and all(f["confidence"] == "low" for f in d["findings"])
    assert d["findings"][0]["kind"] == "host_bound"
    # Five steps keep their confidence: the root sample's launch-bound step stays high.
    d = document(analyze_file(ROOT / "sample_traces" / "launch_small_mlp__before.json.gz"))
    assert d["findings"][0]["kind"] == "launch_overhead" and d["findings"][0]["confidence"] == "high"


def test_a_saving_above_the_unprofiled_idle_says_what_gpu_work_the_fix_takes_away():
    # The root sample's per-tensor Adam: 1.99 ms saved, 17% of the un-profiled step, beside "about 16% idle". The
    # fused update also replaces 910 kernels; the estimate says how much GPU work that takes away.
    import re
    a = analyze_file(ROOT / "sample_traces" / "unfused_optimizer__before.json.gz")
    f = next(f for f in a.findings if f.kind == "unfused_optimizer")
    m = re.search(r"more than the un-profiled step's GPU idle \(([\d.]+) ms\): the fix also takes about ([\d.]+) ms "
                  r"of GPU work away", f.estimate_note)
    assert m, f.estimate_note
    idle, gone = float(m[1]), float(m[2])
    assert idle * 1000 < f.estimated_savings_us <= (idle + gone) * 1000 + 1.0
    # The verdict, whose label reads as idle, says so too.
    assert "more than the GPU's idle, as the fix also takes GPU work away (see its estimate)" in verdict(a)
    # A fix of idle time alone says nothing of the kind: the launch fix of the launch-bound sample.
    a = analyze_file(ROOT / "sample_traces" / "launch_small_mlp__before.json.gz")
    assert not any("GPU work away" in f.estimate_note for f in a.findings)


def test_a_window_that_loads_kernels_lazily_is_hedged_and_ranked_with_at_most_medium_confidence():
    # A B200 vLLM prefill with 8 lazy kernel loads, no step markers: its launch fix had read "high" at 2.3x.
    d = document(analyze_file(EXTERNAL / "tracelens" / "b200_eager_trace.json.gz"))
    assert d["verdict"].startswith("The window is not warm: CUDA loaded 8 kernels lazily in it, and ")
    assert "As recorded: Launch-bound" in d["verdict"]
    # ... and says how much idle it left out of the savings as start-up: the summary's own figure.
    held = d["summary"]["idle_by_cause_ms_median_per_step"]["cuda_startup"]
    # (no step markers: the whole trace is the one window, and the verdict says so: "in the window")
    assert held > 5 and f"{held:.2f} ms of idle in the window (profiled) around those first launches" in d["verdict"]
    assert d["findings"][0]["kind"] == "launch_overhead"
    assert all(f["confidence"] != "high" for f in d["findings"])
    # One complete step: said first in the verdict.
    assert verdict(analyze_file(EXTERNAL / "hta" / "a100_cuda_event_sync.json.gz")).startswith(
        "Too few steps to judge: the window holds one complete step (see the limits). As recorded: Host-bound")
    # A program that recompiles loads new kernels with each graph: that is its finding, not a cold window.
    a = analyze_file(ROOT / "sample_traces" / "compile" / "h200_compileA" / "static__default.json.gz")
    assert a.findings[0].kind == "recompile" and a.findings[0].confidence == "high"
    assert not verdict(a).startswith("The window is not warm")


def test_host_bound_names_the_work_that_repeats_and_the_one_off_stall_apart():
    # transformers' BERT tagger (with_stack): 22 of its 36.9 ms of host-bound idle were one 20 ms pause inside
    # dropout in step 3, and the finding named BertModel's forward; the idle of every step (the median the estimate
    # reads) is in AdamW's step (its _init_group), 1.4-2.3 ms a step.
    d = document(analyze_file(MATRIX / "h200_clean44A" / "holdout40_hf_bert_token_mask_loss__before__stack.json.gz"))
    f = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "host_bound")
    assert "most of it inside step(), def at torch/optim/adam.py" in f["title"]
    assert "besides, a 20.0 ms stall in step 3 inside nn.Module: BertModel_0 in forward()" in f["title"]
    assert f["title"].endswith(", which no other step repeats)")
    assert f["evidence"]["cpu_work_during_idle"][0]["name"].startswith("step(), def at torch/optim/adam.py")
    # DataLoader workers taking turns (the loop waits every few steps) are the pace, named as before.
    d = document(analyze_file(ROOT / "sample_traces" / "host_preprocess__after.json.gz"))
    f = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "host_bound")
    assert "stall_not_named" not in f["evidence"] and "DataLoader" in f["title"]


def test_a_step_thread_that_records_nothing_in_the_step_is_untraced_not_python():
    # HTA's CPU-only gloo rank: its step thread records no event in the 210 ms ProfilerStep, while two gloo threads
    # run the all_reduce for 170-179 ms of it. It had read "100% outside any op (Python and other host code)".
    from traceinsight.render.sections import outside_ops
    d = document(analyze_file(EXTERNAL / "hta" / "cpu_only.pt.trace.json.gz"))
    c = d["cpu_time"]
    assert c["untraced_ms"] == c["outside_ops_ms"] == c["step_ms"] and c["collectives_on_other_threads"]
    assert outside_ops(c).startswith("all of it untraced: the thread records no event in the step")
    # A thread that records its ops keeps the split: the root launch-bound sample has no untraced time to speak of.
    c = document(analyze_file(ROOT / "sample_traces" / "launch_small_mlp__before.json.gz"))["cpu_time"]
    assert c["untraced_ms"] < 0.1 * c["step_ms"] and "Python and other host code" in outside_ops(c)


def test_the_timeline_shows_a_step_thread_that_records_nothing_else():
    # The same gloo rank's timeline showed only the two gloo threads: the loop's thread, which holds the step,
    # was missing from the view. It is now the first row, holding the step range.
    from traceinsight.report.timeline import timeline_data
    rows = timeline_data(analyze_file(EXTERNAL / "hta" / "cpu_only.pt.trace.json.gz"))["rows"]
    assert rows[0]["id"] == "cpu:1074/1074:step" and "no other event recorded" in rows[0]["label"]
    assert [r["id"] for r in rows[1:]] == ["cpu:1074/3553:annotations", "cpu:1074/3554:annotations"]
    # A step thread that records its ops has no such row.
    rows = timeline_data(analyze_file(ROOT / "sample_traces" / "launch_small_mlp__before.json.gz"))["rows"]
    assert not any(r["id"].endswith(":step") for r in rows) and rows[0]["group"] == "cpu"
