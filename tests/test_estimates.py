"""Issue 12: estimates against measured fixes, on the committed H100/H200 matrix (sample_traces/matrix:
20 workload pairs, default and with_stack+record_shapes profiling, un-profiled medians over >= 50 steps;
two more runs per GPU measured the launch fix, a CUDA graph of the step, beside nine workloads' own fixes).

The bars are what the tool reaches today (the README's table), kept as regression guards; the issue's own
targets (90% within 25%) are not reached yet and are not claimed here.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sample_traces"))


@pytest.fixture(scope="module")
def all_rows():
    """The matrix's rows: as `validate_matrix.py --write` stored them where nothing they depend on changed since
    (validate_matrix.fingerprint), else computed here (~40 minutes on two cores)."""
    import validate_matrix
    return validate_matrix.stored_rows() or validate_matrix.rows(jobs=2)


def test_two_workloads_rows_computed_now_are_the_rows_read(all_rows):
    """Whichever way all_rows came, two workloads' rows computed afresh equal them, key by key: the stored table is
    the tool's output today. The two change with the fingerprint (among the workloads of at most 8 runs and
    settings: a minute or two)."""
    import validate_matrix
    traces: dict = {}
    for r in all_rows:
        traces.setdefault(r["workload"], set()).add((r["run"], r["setting"]))
    small = sorted(w for w, t in traces.items() if len(t) <= 8)
    seed, n = int(validate_matrix.fingerprint(), 16), len(small)
    first = seed % n
    chosen = {small[first], small[(first + 1 + (seed // n) % (n - 1)) % n]}   # two distinct ones
    fresh = json.loads(json.dumps(validate_matrix.rows(jobs=1, only=chosen)))
    read = [r for r in all_rows if r["workload"] in chosen]
    assert len(fresh) == len(read) >= 2, (chosen, len(fresh), len(read))
    key = lambda r: (r["run"], r["setting"], r["workload"], r["variant"])  # noqa: E731
    assert sorted(fresh, key=key) == sorted(json.loads(json.dumps(read)), key=key), chosen


def test_the_fingerprint_reads_the_tool_and_every_trace_the_rows_read():
    import validate_matrix
    files = set(validate_matrix.fingerprint_files())
    assert {p.resolve() for p in (ROOT / "traceinsight").rglob("*.py")} <= files
    assert (ROOT / "traceinsight" / "estimate" / "likely.json").resolve() in files
    for run in validate_matrix.RUNS:
        man = validate_matrix.MATRIX / run / "manifest.json"
        if man.exists():
            assert man in files
            for e in json.loads(man.read_text())["entries"]:
                assert all(man.parent / f in files for f in e["traces"].values()), (run, e["workload"])


@pytest.fixture(scope="module")
def rows(all_rows):
    """The runs the model's claims below were made on: every run before the clean ones. Their un-profiled
    timings after each process's first profiled variant ran with CUPTI attached (biased slow where
    launch-bound); the figures here guard the mechanisms, the clean runs (clean_rows) the accuracy."""
    return [r for r in all_rows if "_clean" not in r["run"]]


@pytest.fixture(scope="module")
def clean_rows(all_rows):
    """The whole matrix recorded with CUPTI torn down after each profiler session (TEARDOWN_CUPTI=1)."""
    return [r for r in all_rows if "_clean" in r["run"]]


def pairs(rows):
    return [r for r in rows if r["kind"] != "healthy"]


def slow_staging(r) -> bool:
    """A run on the hosts that staged pageable copies about 10x slower than the earlier ones (2026-11-27:
    *_clean10A-C and *_clean12A; holdout15's 33.5 MB copy took 24-38 ms a step there, 2.4-3.3 ms before)."""
    return "_clean10" in r["run"] or "_clean12" in r["run"]


def test_every_measured_fix_gets_an_estimate(rows):
    assert len(pairs(rows)) >= 200
    assert all(r["pred_speedup"] is not None for r in pairs(rows))


def test_predicted_speedups_near_the_measured_ones(rows):
    errs = [abs(r["err_pct"]) for r in pairs(rows)]
    # 245 of 264: the held-out rows a one-pass fusion point cannot reach without stacks (a chain repeated
    # by several calls, +85..+132%) are counted, not left out.
    # (0.89 since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold: these runs' truth carries CUPTI, slow where launch-bound; the clean runs gained.)
    assert sum(e <= 50 for e in errs) >= 0.88 * len(errs)
    # 143 of 204 (the graph replay's costs measured, not fitted to these speed-ups: fitting them scored
    # more rows only by absorbing errors of the un-profiled step).
    assert sum(e <= 25 for e in errs) >= 0.68 * len(errs)


def _rows_of(rows, workload, variant):
    """The pair rows of one workload's fix in the runs the model's claims were made on; the re-recording
    on new hosts (*_rerun) is judged as a whole (test_new_hosts_...)."""
    return [r for r in pairs(rows) if r["workload"] == workload and r["variant"] == variant
            and "_rerun" not in r["run"]]


def test_reduce_overhead_keeps_the_compiled_wrapper(rows):
    # torch.compile default -> reduce-overhead, three programs (an MLP, a transformer encoder, a compiled
    # training step with an eager loss and optimizer), both GPUs, both settings. A bare graph replay of
    # the whole step predicted 4.6-9.8x where 2.7-3.7x was measured.
    got = [r for w in ("compile_default_vs_ro", "holdout_compile_infer", "holdout_compile_train")
           for r in _rows_of(rows, w, "after")]
    assert len(got) == 12
    assert sum(abs(r["err_pct"]) <= 50 for r in got) >= 10, [r["err_pct"] for r in got]
    # (The compiled training step's H100 with_stack row is the worst, +86%: since the host factor its
    # un-profiled step is right, +5% where it was +66%, so the over-saved compiled-region Python shows.)
    assert max(r["err_pct"] for r in got) <= 90, [r["err_pct"] for r in got]
    # The training step keeps its eager loss, backward glue and optimizer: not a whole-step graph.
    train = [r for r in _rows_of(rows, "holdout_compile_train", "after") if r["setting"] == "default"]
    assert all(abs(r["err_pct"]) <= 25 for r in train), [r["err_pct"] for r in train]
    # Each is a range: how much the profiler slowed the compiled step's Python is not in the trace; except
    # where both ends reach the step's idle (that with_stack row: physics caps them to one figure).
    assert sum(bool(r["pred_range"] and r["pred_range"][0] < r["pred_range"][1]) for r in got) >= len(got) - 1


def test_compiled_steps_pay_for_inductors_profiler_ranges(rows):
    # Inductor wraps each Triton launch in a profiler range only while profiling: without that cost the
    # un-profiled step of the compiled transformer and training step came out 16-44% long.
    got = [r for w in ("holdout_compile_infer", "holdout_compile_train")
           for r in _rows_of(rows, w, "after") if r["setting"] == "default"]
    # (Within 10% until the profiler costs were refitted on the clean runs, 2026-11-26: the per-op cost rose
    # 1.4 -> 2.1-2.6 us and charges Inductor's ranges with it, so these compiled steps now come out 2-17%
    # short, and on the clean runs 12-22% short.)
    assert len(got) == 4 and all(abs(r["deinflated_err_pct"]) <= 25 for r in got), \
        [r["deinflated_err_pct"] for r in got]


def test_a_captured_for_loop_optimizer_pays_for_capturable(rows):
    # Adam(foreach=False, capturable=True) in the graph: 2.7x the optimizer's kernels (measured 6.0x on
    # the H100, 4.1x on the H200); without that cost the graph was predicted at 6.4-14x. Held out:
    # AdamW on another model (measured 8.4x / 4.8x), predicted within 26% before any change.
    got = _rows_of(rows, "unfused_optimizer", "after_graph_only")
    assert len(got) == 4 and all(abs(r["err_pct"]) <= 50 for r in got), [r["err_pct"] for r in got]
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 2
    held = _rows_of(rows, "holdout_adamw_loop", "after_graph_only")
    # (-39..-10% since the costs were refitted on the clean runs; on those runs -21..-5%, and the for-loop
    # Adam's graph -13..+8%.)
    # (-45..-15% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert len(held) == 4 and all(abs(r["err_pct"]) <= 46 for r in held), [r["err_pct"] for r in held]


def test_sgd_is_captured_as_it_is():
    # SGD keeps no step count: its graph estimate pays no capturable cost.
    from traceinsight.analyses.fixes import CudaGraph
    from traceinsight.report.analyze import analyze_file
    a = analyze_file(ROOT / "sample_traces/matrix/h100_holdout/holdout_sgd_loop__before__default.json.gz")
    graph = next(f for f in a.findings if f.kind == "launch_overhead").fixes[0]
    assert isinstance(graph, CudaGraph) and graph.optimizer is None
    assert any(f.kind == "unfused_optimizer" for f in a.findings)


def test_a_graph_replay_step_is_not_the_profilers_step():
    # A one-launch graph replay (small_batch_infer's fix): profiled 0.104 / 0.069 ms, measured 0.039 /
    # 0.037 ms. The profiler's step() between ProfilerStep ranges and CUPTI's record per graph node are
    # its own costs: taken out, the estimate was 0.088 / 0.059 ms before, now within 35%.
    import json

    from traceinsight.report.analyze import analyze_file
    for gpu in ("h100", "h200"):
        man = json.loads((ROOT / f"sample_traces/matrix/{gpu}/manifest.json").read_text())
        meas = next(e["step_ms"]["median"] for e in man["entries"]
                    if e["workload"] == "small_batch_infer" and e["variant"] == "after")
        a = analyze_file(ROOT / f"sample_traces/matrix/{gpu}/small_batch_infer__after__default.json.gz")
        est = a.whatif["unprofiled_step_ms"]
        assert abs(est - meas) <= 0.35 * meas, (gpu, est, meas)


def test_fusing_a_gpu_bound_chain_also_removes_the_gaps_between_its_kernels():
    # fusion_elementwise: 54 queued kernels, ~2 us apart on the GPU; the baseline replay reproduces the
    # step only with those gaps.
    from traceinsight.estimate import replay
    from traceinsight.estimate.graph import build_graph, step_window
    from traceinsight.trace.host import HostActivity
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    m = build_model(load_trace(ROOT / "sample_traces/matrix/h100/fusion_elementwise__before__default.json.gz"))
    c = replay.Compiled(build_graph(m, HostActivity(m), step_window(m)))
    assert 1.0 <= c.queued_gap <= 3.0, c.queued_gap
    base = replay.simulate(replay.apply(c)).median_us
    actual = float(m.steps.set_index("step")["dur"].median())
    assert abs(base - actual) <= 0.03 * actual, (base, actual)


def test_the_top_finding_is_the_fix_measured_to_help_most(rows):
    # Of the fixes measured for a workload on that GPU (the second run measured the CUDA graph too).
    assert sum(r["ok_top"] for r in pairs(rows)) >= 0.85 * len(pairs(rows))
    graphed = [r for r in pairs(rows) if "_graph" in r["run"]]
    assert len(graphed) >= 70 and sum(r["ok_top"] for r in graphed) >= 0.8 * len(graphed)


def test_the_top_finding_misses_only_where_the_readme_says_why(rows):
    # The tokenizer's with_stack traces (its Python events de-inflated away, so launch_overhead comes
    # first); the eleventh set's masked_select loss, where the only fix measured (the sync removed) made the
    # launch-bound step slower on both hosts (0.77x, 0.82x) and the tool ranks the CUDA graph first, the
    # sync as its prerequisite; and one with_stack trace of its two-worker loader (launch_overhead over the
    # waits, stacks inflating the loop); the fourteenth set's AUC eval on the H200 host without record_shapes,
    # whose 64 KB of scores the host sorted for longer than the reads rule lets so few bytes take (with shapes
    # an op on the copied tensor's shape links them); the Python-dense calibration step, whose only measured
    # fix moved its 0.4-0.7 ms of Python out of a 2.2 ms step that stays launch-bound: the tool ranks the
    # launches (not measured there) first. Any other miss is new.
    misses = {(r["run"], r["workload"], r["setting"]) for r in pairs(rows) if not r["ok_top"]}
    # (Since the costs were refitted on the clean runs: item_logging_large's default trace on its 3rd run ranks
    # fusion_candidates over the graph, 1.16x measured against 1.12x for the sync alone.)
    # (Since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold: the first H200 run's layout pair, where the graph, not measured on that run, now comes
    # first.)
    assert misses <= {("h100_holdout2", "holdout2_tokenize_main", "stack"),
                      *(("h200", "layout_nchw_fp16", st) for st in ("default", "stack")),
                      ("h100_graph2", "item_logging_large", "default"),
                      ("h200_holdout2", "holdout2_tokenize_main", "stack"),
                      ("h200_holdout14", "holdout14_auc_sort_cpu_torch", "default"),
                      *((run, "calib_python_features", st) for run in ("h100_calib", "h200_calib")
                        for st in ("default", "stack")),
                      ("h100_holdout11", "holdout11_loader_two_workers", "stack"),
                      *((run, "holdout11_masked_select_loss", s)
                        for run in ("h100_holdout11", "h100b_holdout11", "h100c_holdout11") for s in ("default", "stack"))}, misses


def test_tenth_held_out_set(rows):
    # Committed (d853f04) before it was recorded: a DataLoader whose one worker is the bottleneck (8 workers
    # measured 4.3x / 4.7x) and an fp32 conv net that cuDNN runs on TF32 (healthy: no fp32_matmul to offer).
    loader = _rows_of(rows, "holdout10_loader_one_worker", "after")
    assert len(loader) == 4 and all(r["top"] == "host_bound" for r in loader)
    assert all(abs(r["err_pct"]) <= 50 for r in loader), [r["err_pct"] for r in loader]
    conv = [r for r in rows if r["workload"] == "holdout10_healthy_fp32_convnet"]
    assert len(conv) == 4 and all(r["ok_top"] for r in conv)
    assert all(r["top"] != "fp32_matmul" for r in conv)
    # The tool's top finding on the VGG-style net, measured on the same runs: the step in a CUDA graph
    # (2.1x / 2.5x) beat channels_last (0.95x / 1.5x), as launch_overhead first said.
    vgg = _rows_of(rows, "holdout8_layout_vgg_fp16", "after_graph_only")
    assert len(vgg) == 4 and all(r["top"] == "launch_overhead" and r["ok_top"] for r in vgg)


def test_a_graph_keeps_the_programs_own_python(rows):
    # eval_to_numpy_large: the per-batch numpy work after .cpu() stays when the forward is graphed
    # (measured 1.05x); the replay once removed it with the dispatch and predicted 1.6-1.7x.
    got = _rows_of(rows, "eval_to_numpy_large", "after_graph_only")
    # (+5..+17% since the graph leaves the numpy warm, 2026-11-26.)
    assert len(got) == 4 and all(abs(r["err_pct"]) <= 20 for r in got), [r["err_pct"] for r in got]


def test_unprofiled_step_estimate_near_the_measured_median(rows):
    errs = [abs(r["deinflated_err_pct"]) for r in rows]
    # 0.70 on the first run's traces; the second run's hosts were noisier (p10-p90 up to 1.7x). (408 of 628
    # since the costs were fitted to the clean runs: these runs' truth carries CUPTI; clean: 0.8, below.)
    # (392 since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(e <= 15 for e in errs) >= 0.62 * len(errs)
    # And never the profiled step taken as real: the estimate is below it whenever the profiler inflated.
    # (A loop waiting for DataLoader workers keeps its mean step, which the median of its steps can undercut:
    # the workers take turns.)
    assert all(r["unprofiled_est_ms"] <= r["profiled_ms"] * 1.001 for r in rows if not r["worker_fed"])
    assert any(r["worker_fed"] for r in rows)


def test_healthy_workloads_stay_healthy_under_both_profiler_settings(rows):
    healthy = [r for r in rows if r["kind"] == "healthy"]
    strict = [r for r in healthy if r["expect"] == "healthy"]
    # Healthy where measured so (un-profiled idle <= 5%): every GPU-bound workload, both settings.
    assert len(strict) >= 14 and all(r["healthy"] for r in strict)
    assert {r["workload"] for r in strict} >= {"healthy_bf16_matmul", "healthy_transformer_bf16",
                                                 "healthy_convnet_b512"}
    assert all(r["ok_top"] for r in healthy)


def test_plans_never_predict_a_step_shorter_than_its_gpu_work():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    for name in ("sync_and_small_kernels__before__default", "launch_tiny_conv__before__stack",
                 "host_preprocess__before__default"):
        d = document(analyze_file(ROOT / "sample_traces" / "matrix" / "h200" / f"{name}.json.gz"))
        busy = d["whatif"]["gpu_busy_ms"]
        unprof = d["summary"]["unprofiled_step_ms"]
        for row in d["whatif"]["plan"]:
            assert row["estimated_step_ms"] >= busy - 1e-3, (name, row)
        for f in d["findings"]:
            # No fix of idle time claims more than the un-profiled step's idle.
            if f["kind"] in ("launch_overhead", "sync_stall", "host_bound"):
                assert f["estimated_savings_ms"] <= unprof - busy + 1e-3, (name, f)


def test_the_plan_says_when_a_fix_hands_the_step_to_the_cpu():
    # TF32 in an fp32 step that was GPU-bound (4.49 ms un-profiled, 4.38 of GPU work): the GPU then works about
    # 1.5 ms of a 3 ms step (measured after: 3.46 ms, 1.46 ms of GPU work), and the next fix is the host's.
    from traceinsight.render import markdown as md_r, terminal
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import build_report
    from rich.console import Console
    rep = build_report(analyze_file(
        ROOT / "sample_traces/matrix/h100_clean17A/holdout20_fp32_two_tower__before__stack.json.gz"))
    (row,) = rep.doc["whatif"]["plan"]
    assert row["kind"] == "fp32_matmul" and row["cpu_bound_after"]
    assert 1.0 < row["gpu_work_after_ms"] < 0.8 * row["estimated_step_ms"] < 0.8 * rep.doc["summary"]["unprofiled_step_ms"]
    con = Console(record=True, width=200)
    terminal.show([rep], console=con)
    assert "then the CPU sets the step: the GPU works about" in con.export_text()
    assert "then the CPU sets the step" in md_r.render([rep])
    # Where the GPU still fills the step after it (the root sample's larger GEMMs), nothing is said, and a
    # plan of one fix shows no table.
    rep = build_report(analyze_file(ROOT / "sample_traces/fp32_matmul__before.json.gz"))
    (row,) = rep.doc["whatif"]["plan"]
    assert not row["cpu_bound_after"] and row["gpu_work_after_ms"] > 0.9 * row["estimated_step_ms"]
    assert "Fix plan" not in md_r.render([rep])


def test_syncs_come_before_the_cuda_graph_in_the_plan():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces" / "matrix" / "h200" /
                              "sync_and_small_kernels__before__default.json.gz"))
    kinds = [r["kind"] for r in d["whatif"]["plan"]]
    assert "sync_stall" in kinds and "launch_overhead" in kinds
    assert kinds.index("sync_stall") < kinds.index("launch_overhead")
    sync = d["whatif"]["plan"][kinds.index("sync_stall")]
    assert "launch_overhead" in sync["prerequisite_for"]
    launch = next(f for f in d["findings"] if f["kind"] == "launch_overhead")
    assert launch["fix"].startswith("First:") and launch["evidence"]["prerequisites"][0]["kind"] == "sync_stall"


def test_every_output_shows_the_plan_and_the_unprofiled_step(tmp_path):
    from traceinsight.cli.common import analyze_and_write
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    (r,) = analyze_and_write([ROOT / "sample_traces" / "matrix" / "h200" /
                              "sync_and_small_kernels__before__default.json.gz"], html=html, markdown=md)
    page, text = html.read_text(), md.read_text()
    assert 'data-testid="plan"' in page and "first: needed by launch_overhead" in page
    assert "**Fix plan**" in text and "first: needed by launch_overhead" in text
    u = r.doc["summary"]["unprofiled_step_ms"]
    assert f"{u:.3f} ms" in text and "Without the profiler the step is about" in page
    # Which steps were replayed, and that all are summarised (issue 14).
    assert "The what-if estimates read steps" in page and "The what-if estimates read steps" in text


def test_a_pinned_copy_also_drops_the_stream_sync_of_the_pageable_copy(rows):
    # aten::copy_ synchronizes the stream after a pageable copy; the pinned, non-blocking fix does not.
    # Without that, the replay kept the CPU waiting for the GPU every step and predicted 2.2x for a
    # fix measured at 2.86x on the H200.
    got = [r for r in _rows_of(rows, "pageable_h2d", "after") if r["gpu"] == "h200"]
    assert len(got) == 2
    assert all(abs(r["err_pct"]) <= 15 for r in got), [(r["setting"], r["err_pct"]) for r in got]


def test_no_fix_of_idle_time_claims_more_than_the_unprofiled_idle(rows):
    # Every trace of the matrix, both settings: launch, host and collective findings.
    assert all(not r["over_idle"] for r in rows), [(r["run"], r["setting"], r["workload"], r["over_idle"])
                                                   for r in rows if r["over_idle"]]


def test_a_copy_to_the_host_is_a_sync_unless_the_copying_is_the_cost():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    m = ROOT / "sample_traces" / "matrix"
    # .cpu() of a batch's outputs: 3.3 MB, 7% of the step; the call waits for the forward. The sync is
    # the finding (moving the metrics to the GPU measured 1.83x); pinning alone saves little.
    d = document(analyze_file(m / "h100_graph2" / "eval_to_numpy_large__before__default.json.gz"))
    top = d["findings"][0]
    assert top["kind"] == "sync_stall" and "aten::to" in top["title"]
    pinned = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "pageable_memcpy")
    assert pinned["estimated_savings_ms"] < 0.5 * top["estimated_savings_ms"]
    # 16.8 MB to pageable memory every step, half the step: the copy is the cost, and the driver's
    # staging after the DMA is the copy's idle, not launch overhead.
    d = document(analyze_file(m / "h100" / "blocking_pageable_d2h__before__default.json.gz"))
    assert d["findings"][0]["kind"] == "pageable_memcpy" and "to pageable host memory" in d["findings"][0]["title"]
    assert d["summary"]["idle_by_cause_ms_median_per_step"]["pageable_memcpy"] > 0.2


def test_the_verdict_says_what_the_largest_idle_cause_is_worth_after_its_prerequisites():
    import re

    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    # Masked loss with syncs: most idle sits between launches, but once the syncs are gone a graph on top
    # measured 1.34x against 1.33x: the launch idle was the syncs' doing.
    d = document(analyze_file(ROOT / "sample_traces" / "matrix" / "h200_graph2" / "sync_mask_loss__before__default.json.gz"))
    m = re.search(r"largest idle cause is launch_overhead .*?fixing it saves about ([\d.]+) ms", d["verdict"])
    # The launch idle (1.55 ms profiled) is not promised: after the fixes before it, a fraction of it.
    ranked = [f["kind"] for f in d["findings"]]
    assert ranked[0] != "launch_overhead" and ranked.index("sync_stall") < ranked.index("launch_overhead")
    assert m and float(m.group(1)) < 0.3, d["verdict"]


def test_capturable_cost_is_named_and_not_paid_by_a_fused_optimizer():
    from traceinsight.analyses.fixes import CudaGraph, FusedOptimizer
    from traceinsight.estimate import replay
    from traceinsight.estimate.graph import build_graph, step_window
    from traceinsight.report.analyze import analyze_model
    from traceinsight.trace.host import HostActivity
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    m = build_model(load_trace(ROOT / "sample_traces/matrix/h100_graph/unfused_optimizer__before__default.json.gz"))
    a = analyze_model(m)
    launch = next(f for f in a.findings if f.kind == "launch_overhead")
    graph = launch.fixes[0]
    assert isinstance(graph, CudaGraph) and graph.optimizer is not None
    assert 2.0 <= graph.optimizer[1] <= 5.0, graph.optimizer[1]
    assert launch.evidence["capturable_optimizer_extra_gpu_ms_per_step"] > 0.3
    fused = next(f for f in a.findings if f.kind == "unfused_optimizer").fixes[0]
    assert isinstance(fused, FusedOptimizer)
    c = replay.Compiled(build_graph(m, HostActivity(m), step_window(m)))
    alone = replay.simulate(replay.apply(c, (graph,))).median_us
    plain = replay.simulate(replay.apply(c, (CudaGraph(),))).median_us
    both = replay.simulate(replay.apply(c, (fused, graph))).median_us
    assert alone > plain * 1.3, (alone, plain)        # the capturable kernels cost GPU time
    assert both < plain, (both, plain)                 # a fused optimizer's graph pays none of it
    with pytest.raises(ValueError):
        CudaGraph(wrapper_us=-1.0)
    with pytest.raises(ValueError):
        CudaGraph(optimizer=((), 2.0))


def test_compiled_wrapper_is_read_from_the_trace():
    from traceinsight.trace.facts import compiled_wrapper_us
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    got = {}
    for gpu in ("h100", "h200"):
        m = build_model(load_trace(ROOT / f"sample_traces/matrix/{gpu}/compile_default_vs_ro__before__default.json.gz"))
        got[gpu] = compiled_wrapper_us(m, m.steps["step"])
    # Dynamo's cache lookup and the region's own Python: tens of us, slower on the H100 machines' CPU.
    assert 20 <= got["h200"] < got["h100"] <= 200, got
    eager = build_model(load_trace(ROOT / "sample_traces/matrix/h100/fusion_elementwise__before__default.json.gz"))
    assert compiled_wrapper_us(eager, eager.steps["step"]) is None


def test_pinned_copies_may_also_speed_up_the_dispatch_the_cpu_staged_around(rows, clean_rows):
    # 16-50 MB of pageable copies per step: the pinned program's dispatch measured 1.0-1.5x faster (the same
    # ops before and after) on some hosts and not on others. The range reaches 1.5x; the point is its middle.
    h100 = [r for r in _rows_of(rows, "pageable_h2d", "after") + _rows_of(rows, "blocking_pageable_d2h", "after")
            if r["gpu"] == "h100"]
    assert len(h100) == 4
    assert sum(r["pred_range"][0] <= r["meas_speedup"] <= r["pred_range"][1] for r in h100) >= 3, \
        [(r["pred_range"], r["meas_speedup"]) for r in h100]
    # On the clean hosts the fixed steps that stay CPU-bound were under-predicted on 62 of 64 rows with the
    # point at 1.0x (-4..-69%); at the middle they straddle the measurement: within 25% on 50 of 54.
    staged = [r for r in clean_rows if r["variant"] == "after" and not slow_staging(r) and r["workload"] in (
        "blocking_pageable_d2h", "holdout2_d2h_features", "holdout15_pageable_logits_slice")]
    errs = [r["err_pct"] for r in staged]
    # (With the thirty-fourth set's fresh H200 host, h200_clean34A: 53 of 60, its six rows -27..-0%.)
    assert len(staged) == 60 and sum(abs(e) <= 25 for e in errs) >= 52 and sum(e > 0 for e in errs) >= 2, errs
    # Out of sample (*_clean10: two new pageable pairs, committed before they were recorded, and the five
    # pageable pairs on new hosts): within 25% on 36 of 48 rows, as with the point at 1.0x, but centred
    # (median error -16% at 1.0x). Within 50% on 47 until with_stack's built-in calls were costed apart
    # (6156f17): holdout16_pageable_feature_cache's stack row on *_clean10C moved from +48.9% to +50.3%.
    held = [r for r in clean_rows if "_clean10" in r["run"]]
    errs = sorted(r["err_pct"] for r in held)
    assert len(held) == 48 and sum(abs(e) <= 25 for e in errs) >= 36 and sum(abs(e) <= 50 for e in errs) >= 46, errs
    assert abs(errs[len(errs) // 2]) <= 10, errs
    # Out of sample again (*_clean12A, a fresh H100 lease, the tool at 07b0402): 22 of 24 within 25%; the two
    # misses are holdout15 on a host that staged its copy slowly again (24 ms a step, 82x once it went: -48%).
    held = [r for r in clean_rows if "_clean12" in r["run"]]
    # (21 since with_stack's built-in calls were costed apart from frames, 6156f17: the feature cache's
    # with_stack row +24.0% -> +25.4%.)
    assert len(held) == 24 and sum(abs(r["err_pct"]) <= 25 for r in held) >= 21
    assert all(abs(r["err_pct"]) <= 50 for r in held), [r["err_pct"] for r in held]
    # The pageable convolution's H200 hosts did not speed up (+12..+40% over): the range's low end, no
    # speed-up, is within 15% of what they measured.
    # (h200_clean34A's host did: 2.59x measured, +12% and +8%.)
    conv = [r for r in clean_rows if r["workload"] == "holdout2_pageable_conv" and r["variant"] == "after"]
    assert len(conv) == 24 and all(abs(r["err_pct"]) <= 50 for r in conv), [r["err_pct"] for r in conv]
    assert all(r["pred_range"][0] <= 1.15 * r["meas_speedup"] for r in conv if r["gpu"] == "h200"), \
        [(r["pred_range"], r["meas_speedup"]) for r in conv]
    # The first held-out run (CUPTI attached while timing the fixed step: biased slow where CPU-bound) reads
    # the convolution +18..+46% and the copy to pageable memory -18..+1%.
    held = _rows_of(rows, "holdout2_pageable_conv", "after") + _rows_of(rows, "holdout2_d2h_features", "after")
    assert len(held) == 8 and all(abs(r["err_pct"]) <= 50 for r in held), [r["err_pct"] for r in held]


def test_python_data_preparation_chopped_by_tiny_ops_is_host_work(rows):
    # Sentences tokenized in Python on the main thread, one small torch.tensor per sentence: no stretch
    # without ops reaches a millisecond, yet ~6 ms per step launch nothing. Measured: DataLoader workers
    # 1.61x. The default-option traces must name host_bound first (they named launch_overhead).
    got = [r for r in _rows_of(rows, "holdout2_tokenize_main", "after") if r["setting"] == "default"]
    assert len(got) == 2 and all(r["top"] == "host_bound" for r in got), [r["top"] for r in got]


def test_a_fused_chain_still_does_its_arithmetic(rows):
    # The unfused sin/exp kernels are memory-bound, but the fused Triton kernel is compute-bound (3.3-5.0
    # mean kernels measured); a chain of cheap arithmetic stays memory-bound. Both against measured fixes.
    for wl in ("fusion_elementwise", "holdout_fusion_bf16", "holdout5_fusion_arith"):
        got = [r for r in _rows_of(rows, wl, "after") if r["setting"] == "default"]
        assert len(got) == 2, wl
        assert all(abs(r["err_pct"]) <= 25 for r in got), [(r["run"], r["err_pct"]) for r in got]


def test_a_repeated_chain_may_need_a_pass_per_repeat(rows):
    # A short sequence repeated for every call (GELU on 4 activations, LayerNorm called 3 times) fuses into
    # a pass per call. Without stacks the trace cannot tell that from a loop over one tensor, so the range's
    # worst end counts a pass per repeat: the range meets the measured p10-p90 spread. With stacks each
    # repeat's own call is seen and the point pays the passes: within 50% on all four rows (was +38..+119%).
    for wl in ("holdout5_fusion_gelu_fp16", "holdout5_fusion_layernorm"):
        for r in _rows_of(rows, wl, "after"):
            lo, hi = r["pred_range"]
            m_lo, m_hi = r["meas_spread"]
            assert lo <= m_hi and m_lo <= hi, (wl, r["run"], r["setting"], r["pred_range"], r["meas_spread"])
            if r["setting"] == "stack":
                assert abs(r["err_pct"]) <= 50, (wl, r["run"], r["err_pct"])


def test_a_loop_over_one_tensor_is_one_pass_when_the_stacks_show_it():
    # holdout6_fusion_loop: one tensor through the same five kernels six times, in one call of `rounds`.
    # The stacks show one call: no pass per repeat, even at the range's worst end.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    for setting, narrow in (("stack", True), ("default", False)):
        d = document(analyze_file(ROOT / f"sample_traces/matrix/h100_holdout6/holdout6_fusion_loop__before__{setting}.json.gz"))
        f = next(x for x in d["findings"] if x["kind"] == "fusion_candidates")
        # No range at all is the narrowest: both ends capped at the same physics bound.
        lo, hi = f["savings_range_ms"] or (f["estimated_savings_ms"],) * 2
        assert (hi - lo < 0.05 * hi) == narrow, (setting, lo, hi)


def test_bandwidth_per_flop_of_known_gpus():
    from traceinsight.trace.gpu_specs import bandwidth_to_compute
    assert bandwidth_to_compute("NVIDIA H100 80GB HBM3") == pytest.approx(1.0)
    assert bandwidth_to_compute("NVIDIA H200") == pytest.approx(4.8 / 3.35)
    assert bandwidth_to_compute("NVIDIA H100 PCIe") < 1.0
    assert bandwidth_to_compute("NVIDIA A100-SXM4-80GB") > 2.0
    assert bandwidth_to_compute("Some Future GPU") is None
    # "GH200" contains "H200": the Grace Hopper part (4 TB/s) must not get the H200's 4.8 TB/s.
    assert bandwidth_to_compute("NVIDIA GH200 480GB") == pytest.approx(4.0 / 3.35)


def test_repeats_of_a_kernel_sequence():
    import numpy as np
    from traceinsight.analyses.fusion_candidates import _repeats
    assert _repeats(np.array(list("abcabcabc"))) == 3
    assert _repeats(np.array(list("xabcabcabc"))) == 1     # a prefix: one loop, one pass
    assert _repeats(np.array(list("abab"))) == 2
    assert _repeats(np.array(list("aaaa"))) == 1           # one kernel run: one expression (x + a + b + c)
    assert _repeats(np.array(list("abcd"))) == 1


def test_a_result_kept_on_the_gpu_is_not_read_by_numpy_either(rows):
    # eval_to_numpy_large copies 3.3 MB of probabilities to the host each batch and argmaxes them in
    # numpy (0.6 ms of Python after the copy); the measured fix keeps them on the GPU, so that Python goes
    # too (half of it at the point estimate). Without it the sync fix was 16-30% short.
    got = _rows_of(rows, "eval_to_numpy_large", "after")
    assert len(got) == 6
    assert all(abs(r["err_pct"]) <= 25 for r in got), [(r["run"], r["setting"], r["err_pct"]) for r in got]


def test_reading_a_scalar_does_not_take_unrelated_host_work_with_it():
    # sync_then_host_work: loss.item() (4 bytes), then 26 ms of unrelated numpy. The sync fix must not
    # claim that numpy: the bytes a copy brings back bound the Python that reads them.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h100/sync_then_host_work__before__default.json.gz"))
    sync = [f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall"]
    assert all(f["estimated_savings_ms"] < 1.0 for f in sync), sync
    assert d["findings"][0]["kind"] == "host_bound"


def test_an_estimated_unprofiled_step_comes_with_its_validation_band():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    s = document(analyze_file(ROOT / "sample_traces" / "launch_tiny_conv__before.json.gz"))["summary"]
    lo, hi = s["unprofiled_step_range_ms"]
    assert s["median_gpu_busy_ms"] <= lo < s["unprofiled_step_ms"] < hi
    assert lo <= 1.696 <= hi                 # its measured un-profiled median (sample_traces/manifest.json)
    # A GPU-bound step's band cannot go below its GPU work.
    s = document(analyze_file(ROOT / "sample_traces" / "healthy_bf16_matmul__before.json.gz"))["summary"]
    assert s["unprofiled_step_range_ms"][0] >= s["median_gpu_busy_ms"] - 1e-3


def test_repeated_chains_without_stacks_keep_both_readings_in_the_range(rows):
    # Without Python stacks a repeated kernel sequence may be k calls on k tensors (a pass each: the SwiGLU
    # gate on three pairs) or a loop over one tensor (one pass: the Newton loop). The point takes one pass;
    # the range must hold both measured outcomes, and each end of it is capped by the GPU work that end
    # removes (capped by the point's removal, the Newton loop's range ended near 5x against 40x measured).
    for workload in ("holdout7_fusion_swiglu_calls", "holdout9_fusion_newton_loop"):
        got = [r for r in _rows_of(rows, workload, "after") if r["setting"] == "default"]
        assert len(got) == 2
        for r in got:
            lo, hi = r["pred_range"]
            assert lo <= r["meas_speedup"] <= hi, r


def test_fuse_chains_range_ends_pay_one_pass_and_a_pass_per_repeat():
    # A repeated chain the stacks cannot settle: one pass at the point and the best end, a pass per
    # repeat at the worst end.
    from traceinsight.analyses.fixes import FuseChains
    fx = FuseChains(((1, 2, 3, 4),), 1.5, (0.0,), repeats=(2,), passes=(1,),
                    bounds=((1.0, 0.0, False, 0.75, 0.75), (3.0, 1.5, True, 1.5, 2.0)))
    assert fx.fused_cost(0) == 1.5                       # the point: one pass
    assert fx.at(fx.bounds[0]).fused_cost(0) == 1.0      # best end: one cheaper pass (a loop)
    assert fx.at(fx.bounds[1]).fused_cost(0) == 3.0      # worst end: two passes of 1.5
    assert "loop or several calls" in fx.RANGE_NOTE
    with pytest.raises(ValueError):
        FuseChains(((1, 2),), passes=(0,))
    # Slow kernels counted at a vectorized kernel's time (unit 0.5) at the end that says so, not at the point.
    fx = FuseChains(((1, 2),), 1.5, (0.0,), unit=(0.5,),
                    bounds=((1.0, 0.0, False, 0.75, 0.75, True), (3.0, 1.5, True, 1.5, 2.0, False)))
    assert fx.fused_us(0, 1000.0, 100.0) == 150.0
    assert fx.at(fx.bounds[0]).fused_us(0, 1000.0, 100.0) == 50.0
    assert fx.at(fx.bounds[1]).fused_us(0, 1000.0, 100.0) == 300.0
    with pytest.raises(ValueError):
        FuseChains(((1, 2),), unit=(0.0,))


def test_the_unprofiled_band_holds_most_measured_steps(rows):
    # The band is the 10th-90th percentile of our own measurements around such estimates, scaled by the
    # profiler time each estimate took out: it must hold about 8 in 10 measured un-profiled steps.
    inside = [r["unprofiled_band_ms"][0] <= r["unprofiled_ms"] <= r["unprofiled_band_ms"][1] for r in rows]
    assert sum(inside) >= 0.75 * len(rows)


def test_new_hosts_keep_the_ranking_and_most_estimates(rows):
    # Ten matrix pairs re-recorded on fresh H100 and H200 leases after the last model change: the top
    # finding must stay right and most estimates within 25%, as on the hosts the models were fitted on.
    got = [r for r in pairs(rows) if r["run"].endswith("_rerun")]
    assert len(got) >= 50
    assert all(r["ok_top"] for r in got), [(r["run"], r["workload"], r["top"]) for r in got if not r["ok_top"]]
    errs = [abs(r["err_pct"]) for r in got]
    # (37 of 56 within 25% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(e <= 25 for e in errs) >= 0.65 * len(got) and sum(e <= 50 for e in errs) >= 0.9 * len(got)


def test_profiler_costs_scale_with_the_hosts_launch_speed():
    # A host whose profiled cudaLaunchKernel takes longer than on the hosts the per-event costs were fitted
    # on pays the profiler's work in proportion (this H200 host's fast launches: 7.1 us against 4.8 us).
    import numpy as np

    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    from traceinsight.trace.profiler_cost import (FIT_LAUNCH_QUANTILE, FIT_LAUNCH_US, FIT_NESTED_US, PROFILER_COST_US,
                                                  event_classes, host_factor, nested_fast_us, op_factor)
    m = build_model(load_trace(ROOT / "sample_traces/matrix/h200_holdout4/holdout4_masked_seq_loss__before__default.json.gz"))
    cpu = m.cpu
    launch = ((cpu["kind"] == "runtime") & (cpu["name"] == "cudaLaunchKernel")).to_numpy()
    f = host_factor(m)
    fast = float(np.percentile(cpu["dur"].to_numpy()[launch], FIT_LAUNCH_QUANTILE))
    assert f == pytest.approx(fast / FIT_LAUNCH_US["default"]["H200"])
    # (That host's launches were 1.7x the clean runs' hosts', whose launches the costs are now fitted to.)
    assert 1.5 < f < 1.9
    costs = dict((k, us) for k, _rows, us in event_classes(m))
    assert costs["runtime"] == pytest.approx(f * PROFILER_COST_US["default"]["H200"]["runtime"])
    # The ops' own cost scales with where an op opens its first nested op, over the fitted hosts' median:
    # this host's ops open theirs more than twice as slowly (the factor clipped at 2).
    g = op_factor(m)
    assert nested_fast_us(m) > 2 * FIT_NESTED_US["default"]["H200"] and g == 2.0
    assert costs["op"] == pytest.approx(g * PROFILER_COST_US["default"]["H200"]["op"])
    # A graph replay launches too few kernels to tell: the fitted costs as they are.
    g = build_model(load_trace(ROOT / "sample_traces/matrix/h100_holdout2/holdout2_graph_infer__after__default.json.gz"))
    assert host_factor(g) == 1.0 and op_factor(g) == 1.0


def test_a_compiled_step_reads_the_host_factor_from_the_driver_launches_and_scales_inductor_ranges_by_it():
    import numpy as np

    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    from traceinsight.trace.profiler_cost import (FIT_CU_LAUNCH_US, FIT_LAUNCH_QUANTILE, INDUCTOR_RANGE_US,
                                                  event_classes, host_factor)
    # Compiled inference launches its Triton kernels through cuLaunchKernel only (no cudaLaunchKernel at
    # all): its host factor comes from those. A slower host (*_clean2A, H200: 5.9 us at the fast end) and a
    # fitted one (*_cleanA).
    got = {}
    for run in ("h200_clean2A", "h200_cleanA"):
        m = build_model(load_trace(ROOT / f"sample_traces/matrix/{run}/holdout_compile_infer__before__default.json.gz"))
        cpu = m.cpu
        assert not ((cpu["kind"] == "runtime") & (cpu["name"] == "cudaLaunchKernel")).any()
        cu = ((cpu["kind"] == "runtime") & (cpu["name"] == "cuLaunchKernel")).to_numpy()
        f = host_factor(m)
        assert f == pytest.approx(float(np.percentile(cpu["dur"].to_numpy()[cu], FIT_LAUNCH_QUANTILE)) / FIT_CU_LAUNCH_US)
        costs = dict((k, us) for k, _rows, us in event_classes(m))
        assert costs["inductor"] == pytest.approx(f * INDUCTOR_RANGE_US["default"])
        got[run] = f
    assert got["h200_clean2A"] > 1.4 and 0.9 < got["h200_cleanA"] < 1.1


def test_a_compiled_steps_python_frames_cost_what_its_hosts_launches_say(clean_rows):
    # A compiled step's ops outside torch.compile's ranges are a few kinds, whose own work sets op_factor's offsets;
    # its Python frames under with_stack track the host's launch factor instead (profiler_cost.COMPILED_PYTHON_NOTE).
    # Scaled by op_factor, 21 of the 56 compiled with_stack traces had their un-profiled step within 15% (median
    # +14%; the padding-mask branch +70..+85% on two hosts); by the launch factor, 30.
    from traceinsight.trace.profiler_cost import event_classes, host_factor, op_factor
    traces = {(r["run"], r["workload"]): r for r in clean_rows
              if r["setting"] == "stack" and "compile" in r["workload"] and r["deinflated_err_pct"] is not None}
    assert len(traces) >= 56
    assert sum(abs(r["deinflated_err_pct"]) <= 15 for r in traces.values()) >= 28
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    run = ROOT / "sample_traces/matrix/h200_clean36B"
    m = build_model(load_trace(run / "holdout32_compiled_mask_any__before__stack.json.gz"))
    costs = {k: us for k, _rows, us in event_classes(m)}
    assert op_factor(m) < 0.7 < 1.2 < host_factor(m)
    assert costs["python"] == pytest.approx(host_factor(m) * 1.25)


def test_a_second_set_of_new_hosts_after_the_host_factor(rows):
    # Twelve other pairs re-recorded on fresh leases minutes after the host factor was fitted, nothing
    # changed after: 50 of 68 within 25%, 65 within 50%, top 64; the un-profiled step within 15% on 38 of
    # 48 traces, inside its band on 35. Once the replay followed autograd's thread (the loop thread waits
    # for backward: graph.py's joins): 51, 65, 64; 37 and 32, three traces leaving the band within 0.5%
    # of its edge. Once a blocking copy to pageable memory kept its staging tail and a replayed step ended
    # when its CPU part and its GPU work were both done: 53, 63, 68; 36 and 34 (the two rows that left 50%
    # are holdout2_d2h_features, whose measured fix waits for each copy a step sooner than the advice).
    got = [r for r in pairs(rows) if r["run"].endswith("_rerun2")]
    assert len(got) >= 60
    errs = [abs(r["err_pct"]) for r in got]
    # (50, 64, 68; un-profiled 35 of 48 since the costs were refitted on the clean runs.)
    # (46 within 25% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(e <= 25 for e in errs) >= 0.67 * len(got) and sum(e <= 50 for e in errs) >= 0.9 * len(got)
    assert sum(r["ok_top"] for r in got) >= 0.9 * len(got)
    traces = {(r["run"], r["workload"], r["setting"]): r for r in rows if r["run"].endswith("_rerun2")}.values()
    # (30 of 48 since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(abs(r["deinflated_err_pct"]) <= 15 for r in traces) >= 0.62 * len(traces)
    assert sum(r["unprofiled_band_ms"][0] <= r["unprofiled_ms"] <= r["unprofiled_band_ms"][1] for r in traces) \
        >= 0.65 * len(traces)


def test_the_step_waits_for_autograds_thread_so_a_masked_loss_fix_saves_its_backward(rows):
    # loss.backward() blocks the loop thread while autograd's device thread runs the backward: the loop
    # thread's next call follows that thread's last call (a join edge per step), so the boolean index's
    # backward (IndexBackward0: 42 runtime calls a step on autograd's thread) is on the step's path. Before
    # the joins the masked loss's fix saved 0.18 ms on this trace (1.05x) where 0.99 ms was measured (1.34x).
    from traceinsight.estimate.graph import build_graph, step_window
    from traceinsight.report.analyze import analyze_file
    from traceinsight.trace.host import HostActivity
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    path = ROOT / "sample_traces/matrix/h200_holdout4/holdout4_masked_seq_loss__before__default.json.gz"
    m = build_model(load_trace(path))
    window = step_window(m)
    G = build_graph(m, HostActivity(m), window)
    joins = [(u, v) for u, v, d in G.edges(data=True) if d.get("join")]
    assert len(joins) == len(window)
    assert all(G.nodes[u]["thread"] != G.nodes[v]["thread"] for u, v in joins)
    sync = next(f for f in analyze_file(path).findings if f.kind == "sync_stall")
    assert 0.4e3 < sync.estimated_savings_us < 0.99e3     # (0.49 ms since the op costs scale with op_factor)
    got = _rows_of(rows, "holdout4_masked_seq_loss", "after")
    assert len(got) == 8 and all(abs(r["err_pct"]) <= 25 for r in got), [r["err_pct"] for r in got]


def test_a_dropped_layout_transform_keeps_its_convolutions_dispatch(rows):
    # channels_last drops the nchwToNhwc kernels and their launch calls, not the cuDNN set-up before them:
    # in CPU-bound steps it was measured at 0.79-1.34x (median 1.0). With the backward thread on the
    # step's path, dropping the dispatch too predicted 1.17-1.34x on every such row.
    got = [r for w in ("layout_nchw_fp16", "holdout8_layout_vgg_fp16") for r in _rows_of(rows, w, "after")]
    assert len(got) >= 12
    # (11 of 16 since autograd's thread is woken only by a loop call after its own last one, 2026-12-01: the first
    # H100 run's default row -24.x -> -25.2%.)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 0.68 * len(got), [r["err_pct"] for r in got]


def test_channels_last_also_takes_batch_norm_off_its_nchw_kernels(clean_rows):
    # channels_last moves cuDNN's half-precision batch norm from its NCHW kernels to NHWC ones that run in a
    # fraction of their time: the root layout pair (H200, batch 128 at 56x56) had 7.2 ms a step of them and
    # measured 2.69x, where dropping the transposes alone predicted 1.26x (-53%).
    import validate
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    f = next(x for x in document(analyze_file(ROOT / "sample_traces/layout_nchw_fp16__before.json.gz"))["findings"]
             if x["kind"] == "layout_permute")
    assert f["evidence"]["batch_norm_nchw_ms_per_step"] > 5 and "Batch norm gains too" in f["fix"]
    # An upper bound whose convolutions cuDNN may run slower in NHWC (the VGG-style net: 0.79-0.95x) is not
    # ranked as a measured cost.
    assert f["confidence"] == "medium"
    root = {r["workload"]: r for r in validate.rows()}
    assert abs(root["layout_nchw_fp16"]["speedup_err_pct"]) <= 10, root["layout_nchw_fp16"]
    # The loader pair is scored against the fix measured (4 workers), as the matrix scores it.
    assert root["host_preprocess"]["option"] == "num_workers=4"
    assert abs(root["host_preprocess"]["speedup_err_pct"]) <= 25, root["host_preprocess"]
    # On the matrix's fp16 ResNet-ish net (the clean runs; its own measured fix spread 1.01-1.69x across hosts)
    # the transposes alone fell short on 14 of 16 rows (median -18%); with batch norm the median is -5%, 15
    # of 16 within 25%.
    got = _rows_of(clean_rows, "layout_nchw_fp16", "after")
    errs = sorted(r["err_pct"] for r in got)
    assert len(got) >= 16 and abs(errs[len(errs) // 2]) <= 10, errs
    assert sum(abs(e) <= 25 for e in errs) >= 0.85 * len(errs), errs


def test_a_loop_waiting_for_dataloader_workers_keeps_its_profiled_step(rows):
    # The profiler runs in the training process only: while the loop waits for a worker's batch, what
    # comes off the loop's own work lengthens the wait. The un-profiled estimate is the profiled step,
    # and adding workers saves the wait and the profiler cost it had absorbed. Before: the estimate took
    # 1.4-2.6 ms off (U 16.2 ms on H200 where 26.4 was measured); 3 of the 8 rows were within 25%.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_holdout10/holdout10_loader_one_worker__before__stack.json.gz"))
    s, w = d["summary"], d["whatif"]
    # The workers take turns: the pace is the mean step, not the median.
    assert w["unprofiled_step_ms"] >= s["median_step_ms"]
    assert "DataLoader workers" in w["unprofiled_step_method"]
    f = d["findings"][0]
    assert f["kind"] == "host_bound"
    top = f["savings_range_ms"][1] if f["savings_range_ms"] else f["estimated_savings_ms"]
    assert w["plan"][0]["kind"] == "host_bound" and w["plan"][0]["saves_ms"] <= top + 1e-3
    assert 0 < f["evidence"]["idle_ms_per_step"] and d["findings"][1]["evidence"].get("cpu_us_per_kernel", 0) < 100
    got = [r for r in pairs(rows) if r["workload"] == "holdout10_loader_one_worker"]
    # (5 of 8 within 25% since the costs were refitted on the clean runs; 6 before.)
    # (4 since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    # (3 since a thread's stretch without launches counts before its first launch too, 3f38eca: the H100
    # stack row +22.5% -> +26.9%.)
    assert len(got) == 8 and sum(abs(r["err_pct"]) <= 25 for r in got) >= 3, [r["err_pct"] for r in got]
    assert all(abs(r["err_pct"]) <= 61 for r in got)     # (one H100 rerun row +60% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold)
    # Its steps lengthen through the window (13.0 -> 19.0 ms): the prefetched batches ran out. Said.
    default = document(analyze_file(ROOT / "sample_traces/matrix/h200_holdout10/holdout10_loader_one_worker__before__default.json.gz"))
    assert any(x.startswith("Step times rise through the trace (13.0 -> 19.0 ms") and "DataLoader workers" in x
               for x in default["trace"]["limits"])


def test_eleventh_held_out_set(rows):
    # Committed (4a1bd9a) before it was recorded on two H100 hosts. As recorded it failed: top finding right
    # on 0 of 12 rows, within 25% on 1 (a segmentation eval's 26 ms of numpy scoring was host_bound and
    # unbounded by the sync's fix; a two-worker loader's waits, every other step, hid behind a median step
    # and a pin-memory thread the replay took as autograd's). Since: the reads of a copied result are the
    # sync's (analyses/reads.py), a loop fed by workers keeps its mean step, and a helper thread is waited
    # on only while it is busy in ops.
    # A third H100 host (h100c, 19:23Z) recorded the set again with the tool at e6e5f17, nothing changed after:
    # loader -3%/-11%, segmentation eval -32%/-45% (top right), masked_select +22%/+23% (measured 0.88x).
    seg = _rows_of(rows, "holdout11_seg_eval_numpy", "after")
    assert len(seg) == 6 and all(r["top"] == "sync_stall" for r in seg)
    assert all(r["pred_speedup"] > 10 for r in seg), [r["pred_speedup"] for r in seg]   # measured 22-31x
    loader = _rows_of(rows, "holdout11_loader_two_workers", "after")
    assert len(loader) == 6 and sum(r["top"] == "host_bound" for r in loader) >= 5
    # (-25..+17% until the last step's trailing gap was attributed; that moved one with_stack row to -35%.)
    # (one row +40% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert all(abs(r["err_pct"]) <= 45 for r in loader), [r["err_pct"] for r in loader]
    # (Since session 77 a loop at its workers' pace keeps its mean idle, as it keeps its mean step: the plan read the
    # loader capped at the median step's idle and the rest of the wait booked to the next fix. The mean step's own
    # error then reaches the estimate: h100c's with_stack row -11% -> +29%, two clean rows -48%/-32% -> -15%/-6%.)
    new_host = [r for r in loader if r["run"] == "h100c_holdout11"]
    assert len(new_host) == 2 and all(abs(r["err_pct"]) <= 30 for r in new_host)
    # The masked_select fix measured slower (0.77x / 0.82x / 0.88x): the tool's sync estimate is small (< 1.1x)
    # and its top finding is the launch fix the sync blocks.
    masked = _rows_of(rows, "holdout11_masked_select_loss", "after")
    assert len(masked) == 6 and all(r["pred_speedup"] <= 1.1 and r["top"] == "launch_overhead" for r in masked)
    # The conv net meant to be fed in time was not (19-41% idle measured): not called healthy.
    fed = [r for r in rows if r["workload"] == "holdout11_healthy_fed_convnet"]
    assert len(fed) == 6 and all(r["ok_top"] and not r["healthy"] for r in fed)


def test_twelfth_held_out_set(rows):
    # Committed (1963c5c) before it was recorded on two H100 hosts with the tool at 3ee1065. As recorded: top
    # finding right on 8 of 12 rows, within 25% on 7, within 50% on 10, healthy 4 of 4. The misses: the
    # retrieval eval's numpy search (-48..-71%: its 4 MB read at 0.16 GB/s, slower than the 0.2 GB/s the
    # reads rule allowed, and the step left after it replayed 1.5x too slow) and the metrics loop, whose top
    # finding (launch_overhead, the syncs its prerequisite) was not measured: a third host measured it at
    # 4.49x (the CUDA graph) against 0.82-1.24x for removing the syncs alone.
    embed = _rows_of(rows, "holdout12_embed_numpy_search", "after")
    assert len(embed) == 4 and all(r["top"] == "sync_stall" for r in embed)
    # Since: the reads rule's floor is 0.05 GB/s and the step left after >= 2 ms of host work that leaves
    # the CPU runs warm (fixes.WARM_CPU): -22..-9%.
    # (+4..+30% since the loop's Python after the removed read runs cold, 2026-11-26; the clean runs' gained.)
    assert all(abs(r["err_pct"]) <= 35 for r in embed), [r["err_pct"] for r in embed]
    metrics = [r for r in pairs(rows) if r["workload"] == "holdout12_multi_item_metrics" and "_rerun" not in r["run"]]
    assert len(metrics) == 8 and all(r["top"] == "launch_overhead" and r["ok_top"] for r in metrics)
    # The graph's step is right (1.12 ms replayed, 1.01 ms measured); on that disturbed host (profiled steps
    # 10.7-64.5 ms, 4.5 ms un-profiled) even the quiet steps put the un-profiled step at 8.8 ms (default
    # options): +75%, and +27% with stacks.
    graph = {r["setting"]: r for r in metrics if r["variant"] == "after_graph"}
    assert len(graph) == 2 and abs(graph["stack"]["err_pct"]) <= 30 and abs(graph["default"]["err_pct"]) <= 80, \
        [r["err_pct"] for r in graph.values()]
    loader = _rows_of(rows, "holdout12_loader_workers0_resize", "after")
    assert len(loader) == 4 and all(r["top"] == "host_bound" for r in loader)
    # (one row +56% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert all(abs(r["err_pct"]) <= 57 for r in loader), [r["err_pct"] for r in loader]
    healthy = [r for r in rows if r["workload"] == "holdout12_healthy_bf16_mlp"]
    assert len(healthy) == 8 and all(r["healthy"] for r in healthy)      # (4 of them on the rerun3 hosts)


def test_thirteenth_held_out_set(rows):
    # Committed (a3a6dfb) before it was recorded on two H100 hosts, the tool at 714e7c5, nothing changed after:
    # top finding right on 12 of 12, within 25% on 6, within 50% on 8. The warm-rest rule held where host
    # work left the CPU (the np.unique table: -8..+7%, -38..-27% without it); the F1 scoring read its copy in
    # numpy (+10..+46%; -26..-1% without the rule). The k-NN eval scored with torch ops on CPU tensors was
    # over-predicted 2-2.7x: moved to the GPU those ops launch 38 more kernels a step, a replacement cost the
    # tool took as free (its range, from the stall alone up, held the measured saving). Since, their launches
    # are counted from the op tree (reads.replacement_launches, 41 for the 38): +5..+30%.
    vocab = _rows_of(rows, "holdout13_vocab_unique_numpy", "after")
    assert len(vocab) == 4 and all(r["top"] == "host_bound" and abs(r["err_pct"]) <= 25 for r in vocab), \
        [r["err_pct"] for r in vocab]
    # (+82% on the first host's default trace since its estimates read its quiet steps: its un-profiled step
    # is right now, 9.3 ms for 9.0 measured where it was 13.7, and the warm rest over-predicts the saving.)
    f1 = _rows_of(rows, "holdout13_multilabel_f1_numpy", "after")
    # (+22..+105% since the costs were refitted on the clean runs: the warm rest over-applies here.)
    # (+30..+124% since the loop's Python after the removed read runs cold, 2026-11-26; clean runs +15..+39%.)
    assert len(f1) == 4 and all(r["top"] == "sync_stall" and abs(r["err_pct"]) <= 125 for r in f1)
    assert sum(abs(r["err_pct"]) <= 50 for r in f1) >= 2
    knn = _rows_of(rows, "holdout13_knn_eval_cpu_torch", "after")
    assert len(knn) == 4 and all(r["top"] == "sync_stall" for r in knn)
    assert all(r["pred_range"][0] <= r["meas_speedup"] <= r["pred_range"][1] for r in knn)
    # (+25..+72% since the loop's Python after the removed read runs cold, 2026-11-26; clean runs -6..+21%.)
    assert all(abs(r["err_pct"]) <= 73 for r in knn), [r["err_pct"] for r in knn]


def test_the_twelfth_and_thirteenth_sets_on_two_more_hosts(rows):
    # Their seven workloads re-recorded on two more H100 hosts (21:46Z / 21:48Z) with the tool at 389e372,
    # after the changes those sets prompted, nothing changed after: 28 pair rows, 16 within 25%, 22 within
    # 50%, top finding 28 of 28, healthy 4 of 4; the un-profiled step within 15% on 20 of 28 traces, inside
    # its band on only 11 (these hosts ran the loops 13-21% slower than the estimate). Out of sample the
    # warm rest held for the np.unique table (-19..-12%) and not for the F1 scoring, a training step
    # (+44..+61%: without the rule -2..+8%); the k-NN eval's free GPU replacement stayed the worst
    # (+113..+243%; -1..+58% since its launches are counted).
    got = [r for r in pairs(rows) if r["run"].endswith("_rerun3")]
    assert len(got) == 28 and all(r["ok_top"] for r in got)
    errs = [abs(r["err_pct"]) for r in got]
    # (15 within 25% since the costs were refitted on the clean runs.)
    # (19 within 50% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    # (14 within 25% since the warm rest applies to the loop's thread only, 2026-11-26 later: the F1 scoring
    # +67..+77% -> +29..+65%, the np.unique table -14..-2% -> -25..-20%.)
    assert sum(e <= 25 for e in errs) >= 14 and sum(e <= 50 for e in errs) >= 19
    vocab = [r for r in got if r["workload"] == "holdout13_vocab_unique_numpy"]
    assert len(vocab) == 4 and all(abs(r["err_pct"]) <= 26 for r in vocab)
    healthy = [r for r in rows if r["run"].endswith("_rerun3") and r["kind"] == "healthy"]
    assert len(healthy) == 4 and all(r["ok_top"] for r in healthy)
    # The band widened afterwards for host work outside any event (deinflate.HOST_SPREAD, fitted on the
    # matrix's host-dominated traces, these included): 21 of 28 traces inside it, was 11.
    traces = {(r["run"], r["workload"], r["setting"]): r for r in rows if r["run"].endswith("_rerun3")}.values()
    # (20 since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    # (18 since 2026-11-28, when the band stopped at the GPU's profiled busy time, not 97% of it: the bf16
    # MLP's kernels ran 9% long under the profiler, 32.08 ms busy profiled for a 29.35 ms step without it.)
    assert sum(r["unprofiled_band_ms"][0] <= r["unprofiled_ms"] <= r["unprofiled_band_ms"][1] for r in traces) >= 18


def test_fourteenth_held_out_set(rows):
    # Committed (a2a880c) before it was recorded (an H200 and an H100 host, 01:18Z / 01:19Z), the tool at
    # a2a880c, where the host's reading of a copy by torch ops on CPU tensors first kept those ops' launches:
    # as recorded, within 25% on 8 of 12 rows, within 50% on 11, top finding right on 5. The misses: the AUC's
    # argsort read its 64 KB for longer than the reads rule let so few bytes take (host_bound first on three
    # rows; +47..+60% on the H200 host, its sort's 7 kernels counted as one), and top-5 accuracy in a
    # training loop, where the tool ranked launch_overhead (not measured there) above the sync.
    auc = _rows_of(rows, "holdout14_auc_sort_cpu_torch", "after")
    retrieval = _rows_of(rows, "holdout14_retrieval_mm_cpu_torch", "after")
    topk = _rows_of(rows, "holdout14_train_topk_acc_cpu_torch", "after")
    assert len(auc) == len(retrieval) == len(topk) == 4
    # (+21..+42% since the costs were refitted on the clean runs; within 25% before.)
    # (+51..+74% since the loop's Python after the removed read runs cold, 2026-11-26; on the clean runs
    # -18..+17%.)
    # (+71..+87% since a thread's stretch without launches counts before its first launch too, 3f38eca: the
    # first step's host work after the window opened is host work, which the sync's fix keeps.)
    assert all(r["top"] == "sync_stall" and abs(r["err_pct"]) <= 90 for r in retrieval), [r["err_pct"] for r in retrieval]
    # Since: the launches are counted from the op tree (41 for the k-NN's 38 more kernels, 27 for the AUC's
    # 23) and, with record_shapes, an op on the copied tensor's shape links its reader to the copy.
    # (The H200 host's default row +74% since the costs were refitted on the clean runs: host_bound first.)
    # (+94% on that row since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(r["top"] == "sync_stall" for r in auc) == 3 and all(abs(r["err_pct"]) <= 95 for r in auc)
    # The sync alone: 1.20x and 1.42x measured, 1.0-1.12x predicted with launch_overhead first; the graph the
    # tool ranked first measured 3.6-4.6x on the rerun hosts.
    assert all(r["top"] == "launch_overhead" and r["ok_top"] and abs(r["err_pct"]) <= 30 for r in topk)


def test_the_host_reading_of_a_copy_by_torch_ops_is_named_and_its_gpu_replacement_costed():
    # The k-NN eval scores with cdist/topk/mode on CPU tensors: the finding names them, counts the kernels
    # they launch on the GPU (41 by their op trees; the after trace has 38 more than the before) and the
    # plan's steps keep those kernels' GPU time under them.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h100_rerun4/"
                                     "holdout13_knn_eval_cpu_torch__before__default.json.gz"))
    f = d["findings"][0]
    assert f["kind"] == "sync_stall" and f["title"].startswith("The GPU idles while the host works on a result")
    assert "aten::cdist" in f["title"] and list(f["evidence"]["host_reading_ms_per_step"])[:2] == ["aten::cdist", "aten::topk"]
    assert 30 <= f["evidence"]["gpu_kernels_to_replace_the_host_reading_per_copy"] <= 50
    added = next(fx for fx in analyze_file(ROOT / "sample_traces/matrix/h100_rerun4/"
                                                  "holdout13_knn_eval_cpu_torch__before__default.json.gz").findings
                 if fx.kind == "sync_stall").fixes[0].replacement_gpu_us
    assert added > 0
    floor = d["whatif"]["kernel_busy_ms"] + added / 1000
    assert all(p["estimated_step_ms"] >= floor - 1e-3 for p in d["whatif"]["plan"])
    # A torch wrapper frame (torch._disable_dynamo's inner, Dynamo's _fn) is not the call named: what it called is.
    t = document(analyze_file(ROOT / "sample_traces/matrix/h200_rerun4/"
                                     "holdout14_train_topk_acc_cpu_torch__before__stack.json.gz"))
    h = next(x for x in t["findings"] + t["minor_findings"] if x["kind"] == "host_bound")
    names = [w["name"] for w in h["evidence"]["cpu_work_during_idle"]]
    assert any(n.startswith("zero_grad(), def at torch/optim/optimizer.py") for n in names), names
    # (a wrapper's own lines stay its own: Dynamo's _fn() keeps its 0.07 ms, after the calls)
    assert not any(n.startswith("inner(), def at torch/_compile.py") for n in names)
    assert not names[0].startswith("_fn(), def at torch/_dynamo"), names


def test_the_fourteenth_set_on_new_hosts(rows):
    # The fourteenth set, the k-NN eval and the argmax eval re-recorded (01:28Z-01:31Z) with the tool at
    # 67d750d, after the changes above, nothing changed before they were read: 36 pair rows, 17 within 25%, 34
    # within 50%, top finding 36 of 36 (train_topk's CUDA graph measured 3.6-4.6x, the tool's top finding).
    # Afterwards the warm rest took a result's pageable copy as host work too (the CPU stages it): the argmax
    # eval's 16 MB, -50..-28% -> -28..+11% on these hosts, in-sample.
    got = [r for r in pairs(rows) if r["run"].endswith("_rerun4")]
    assert len(got) == 36 and all(r["ok_top"] for r in got)
    errs = [abs(r["err_pct"]) for r in got]
    # (32 within 50% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(e <= 25 for e in errs) >= 17 and sum(e <= 50 for e in errs) >= 32
    graph = [r for r in got if r["variant"] == "after_graph"]
    # (One row ranks the sync first since the costs were refitted on the clean runs, still the right top.)
    assert len(graph) == 6 and sum(r["top"] == "launch_overhead" for r in graph) >= 5
    assert all(r["err_pct"] <= 50 for r in graph)


def test_fifteenth_held_out_set(rows):
    # Committed (ee94ecf) before it was recorded (an H200 and an H100 host, 02:09Z / 02:11Z), the tool at
    # 4f10439, nothing changed after: top finding right on 12 of 12, within 25% on 7, within 50% on 9. The
    # confusion-matrix eval with torch on CPU tensors -18..-2%; the quantiles in a training loop +6..+56%
    # (their op trees count 48 kernels a step where the GPU ran 20 more); 32 MB of logits copied to
    # pageable memory every batch to read 8 columns (22-29 ms a step, page faults on a fresh buffer each
    # time) is under-predicted (35-46x for 64-96x measured): the replay keeps 0.2 ms of host work a step
    # that went with the copy's buffer and the fixed step is small, so its error is large.
    got = [r for r in pairs(rows) if r["run"].endswith("_holdout15")]
    assert len(got) == 12 and all(r["ok_top"] and r["top"] == "sync_stall" for r in got)
    errs = [abs(r["err_pct"]) for r in got]
    # (4 within 25% since the costs were refitted on the clean runs: the quantiles +29..+73%.)
    # (8 within 50% since 2026-11-26: the ops' profiler cost scales with the host's op_factor, a graph leaves warm CPU work, the loop's Python after a removed read runs cold.)
    assert sum(e <= 25 for e in errs) >= 4 and sum(e <= 50 for e in errs) >= 8
    conf = [r for r in got if r["workload"] == "holdout15_confusion_cpu_torch"]
    # (+6..+57% since the loop's Python after the removed read runs cold, 2026-11-26: these runs' after steps,
    # launch-bound, ran with CUPTI attached; on the clean runs -29..-17%. +62% on the H100's with_stack row
    # since with_stack's built-in calls were costed apart from frames, 6156f17.)
    # (+70% on that row since a thread's stretch without launches counts before its first launch too, 3f38eca.)
    assert len(conf) == 4 and all(abs(r["err_pct"]) <= 72 for r in conf)
    # Every prediction's range holds its own point, and the big copy's fix is the biggest predicted win.
    sl = [r for r in got if r["workload"] == "holdout15_pageable_logits_slice"]
    assert all(r["pred_speedup"] >= 30 for r in sl)


def test_a_disturbed_host_is_said(rows):
    # The metrics loop on its third host: profiled steps of 10.7, 64.5, 20.3, 12.9 and 10.8 ms around the same
    # 0.96 ms of GPU work, measured 4.5 ms un-profiled: the trace cannot tell the program from the host,
    # so the report says its steps vary, and the estimates read the quiet steps (a disturbance only adds
    # time): the un-profiled step 10.8 -> 8.8 ms there, and 13.7 -> 9.3 ms (9.0 measured) for the F1 loop
    # whose host slowed after its second step. One slow step (a median it leaves alone) is not flagged.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    noisy = document(analyze_file(ROOT / "sample_traces/matrix/h100c_holdout12/"
                                         "holdout12_multi_item_metrics__before__default.json.gz"))
    assert any(x.startswith("Step times vary widely (10.7-64.5 ms over 5 steps)") for x in noisy["trace"]["limits"])
    # The quiet steps are named as steps: "(within 25% of the fastest: 5)" had read as a count of five.
    assert any("within 25% of the fastest: steps 3, 6, 7)" in x for x in noisy["trace"]["limits"])
    assert noisy["whatif"]["replayed_steps"] == [3, 6, 7] and noisy["whatif"]["unprofiled_step_ms"] < 9.5
    f1 = document(analyze_file(ROOT / "sample_traces/matrix/h100_holdout13/"
                                      "holdout13_multilabel_f1_numpy__before__default.json.gz"))
    assert abs(f1["whatif"]["unprofiled_step_ms"] - 9.010) / 9.010 <= 0.15     # measured 9.010 ms
    one = document(analyze_file(ROOT / "sample_traces/matrix/h200/dataloader_workers0__before__default.json.gz"))
    assert not any(x.startswith("Step times vary") for x in one["trace"]["limits"])
    # Steps that vary with the Python work of their batch (feature hashing of records of different sizes:
    # 2.4-3.9 ms around the same kernels) are not a disturbed host: its launch calls ran no slower in the
    # slow steps. Read on all steps, its un-profiled step is 3.24 ms (2.88 measured; 1.96 on the fast ones).
    calib = document(analyze_file(ROOT / "sample_traces/matrix/h200_calib/"
                                         "calib_python_features__before__default.json.gz"))
    assert not any(x.startswith("Step times vary") for x in calib["trace"]["limits"])
    assert abs(calib["whatif"]["unprofiled_step_ms"] - 2.876) <= 0.15 * 2.876
    # Steps of 3.2, 3.3, 7.6, 25.9 and 11.6 ms around 97-107 us of kernels (the k-NN eval on h100_rerun4): a
    # host disturbed for a while, not a rise (a rise does not fall back), and the same GPU work (within 10%
    # or 50 us). Its quiet steps put the un-profiled step at 3.0 ms (3.13 measured; 7.4 from all steps).
    knn = document(analyze_file(ROOT / "sample_traces/matrix/h100_rerun4/"
                                       "holdout13_knn_eval_cpu_torch__before__default.json.gz"))
    assert any(x.startswith("Step times vary widely (3.2-26.1 ms") for x in knn["trace"]["limits"])
    assert not any(x.startswith("Step times rise") for x in knn["trace"]["limits"])
    assert knn["whatif"]["replayed_steps"] == [3, 4] and abs(knn["whatif"]["unprofiled_step_ms"] - 3.132) <= 0.15 * 3.132


def test_the_plan_says_how_many_loader_workers_keep_up_and_shows_a_prerequisites_fix(tmp_path):
    # DataLoader(num_workers=0): moving 16 ms of loading per batch into workers keeps a 4.5 ms step fed only
    # with enough of them, and every later fix that shortens the step needs more (expert review: the
    # plan ran to 0.46 ms, which ~35 workers could feed, without saying so). Each batch is also handed back
    # to the loop (fixes.loader_pace): the count is more than loading / step, said where it is first needed
    # and where a later fix raises it, and no step in the plan is shorter than the advised count's pace.
    from traceinsight.analyses.fixes import ADVISED_WORKERS, loader_pace
    from traceinsight.cli.common import analyze_and_write
    (r,) = analyze_and_write([ROOT / "sample_traces/matrix/h100_holdout12/"
                                     "holdout12_loader_workers0_resize__before__stack.json.gz"])
    plan = r.doc["whatif"]["plan"]
    ev = r.doc["findings"][0]["evidence"]
    loading, mb = ev["loading_ms_per_batch_unprofiled"] * 1000, ev["batch_mb"]
    # (with_stack recorded the Dataset's Python: its cost is out of the loading; 48 images of 3 x 112 x 112)
    assert 0 < loading < ev["idle_ms_per_step"] * 1000 and abs(mb - 48 * 3 * 112 * 112 * 4 / 1e6) < 0.1
    assert plan[0]["kind"] == "host_bound" and len(plan) >= 2
    assert plan[0]["loader_workers_needed"] > math.ceil(loading / 1000 / plan[0]["estimated_step_ms"])
    said = [p for p in plan if p["loader_workers_needed"]]
    assert said[0] is plan[0] and [p["loader_workers_needed"] for p in said] == sorted({p["loader_workers_needed"]
                                                                                       for p in said})
    for p in plan:
        t, n = p["estimated_step_ms"] * 1000, p["loader_workers_needed"]
        assert t >= loader_pace(loading, mb, ADVISED_WORKERS) - 1.0
        if n:
            assert loader_pace(loading, mb, n) <= t + 1.0 and (n == 1 or loader_pace(loading, mb, n - 1) > t - 1.0)
    # A sync that costs little alone but blocks the CUDA graph (a nonzero mid-step, launches after it): the plan
    # puts it first, says the graph needs it, and shows its fix.
    md = tmp_path / "r.md"
    analyze_and_write([ROOT / "sample_traces/matrix/h100/sync_and_small_kernels__before__default.json.gz"],
                      markdown=md)
    assert "`sync_stall`, needed first: Remove the host-device syncs" in md.read_text()
    # A loss.item() after the step's last kernel (then numpy work and a copy): a graph of the step does not need
    # it gone, so the plan still lists it first but only as a help, never "needed".
    md = tmp_path / "edge.md"
    analyze_and_write([ROOT / "sample_traces/matrix/h100/sync_then_host_work__before__default.json.gz"], markdown=md)
    text = md.read_text()
    assert "`sync_stall`, first in the plan: Remove the host-device syncs" in text and "needed by" not in text


# ---- the clean runs: the whole matrix with CUPTI torn down after each profiler session -------------------

def test_the_clean_runs_figures(clean_rows):
    # The whole matrix recorded again (8ea966b, 2026-11-26) with TEARDOWN_CUPTI=1: *_cleanA/B on an H200 and an
    # H100 host, the profiler costs refitted on them (in-sample for the un-profiled step; the fixes' estimates
    # were not fitted to them): 260 of 344 within 25%, 322 within 50%, un-profiled within 15% on 82% of rows.
    # *_clean2A/B on two more hosts, read only once the model was in place (held out): 240, 316, top 316
    # (92%), un-profiled 71% of rows (224 of 296 traces). Healthy: 32 of 32 on each pair of runs since the
    # healthy verdict reads the un-profiled idle (3 with_stack traces of GPU-bound conv nets were 40% idle
    # profiled, 5% measured without the profiler).
    # Since 2026-11-26 (op_factor, a graph's warm leftovers, the cold top of a step after a removed read; two
    # fixes measured within 2% of each other both count as the one that helps most): fitted 270, 324, top 321,
    # un-profiled 312 of 376 traces; *_clean2 (no longer held out: read while making those changes) 257, 321,
    # 324, 277. *_clean3: a third H100 host (the matrix twice), recorded after those changes were committed
    # and read with them: 251, 313, top 311, un-profiled 292 of 376 (the session's starting model: 243, 319,
    # 315, 290).
    # The H200 host of *_clean3 (read with 6049c2f): with it, 369 of 516, 464, top 472, un-profiled 434 of 564.
    from validate_matrix import clean_set
    # Sets 1 (fitted), 2 and 3 (validate_matrix.clean_set); the fixes measured later, sets 4 and up, have
    # their own tests below.
    groups = {1: (0.76, 0.8, 0.9), 2: (0.72, 0.7, 0.9), 3: (0.7, 0.75, 0.89)}
    for group, (w25, de15, w50) in groups.items():
        runs = [r for r in clean_rows if clean_set(r["run"]) == group]
        got = pairs(runs)
        assert len(got) >= 340
        errs = [abs(r["err_pct"]) for r in got]
        assert sum(e <= 25 for e in errs) >= w25 * len(errs), (group, sum(e <= 25 for e in errs))
        assert sum(e <= 50 for e in errs) >= w50 * len(errs), (group, sum(e <= 50 for e in errs))
        assert sum(r["ok_top"] for r in got) >= 0.9 * len(got)
        de = [abs(r["deinflated_err_pct"]) for r in runs]
        assert sum(e <= 15 for e in de) >= de15 * len(de), (group, sum(e <= 15 for e in de), len(de))
    # Physics: no finding claims more than the un-profiled idle; healthy workloads called healthy.
    assert not any(r["over_idle"] for r in clean_rows)
    healthy = [r for r in clean_rows if r["kind"] == "healthy"]
    # The one miss: the conv net fed by DataLoader workers, which on the other hosts was not fed in time (19-41%
    # idle measured) and on the third H200 host was (4% idle over the timed steps), while in its profiled
    # window the workers fell behind (13.9-15.0 ms steps for 9.2 ms un-profiled): host_bound is what that
    # window shows; the trace cannot tell that the workers kept up later.
    # The second: the fortieth set's ResNet-50 on 44C's default trace, launch_overhead at 0.91 ms (3.1% of its
    # un-profiled step, just over the 3% bar; likely -0.63..3.43 ms), where its other seven traces read healthy.
    # The third: the forty-first set's ViT-B (bf16, fused AdamW) on three traces whose measured un-profiled idle is
    # 4-5%, led by fusion_candidates or launch_overhead; compiling it measured 1.06-1.17x (h200_clean47A-B).
    # The fourth: the forty-eighth set's tagger (4 x 512, a fp32 loss over 16,384 x 4,000 logits) on the two hosts
    # whose measured idle is 5%, led by fusion_candidates (about 23%, unmeasured: fusion_tagger_compile not recorded).
    # The fifth: the fiftieth set's bucketed audio classifier on h100_clean60's default traces (1-2% idle measured),
    # launch_overhead at 0.31 ms (4% of its un-profiled step, over the 3% bar), after its cuDNN transposes around Conv1d
    # stopped claiming a saving (that rewrite measured slower, h100_clean61A-B).
    # The sixth: the fifty-second set's control, the checkpointed 6 x 768 tagger evaluated under no_grad (3-4% idle
    # measured), led by fusion_candidates on 7 of its 8 traces (unmeasured; the registration allowed a fusion finding:
    # the same eager model's training step measured 1.36x compiled in the fifty-first set).
    # The seventh: the fifty-third set's control, a 6 x 512 LM fed from pinned memory (5% idle measured), on two default
    # traces: launch_overhead at 0.60 ms (3% of its un-profiled step; its profiled step, 33.6 ms against 20.3, is
    # CPU-bound on that host) and fusion_candidates (unmeasured). No pageable, host-built or sync finding on any.
    # The eighth: the fifty-fourth set's control (an LM over 15 x 509 tokens, 4.8% idle measured) on h100_clean68A's
    # default trace: launch_overhead at 0.52 ms (3.3% of its un-profiled step, over the 3% bar; likely -1.5..0.68 ms),
    # its host's CPU slower in that window (cudaLaunchKernel median 5.6 us against 4.6-4.9 on clean67's host).
    # The ninth: the fifty-fifth set's control (a float32 MLP summing two metrics in float64, 3% idle measured) on
    # h100_clean69B's with_stack trace: no finding, but its profiled step (4.35 ms against 3.78 on clean69A) puts the
    # top of its un-profiled band at 2.99 ms, 26% idle against the 25% a healthy verdict allows; and on h100_clean69C's
    # with_stack trace (4% idle measured), launch_overhead at 0.11 ms (5% of its un-profiled step, estimated +1%).
    missed = {(r["run"], r["workload"]) for r in healthy if not r["ok_top"]}
    assert len(healthy) >= 90 and missed <= {*((f"h100_clean60{x}", "holdout50_bucketed_audio_healthy") for x in "ABCD"),
                                             *((f"h100_clean65{x}", "holdout52_ckpt_eval_healthy") for x in "ABCD"),
                                             *((f"h100_clean66{x}", "holdout53_pinned_feed_healthy") for x in "BD"),
                                             ("h100_clean55B", "holdout48_seq_loss_healthy"),
                                             ("h100_clean68A", "holdout54_odd_tokens_healthy"),
                                             ("h100_clean69B", "holdout55_fp64_metric_healthy"),
                                             ("h100_clean69C", "holdout55_fp64_metric_healthy"),
                                             ("h100_clean55C", "holdout48_seq_loss_healthy"),
                                             ("h200_clean3B", "holdout11_healthy_fed_convnet"),
                                             ("h200_clean44C", "holdout40_timm_resnet50_bf16_healthy"),
                                             ("h200_clean46B", "holdout41_timm_vit_base_bf16_healthy"),
                                             ("h200_clean46D", "holdout41_timm_vit_base_bf16_healthy")}, missed


def test_loading_moved_into_n_workers_is_estimated_for_n(clean_rows):
    # DataLoader(num_workers=0) -> 4, 8 or 12 workers (dataloader_workers0, holdout4, holdout12 on the clean
    # hosts): the report's estimate for the count measured (host_bound's num_workers=N alternatives). Taken
    # as workers that keep up, 31 of these 62 were within 25% and holdout4 read up to +163%: 4 workers ran
    # 1.0-2.4x slower per batch than the loop did. With each batch's hand-off (fixes.LOADER_MS_PER_MB,
    # fitted on these rows, so in-sample here) 49.
    loaders = {"dataloader_workers0", "holdout4_numpy_dataset_workers0", "holdout12_loader_workers0_resize"}
    got = [r for r in pairs(clean_rows) if r["workload"] in loaders and "_clean14" not in r["run"]]
    # (scored at the count measured, or at the fix as advised where the report finds that count the same)
    # (With h200_clean34A, the thirty-fourth set's fresh H200 host, 72 rows: its ten 8 within 25%, the two
    # as-advised rows of holdout4 -33% and -36%.)
    assert len(got) == 72 and {r["option"] for r in got} == {"num_workers=4", "num_workers=8", "num_workers=12", None}
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 55, sorted(r["err_pct"] for r in got)
    assert sum(abs(r["err_pct"]) <= 50 for r in got) >= 66


def test_the_seventeenth_set_held_out_for_the_workers_hand_off(clean_rows):
    # DataLoader loops of other kinds (a Python tokenizer, a numpy STFT, torch CPU resizing; 2, 4 or 8 workers)
    # on two fresh H100 leases, read with the hand-off model as committed (96baf23): 22 of 28 within 25%, top
    # right on 24 (the tokenizer with stacks ranks launch_overhead first). holdout4 on the third host: 4 of 4.
    got = [r for r in pairs(clean_rows) if r["run"] in ("h100_clean14B", "h100_clean14C")]
    assert len(got) == 28 and all(r["option"] for r in got if r["workload"] in (
        "holdout17_loader_spectrogram", "holdout17_loader_torch_cpu_resize"))
    # (21 since the loading is taken per step, 626032d: the tokenizer's with_stack row with 2 workers on 14B
    # -6% -> +37%. Its loading went from 11.1 to 7.2 ms a batch, about 6.8 measured; the old figure's excess
    # had stood in for workers that run slower than the loop. On the H200 host the same row +31% -> +9%.)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 21, sorted(r["err_pct"] for r in got)
    assert sum(abs(r["err_pct"]) <= 50 for r in got) >= 26
    assert sum(r["ok_top"] for r in got) >= 24
    assert all(abs(r["err_pct"]) <= 25 for r in got if r["workload"] == "holdout4_numpy_dataset_workers0")
    # An H200 host (h200_clean14D, read with c29bd6f) whose workers handed batches back at 0.7-0.85 ms per MB:
    # 9 of 16, top 14 (holdout12's four rows +37..+78%).
    h200 = [r for r in pairs(clean_rows) if r["run"] == "h200_clean14D"]
    assert len(h200) == 16 and sum(abs(r["err_pct"]) <= 25 for r in h200) >= 9 and sum(r["ok_top"] for r in h200) >= 14


def test_fewer_workers_save_less_and_never_more_than_the_fix_as_advised():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h100_cleanB/"
                                     "holdout4_numpy_dataset_workers0__before__default.json.gz"))
    f = d["findings"][0]
    assert f["kind"] == "host_bound"
    alts = {a["option"]: a for a in f["alternatives"]}
    assert {"num_workers=2", "num_workers=4", "num_workers=8"} <= set(alts)
    saved = [alts[f"num_workers={n}"]["estimated_savings_ms"] for n in (2, 4, 8, 12, 16) if f"num_workers={n}" in alts]
    assert saved == sorted(saved) and saved[-1] <= f["estimated_savings_ms"] + 1e-3
    # Each a range (how evenly workers scale on the host), holding its point.
    assert all(a["savings_range_ms"][0] <= a["estimated_savings_ms"] <= a["savings_range_ms"][1] for a in alts.values())
    # The advice gives what the count rests on (7.6 ms of loading with the profiler's cost out, a 4.9 MB batch);
    # the plan gives the count: 16 workers (the most advised) still leave the 2 ms hand-off of each batch at
    # 0.4 ms per MB, longer than the rest of the un-profiled step, so more help little (loading / rest took 3).
    assert "7.6 ms of loading per batch" in f["fix"] and "4.9 MB batch" in f["fix"]
    row = d["whatif"]["plan"][0]
    assert row["kind"] == "host_bound" and row["loader_workers_needed"] == 16
    assert abs(row["loader_handoff_ms"] - 0.4 * f["evidence"]["batch_mb"]) < 0.01
    assert all(r["loader_workers_needed"] is None for r in d["whatif"]["plan"][1:])   # said once
    # The hand-off is the range (0.2-1.1 ms per MB) of the fix as advised, and of each count.
    lo, hi = f["savings_range_ms"]
    assert lo < f["estimated_savings_ms"] <= hi and "hence the range" in f["estimate_method"]
    assert f["estimated_savings_ms"] >= saved[-1]


def test_removing_a_sync_alone_is_measured_as_the_tool_says_once_cupti_is_detached(clean_rows):
    # The earlier runs measured the sync fix alone slower in launch-bound steps (0.58-0.88x): their fixed
    # variant was timed after the first variant's profiler sessions, CUPTI still attached. Clean, on four
    # hosts: 0.92-1.23x, and the tool's 1.0-1.17x; the tool's top is the CUDA graph (launch_overhead), the
    # sync its prerequisite.
    got = [r for w in ("holdout3_grad_clip_item", "holdout11_masked_select_loss")
           for r in pairs(clean_rows) if r["workload"] == w and r["variant"] == "after"]
    # (The third clean hosts, *_clean3: 0.94-1.29x measured, the tool 1.0-1.18x; *_clean4, masked_select
    # again on three H100 hosts: 1.06-1.18x. One more H100 host, *_clean5A, measured 1.58x where the tool
    # said 1.12x: its un-profiled step with the masked_select was 3.1 ms, 2.4-2.7 ms on the others. And
    # *_clean8A measured 0.87x where the tool said 1.16-1.18x: its fixed step's blocks ran 1.77-2.47 ms.)
    # (*_clean13A, the record path's first host: 0.89x and 1.00x measured, the tool 1.00x and 1.18x.)
    # (h200_clean34A, a fresh H200 host: 1.02x and 1.24x measured, the tool -2% and -12..-13% off.)
    assert len(got) == 46
    assert all(0.85 <= r["meas_speedup"] <= 1.6 for r in got), [r["meas_speedup"] for r in got]
    off = [(r["run"], r["err_pct"]) for r in got if abs(r["err_pct"]) > 25]
    assert all(run in ("h100_clean5A", "h100_clean8A") and abs(e) <= 40 for run, e in off) and len(off) <= 4, off
    assert all(r["top"] == "launch_overhead" for r in got)


def test_a_pinned_copy_off_the_critical_path_still_takes_its_copy_engine_time(clean_rows):
    # holdout2_d2h_features: 33.5 MB a step to the host; the fix (pinned buffers, a side stream) still copies
    # them every step, 0.61 ms at 55 GB/s. The estimate once dropped the copy with its wait: +94..+168%; now
    # the plan's floor is the pinned copies' time.
    got = [r for r in pairs(clean_rows) if r["workload"] == "holdout2_d2h_features"]
    # The first fixed variant ("after") waited for the previous copy before launching the model, so each
    # copy still ran between two steps' compute (0.97-1.16 ms measured for kernels of 0.35 and a copy of
    # 0.61): not the advice, which reads the copy a step later. Measured as advised (after_overlap, four
    # H100 hosts of *_clean4/5, and 3.9x on *_clean8A): 0.62 ms, and the estimate within 15%.
    serial = [r for r in got if r["variant"] == "after" and not slow_staging(r)]
    overlap = [r for r in got if r["variant"] == "after_overlap" and not slow_staging(r)]
    # (h200_clean34A, a fresh H200 host: the serial fix -1%, as advised -10% and -7%.)
    assert len(serial) == 26 and all(r["err_pct"] <= 75 for r in serial), [r["err_pct"] for r in serial]
    assert len(overlap) == 12 and all(abs(r["err_pct"]) <= 15 for r in overlap), [r["err_pct"] for r in overlap]
    assert all(r["meas_speedup"] > 1.5 * s["meas_speedup"] for r in overlap for s in serial if s["run"] == r["run"])
    # Four more H100 runs (*_clean10 and *_clean12A, after the staged dispatch point moved to 1.25x): -15..+25%.
    later = [r for r in got if r["variant"] == "after_overlap" and slow_staging(r)]
    assert len(later) == 8 and all(abs(r["err_pct"]) <= 30 for r in later), [r["err_pct"] for r in later]
    from traceinsight.report.analyze import analyze_file
    a = analyze_file(ROOT / "sample_traces/matrix/h200_cleanA/holdout2_d2h_features__before__default.json.gz")
    f = next(f for f in a.findings if f.kind == "pageable_memcpy")
    assert a.whatif["unprofiled_step_ms"] - f.estimated_savings_us / 1000 >= a.whatif["pinned_copy_ms"] - 1e-3
    assert 0.6 <= a.whatif["pinned_copy_ms"] <= 0.75


def test_a_copy_the_host_cannot_have_read_gets_the_copy_not_made_as_its_own_option(clean_rows):
    # holdout15_pageable_logits_slice copies 33.5 MB of logits to the host a step to sum 8 of 4096 columns;
    # summed on the GPU, the step ran 9-11x faster (clean runs). The host's time after each copy could read
    # 14-20% of it at most, so the pageable finding estimates the copy not made as an option of its own
    # (copy_result_only) beside its advice, the pinned copy: a loop that keeps every copy for later looks the
    # same (holdout2_d2h_features, 3.9-5.1x), so the option is never the advice's point.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    from traceinsight.render.sections import alternatives
    sl = [r for r in pairs(clean_rows) if r["workload"] == "holdout15_pageable_logits_slice" and not slow_staging(r)]
    assert sl and all(8.5 <= r["meas_speedup"] <= 12 for r in sl)
    # The *_clean10 and *_clean12A hosts staged the copy 10x slower (24-38 ms a step; 59-83x once it went):
    # there the host's wait is most of the step, and the tool names the sync.
    slow = [r for r in pairs(clean_rows) if r["workload"] == "holdout15_pageable_logits_slice" and slow_staging(r)]
    assert len(slow) == 8 and all(r["meas_speedup"] > 50 and r["kind"] == "sync_stall" and r["ok_top"] for r in slow)
    a = analyze_file(ROOT / "sample_traces/matrix/h100_clean3B/holdout15_pageable_logits_slice__before__default.json.gz")
    f = next(f for f in a.findings if f.kind == "pageable_memcpy")
    assert f.evidence["host_reads_at_most_pct_of_the_copy"] < 25 and f.fix.startswith("Within the step")
    step = a.whatif["unprofiled_step_ms"]
    opt = {k: us for k, _w, us, _range, _likely in f.alternative_savings_us}
    assert set(opt) == {"pin_and_wait", "copy_result_only"}
    assert opt["pin_and_wait"] < f.estimated_savings_us < opt["copy_result_only"] < step * 1000
    # Scored against it (validate_matrix's SAME_FIX): every clean row with default options within 30% of the
    # measured speed-up (the rest of the step's dispatch, slowed 1.0-1.5x by the staging, taken at 1.25x; at
    # 1.0x they read -24..-40%), the top finding right; the pinned copy alone would read 3-4x against 9-11x.
    assert all(r["option"] == "copy_result_only" and r["ok_top"] and abs(r["err_pct"]) <= 30
               for r in sl if "_clean" in r["run"] and r["setting"] == "default"), [r["err_pct"] for r in sl]
    assert 3 <= step / (step - f.estimated_savings_us / 1000) <= 4
    # Not staging 33.5 MB a step through the CPU, the rest of the dispatch may run up to 1.5x faster (the
    # advice's range): the option's range reaches the measured speed-up, its point is the range's middle.
    doc = document(a)["findings"][0]
    (cro,) = [x for x in doc["alternatives"] if x["option"] == "copy_result_only"]
    top = step / (step - cro["savings_range_ms"][1])
    assert 8.5 <= top <= 11, top
    text = alternatives(doc)
    assert "not the whole result (if the host needs only part of it): saves about" in text
    assert "; estimate, more than the fix as advised)" in text
    # The advice's own range (the same dispatch range) ends at the pinned copies' floor at both ends: no
    # range, and no note that there is one.
    assert f.savings_bound_us is None and "hence the range" not in f.estimate_note
    # The pinned copy's advice places the wait for it after the next step's launches: holdout2_d2h_features
    # measured 2.4-3.0x with the wait at the top of the step (copy and compute serialised), 3.9-5.1x after.
    assert "only after the next step's work is launched" in f.fix
    # A copy the host reads whole (numpy argmax over 3.3 MB of probabilities) gets no such option.
    b = analyze_file(ROOT / "sample_traces/matrix/h100_clean3A/eval_to_numpy_large__before__default.json.gz")
    g = next(f for f in b.findings + b.minor_findings if f.kind == "pageable_memcpy")
    assert "host_reads_at_most_pct_of_the_copy" not in g.evidence and not g.fix.startswith("Within")
    assert "copy_result_only" not in [k for k, _w, _fx in g.alternatives]


def test_the_fixes_ranked_first_were_measured_and_help_most(clean_rows):
    # calib_python_features and holdout11_masked_select_loss: the tool ranks launch_overhead first (after the
    # sync, for masked_select), and only the kind's own fix had been measured. Measured on three H100 hosts
    # (*_clean4): the whole step as one CUDA graph gained 2.0-2.6x (the hashing kept in the step) and
    # 2.0-2.3x (float mask, then the graph) against 1.3-1.7x and 1.06-1.18x for the kind's own fix.
    rows = [r for r in pairs(clean_rows) if re.search(r"_clean4[A-Z]$", r["run"])]     # (not h200_clean41A-D)
    graph = [r for r in rows if r["variant"] in ("after_graph", "after_graph_only")]
    assert len(graph) == 12
    for r in graph:
        own = next(o for o in rows if o["run"] == r["run"] and o["workload"] == r["workload"]
                   and o["setting"] == r["setting"] and o["variant"] == "after")
        assert r["meas_speedup"] > 1.15 * own["meas_speedup"], (r["run"], r["workload"])
        assert r["best_fix"].endswith("launch_overhead") and r["top"] == "launch_overhead" and r["ok_top"]
    # The masked-select plan (sync, then graph) is estimated within 25% on five of six rows (+35% with
    # with_stack on one host); the graph with the hashing kept is within 25% with default options and
    # over-predicted with with_stack (the hashing's stretch is 85-90% profiler: see deinflate.PY_CALL_FLOOR_US).
    ms = [r for r in graph if r["workload"] == "holdout11_masked_select_loss"]
    assert sum(abs(r["err_pct"]) <= 25 for r in ms) >= 5 and all(abs(r["err_pct"]) <= 50 for r in ms)
    cp = [r for r in graph if r["workload"] == "calib_python_features" and r["setting"] == "default"]
    assert all(abs(r["err_pct"]) <= 30 for r in cp), [r["err_pct"] for r in cp]


def test_a_stretch_of_python_calls_keeps_their_own_cost_when_the_profiler_is_taken_out():
    # Pure-Python feature hashing recorded with with_stack: ~7000 Python events in a 6.1 ms stretch that runs
    # 0.6-1.5 ms un-profiled. The per-event cost (1.05 us on this host) once took all of it out, and a CUDA
    # graph of the step then looked like it removed the hashing. The cut leaves 0.065 us a call at least.
    import numpy as np

    from traceinsight.estimate import deinflate, replay
    from traceinsight.estimate.graph import build_graph, step_window
    from traceinsight.trace.host import HostActivity
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    m = build_model(load_trace(ROOT / "sample_traces/matrix/h100_clean4C/calib_python_features__before__stack.json.gz"))
    c = replay.Compiled(build_graph(m, HostActivity(m), step_window(m)))
    edge, _call = deinflate.profiler_cuts(m, c)
    py = np.sort(m.cpu["ts"].to_numpy()[(m.cpu["kind"] == "python").to_numpy()])
    hashing = 0
    for i in c.cpu_idx:
        p = c.cpred[i]
        if p < 0 or c.ts[i] - c.end[p] < 3000:
            continue
        a, b = c.end[p], c.ts[i]
        calls = np.searchsorted(py, b, "right") - np.searchsorted(py, a, "right")
        if calls < 5000:
            continue
        hashing += 1
        kept = (b - a) - edge[i]
        # (The stretch also holds the profiler's own step() between two ProfilerStep ranges, ~90 us, which
        # goes whole.)
        assert kept >= deinflate.PY_CALL_FLOOR_US * calls - 150 and 0.3e3 <= kept <= 1.5e3, (kept, calls)
    assert hashing >= 4


def test_a_short_window_on_worker_fed_batches_says_what_it_cannot_show():
    # holdout11_loader_two_workers: 5 profiled steps of 3.3-4.4 ms in which the loop hardly waited (0.06 ms a
    # step), 7.2 ms measured without the profiler: two workers could not keep up, and the batches they had
    # prefetched hid it. The trace cannot show the workers' pace; the report says so.
    from traceinsight.report.facts import limits
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model

    def said(path):
        m = build_model(load_trace(ROOT / "sample_traces/matrix" / path))
        return [x for x in limits(m) if "DataLoader worker processes" in x]
    got = said("h100_clean3B/holdout11_loader_two_workers__before__default.json.gz")
    assert len(got) == 1 and "only 5 complete steps were profiled" in got[0] and "prefetch" in got[0], got
    # A loop that prepares its own batches (num_workers=0) has nothing hidden from the trace.
    assert not said("h100_clean3B/holdout4_numpy_dataset_workers0__before__default.json.gz")
    assert not said("h100_clean3A/launch_tiny_conv__before__default.json.gz")


def test_healthy_reads_the_unprofiled_idle():
    # with_stack on a slower host stretched a GPU-bound conv net's CPU past its GPU work: 40% idle profiled,
    # 4.7% idle as measured without the profiler. Healthy, and the verdict gives both figures; an estimate
    # is read at the top of its band (one that took too much out would hide real idle), and says so.
    from traceinsight.report.analyze import analyze_file, verdict
    a = analyze_file(ROOT / "sample_traces/matrix/h200_clean2A/healthy_convnet__before__stack.json.gz")
    assert a.healthy
    v = verdict(a)
    assert v.startswith("Healthy: the GPU is busy 60% of each step") and \
        "at least 79% without the profiler, by the top of the estimate's band" in v, v
    # Launch-bound steps stay not healthy, however much the profiler inflated them.
    for p in ("h100_cleanA/launch_tiny_conv__before__stack", "h200_cleanB/holdout3_grad_clip_item__before__stack"):
        assert not analyze_file(ROOT / f"sample_traces/matrix/{p}.json.gz").healthy


def test_a_graph_with_the_sync_at_the_step_end_kept(clean_rows):
    # The step in a CUDA graph with its per-step sync after the last launch kept (after_graph_only), recorded
    # after the tool stopped calling such a sync what the graph needs first (*_clean9*, 3 H100 runs, the
    # workloads committed at b3faee9 before they were recorded). The graph alone is scored against
    # launch_overhead's own estimate: 13 of 18 rows within 25%, 17 within 50%; item_logging's graph alone
    # measured 6.7-8.9x against 7.4-9.8x with the .item() gone too.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h100_clean9") and r["variant"] == "after_graph_only"]
    assert len(got) == 18 and all(r["kind"] == "launch_overhead" for r in got)
    errs = [abs(r["err_pct"]) for r in got]
    # (12 within 25% since with_stack's built-in calls were costed apart from frames, 6156f17: item_logging's
    # with_stack row on 9C +24.1% -> +25.4%.)
    assert sum(e <= 25 for e in errs) >= 12 and sum(e <= 50 for e in errs) >= 17
    assert all(r["ok_top"] for r in got)
    # Where the scoring on the host's CPU takes the step (9B's topk: 8.0 ms), the graph alone measured 1.00x
    # and the tool ranks the sync first.
    slow = [r for r in got if r["run"] == "h100_clean9B" and r["workload"].startswith("holdout14")]
    assert len(slow) == 2 and all(r["top"] == "sync_stall" and r["meas_speedup"] <= 1.01 for r in slow)


def test_a_builtin_call_costs_the_profiler_less_than_a_python_frame(clean_rows):
    # with_stack records every call; a C built-in's (len, dict.get, list.append) cost less than a frame's on
    # the tokenizers' traces (0.31-0.46 us against one figure of 0.70-0.83), and one cost for both took their
    # tokenizing out of the un-profiled step, ranking launch_overhead above the loading (6156f17).
    from traceinsight.trace.profiler_cost import BUILTIN_CALL_SHARE, event_classes
    from validate_matrix import model_of
    m = model_of(ROOT / "sample_traces/matrix/h100_clean14B/holdout17_loader_text_python__before__stack.json.gz")
    cost = {k: (int(rows.sum()), us) for k, rows, us in event_classes(m)}
    assert cost["python_c"][0] > 30 * cost["python"][0]      # len / append / get: the tokenizer's calls
    assert cost["python_c"][1] == pytest.approx(BUILTIN_CALL_SHARE * cost["python"][1])
    # The tokenizers' with_stack rows (moved to workers) now rank the loading first on 12 of 15 (with one cost:
    # 1 of the 13 recorded then; 11 of 15 until the first profiled step's tokenizing counted as host work).
    tok = [r for r in pairs(clean_rows) if r["setting"] == "stack" and r["variant"] == "after" and r["workload"] in (
        "holdout2_tokenize_main", "holdout17_loader_text_python")]
    # (17 and 14 with h200_clean34A, a fresh H200 host, which ranks the loading first on both.)
    assert len(tok) == 17 and sum(r["top"] == "host_bound" for r in tok) >= 14, [(r["run"], r["top"]) for r in tok]
    # Held out (the eighteenth set, pre-registered at f3fdb7e, and the tokenizer on two fresh leases, 20 rows):
    # top finding right on 17 (15 with one cost), within 25% on 9 (8), within 50% on 13 (13) as committed;
    # 19, 10 and 14 once a thread's stretch without launches before its first one counted as host work.
    held = [r for r in pairs(clean_rows) if r["run"] in ("h200_clean15A", "h100_clean15B")]
    errs = [abs(r["err_pct"]) for r in held]
    assert len(held) == 20 and sum(r["ok_top"] for r in held) >= 19
    assert sum(e <= 25 for e in errs) >= 10 and sum(e <= 50 for e in errs) >= 14, sorted(errs)


def test_work_before_a_threads_first_launch_is_host_work():
    # The window opened on the first profiled step's tokenizing: 20.8 ms of Python (and tiny torch.tensor ops)
    # on the loop thread before any GPU work, which had been called launch overhead because a stretch without
    # launches counted only between two launches; the same work in the later steps was host work.
    from traceinsight.analyses.attribution import attribute_gaps
    from traceinsight.trace.host import HostActivity
    from validate_matrix import model_of
    m = model_of(ROOT / "sample_traces/matrix/h100_clean15B/holdout2_tokenize_main__before__stack.json.gz")
    gaps = attribute_gaps(m, HostActivity(m))
    first = gaps[gaps["step"] == m.steps["step"].min()].sort_values("start").iloc[0]
    assert first["dur"] > 15_000 and first["host_bound"] > 0.9 * first["dur"], first.to_dict()


def test_the_loading_without_the_profiler_fits_in_the_unprofiled_step():
    # The tokenizer's with_stack window has one step the host disturbed (72 ms among 37-38 ms ones): one share
    # of profiler time over the whole window, taken off the median step, had left 11.1 ms of loading a batch
    # in a 10.6 ms un-profiled step (an expert review). Per step: 7.2 ms (measured: 9.2 ms a step, 2.4 with
    # 8 workers).
    from traceinsight.report.analyze import analyze_model
    from traceinsight.report.document import document
    from validate_matrix import model_of
    d = document(analyze_model(model_of(
        ROOT / "sample_traces/matrix/h100_clean14B/holdout17_loader_text_python__before__stack.json.gz")))
    ev = next(f for f in d["findings"] if f["kind"] == "host_bound")["evidence"]
    assert 5.0 < ev["loading_ms_per_batch_unprofiled"] < d["summary"]["unprofiled_step_ms"] - 2.0, ev


def test_the_likely_range_holds_most_measured_fixes(clean_rows):
    # Each validated kind's estimate gets the band that held 8 in 10 of our measured fixes of programs it was
    # not fitted on (estimate/likely.py, fitted by fit_likely.py on every clean set), joined with the replay's
    # own range. Held out by program: each program's rows against the band fitted without it.
    import fit_likely
    usable = [r for r in clean_rows if fit_likely.usable(r)]
    inside, n, _unvalidated = fit_likely.leave_one_program_out(usable)
    # (1,255 of 1,557 on 2026-11-29, with the 7th-93rd percentile; the 10th-90th held 72% on 2026-11-27.)
    assert n >= 1200 and inside >= 0.78 * n
    # The reports quote the figure of the committed table, which is this one (fit_likely.py --write keeps both).
    from traceinsight.estimate.likely import HELD_OUT
    assert f"held {inside:,} of {n:,} rows" in HELD_OUT
    # Every kind that keeps a band holds most of its own rows; one that does not is not validated.
    from traceinsight.estimate.likely import SPREAD, VALIDATED
    kinds, pooled, own = fit_likely.fit(usable)
    # (layout_permute's fixes spread too far for a band, 23 of 34 inside, until batch norm counted: 2026-11-29.)
    assert set(kinds) == set(VALIDATED) and "layout_permute" in VALIDATED and not SPREAD
    for k in kinds:
        rs = [r for r in usable if r["kind"] == k]
        assert sum(fit_likely._inside(r, pooled, own) for r in rs) >= fit_likely.MIN_KIND_COVERAGE * len(rs)
    # In the reports, where it was fitted on every row (1,058 of 1,224). Since every range stops at what the fix
    # can recover at the estimate's un-profiled step (bounds.recoverable_us, 2026-12-04), not at the top of that
    # step's band: 1,539 of 1,836 (1,593 before; of the 61 rows it moved out, 52 measured above the cut top and 50
    # had their un-profiled step estimated short, so the fix measured more than the idle the trace was read to have).
    ranged = [r for r in pairs(clean_rows) if r.get("likely_speedup")]
    assert len(ranged) >= 1100 and sum(r["in_likely"] for r in ranged) >= 0.83 * len(ranged)
    # Far more often than the replay's own range alone (425 of 744), which misses the larger errors elsewhere.
    replay = [r for r in ranged if r.get("pred_range") and all(r["pred_range"])]
    assert sum(r["pred_range"][0] <= r["meas_speedup"] <= r["pred_range"][1] for r in replay) < 0.6 * len(replay)
    # The table shipped is the one fitted on these rows.
    from traceinsight.estimate.likely import POOLED
    assert {g: v[:2] for g, v in pooled.items()} == {g: v[:2] for g, v in POOLED.items()}


def test_a_likely_range_is_the_estimates_band_within_what_the_step_can_give(monkeypatch):
    from traceinsight.estimate.likely import OWN, POOLED, likely, likely_range_us
    # 2 ms saved of a 10 ms step (a 1.25x estimate): the 8 ms step after the fix, scaled by the band of
    # estimates that size (sync_stall has its own there).
    lo_r, hi_r = OWN[("sync_stall", 1)][:2]
    lo, hi = likely_range_us("sync_stall", 2000.0, 10_000.0, cap_us=5000.0)
    assert lo == pytest.approx(10_000 - hi_r * 8000) and hi == pytest.approx(10_000 - lo_r * 8000)
    assert lo < 2000.0 < hi
    # Never past the cap (what the step can give by physics), and holding the replay's own range.
    assert likely_range_us("sync_stall", 2000.0, 10_000.0, cap_us=2500.0)[1] == 2500.0
    assert likely_range_us("sync_stall", 5000.0, 10_000.0, 8000.0, model_range=(3000.0, 7000.0)) == (3000.0, 7000.0)
    # A 10x estimate misses more widely than a 1.25x one (in speed-up); a kind without a band of its own
    # at that size takes the band of all validated kinds' estimates of that size.
    assert OWN[("sync_stall", 4)][1] / OWN[("sync_stall", 4)][0] > hi_r / lo_r
    lo_p, hi_p = POOLED[2][:2]
    # (pageable_memcpy: no band of its own at 1.43x; fusion_candidates has had one since the forty-first set)
    assert ("pageable_memcpy", 2) not in OWN
    assert likely_range_us("pageable_memcpy", 3000.0, 10_000.0, cap_us=9000.0) == pytest.approx(
        (10_000 - hi_p * 7000, 10_000 - lo_p * 7000))
    # A small saving's measured speed-ups spread both ways: the fix may cost time.
    assert likely_range_us("sync_stall", 200.0, 10_000.0, cap_us=5000.0)[0] < 0.0
    # A kind we have too few measured fixes of gets none, and says so; so does one whose measured fixes
    # spread too far for the band (layout_permute's, 23 of 34 inside, until batch norm counted).
    assert likely_range_us("dependency_wait", 2000.0, 10_000.0, cap_us=5000.0) is None
    rng, why = likely("dependency_wait", 2000.0, 10_000.0, (5000.0, 5000.0), None, 10_000.0)
    assert rng is None and why.startswith("not validated") and "too few" in why
    import traceinsight.estimate.likely as likely_mod
    monkeypatch.setitem(likely_mod.SPREAD, "collective_wait", (23, 34))     # (a kind without a band)
    rng, why = likely("collective_wait", 2000.0, 10_000.0, (5000.0, 5000.0), None, 10_000.0)
    assert rng is None and why.startswith("not validated") and "spread too far" in why
    # What it rests on names the band it took: the kind's own at that size, or every kind's pooled; a low end
    # below zero and a top past the estimated step's cap are said.
    rng, why = likely("sync_stall", 200.0, 10_000.0, (900.0, 500.0), None, 11_000.0)
    assert "sync_stall before/after pairs" in why and "may cost time" in why and "top of its band (11.000 ms)" in why
    assert rng[1] == pytest.approx(min(900.0, 10_000 - OWN[("sync_stall", 0)][0] * 9800))
    _rng, why = likely("pageable_memcpy", 3000.0, 10_000.0, (9000.0, 9000.0), (2000.0, 3500.0), 10_000.0)
    assert "pooled" in why and "joined with the replay's own range" in why and "8 in 10" in why


def test_every_output_names_the_likely_range_and_what_it_rests_on(tmp_path):
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import build_report
    from traceinsight.render import html as html_r, markdown as md_r
    rep = build_report(analyze_file(ROOT / "sample_traces" / "pageable_h2d__before.json.gz"))
    f = rep.doc["findings"][0]
    assert f["kind"] == "pageable_memcpy"
    lo, hi = f["likely_savings_range_ms"]
    assert lo < f["estimated_savings_ms"] <= hi and "8 in 10" in f["likely_basis"]
    html = html_r.render([rep])
    assert "Likely range:" in html and "likely " in html
    assert "likely range: where about 8 in 10 of our measured fixes landed" in md_r.render([rep])
    # A kind without a band says why (dependency_wait: measured on too few programs).
    wait_rep = build_report(analyze_file(ROOT / "sample_traces/matrix/h200_cleanA/stream_event_wait__before__default.json.gz"))
    wait = next(f for f in wait_rep.doc["findings"] if f["kind"] == "dependency_wait")
    assert wait["likely_savings_range_ms"] is None and wait["likely_basis"].startswith("not validated")
    assert "too few" in wait["likely_basis"] and "not validated" in md_r.render([wait_rep])
    from traceinsight.render.sections import span
    assert span(wait).endswith("ms (not validated)")
    # The HTML words the range as the other renderers do (it used to keep its own copy of the choice).
    assert span(wait, html_r._fmt) in html_r.render([wait_rep])


def test_nineteenth_held_out_set(clean_rows):
    # Pre-registered at 9828965 (after the likely range), recorded on two H100 leases (one twice): a GRU cell
    # unrolled over 24 timesteps -> a CUDA graph, syncs of a finite check and a loss log -> on the GPU (measured
    # 0.89-1.01x: the extra kernels cost what the syncs had), pageable numpy features -> pinned.
    first = ("h100_clean16A", "h100_clean16B", "h100_clean16C")
    got = [r for r in pairs(clean_rows) if r["run"] in first]
    assert len(got) == 18
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 16 and all(abs(r["err_pct"]) <= 50 for r in got)
    # A sync fix that measured nothing is predicted as nearly nothing.
    sync = [r for r in got if r["workload"] == "holdout19_sync_finite_check"]
    assert all(r["pred_speedup"] < 1.1 for r in sync)
    # The likely range's top comes from the top of the un-profiled step's band: the GRU's step was estimated
    # 21-26% short with default options, and its measured speed-up passed a top taken from the estimate (8 of
    # 16 as committed).
    ranged = [r for r in got if r.get("likely_speedup")]
    assert sum(r["in_likely"] for r in ranged) >= 11
    # The tool ranked a CUDA graph (the syncs or the pinning first) above the measured fix on the sync and
    # pageable rows; the graph, measured next (after_graph, pre-registered at fdaf101, an H200 and an H100 host),
    # helped most: 2.4-4.2x and 4.7-7.5x against 1.0-1.05x and 1.9-2.1x. The top finding is right on every row.
    graph = [r for r in pairs(clean_rows) if r["run"] in ("h200_clean16D", "h100_clean16E")]
    assert len(graph) == 16
    assert all(r["ok_top"] for r in got + graph)
    assert all(r["meas_speedup"] > 2.0 for r in graph if r["variant"] == "after_graph")
    # (12 of 16 within 25%: the fast H100 host's un-profiled steps were estimated 13-24% long.)
    assert sum(abs(r["err_pct"]) <= 25 for r in graph) >= 12


def test_twentieth_held_out_set(clean_rows):
    # Pre-registered at f05d7d8 (after the likely range's refit), recorded on three H100 leases: fp32 towers ->
    # TF32, a U-Net NCHW -> channels_last (and its step graphed), Python token masking -> on the GPU (and, from
    # 3ed1f52, the masking kept with the training step graphed: 3.19x against 1.38x).
    got = [r for r in pairs(clean_rows) if r["run"] in ("h100_clean17A", "h100_clean17B", "h100_clean17C")]
    assert len(got) == 26
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 21 and all(abs(r["err_pct"]) <= 50 for r in got)
    # The fix measured to help most is the top finding on every row: TF32 for the fp32 program; a CUDA graph
    # (above channels_last, which measured 0.86-1.15x) for the U-Net; a graph above the masking fix.
    assert all(r["ok_top"] for r in got)
    assert {r["top"] for r in got if r["workload"] == "holdout20_fp32_two_tower"} == {"fp32_matmul"}
    assert {r["top"] for r in got if r["workload"] != "holdout20_fp32_two_tower"} == {"launch_overhead"}
    # TF32's speed-up comes from the GPU's fp32 GEMM time: within 25% on every row.
    fp32 = [r for r in got if r["kind"] == "fp32_matmul"]
    assert len(fp32) == 6 and all(abs(r["err_pct"]) <= 25 for r in fp32)
    # fp32_matmul now has the three programs a likely band needs; layout_permute had them too, but its fixes
    # spread too far for the band (23 of 34 inside) until batch norm counted (2026-11-29): both have one now,
    # except where the estimate is a minor finding (two with_stack rows at 1.02x keep the replay's range).
    assert all(r.get("likely_speedup") for r in fp32)
    layout = [r for r in got if r["kind"] == "layout_permute"]
    assert all(bool(r.get("likely_speedup")) == (r["pred_speedup"] > 1.02) for r in layout)
    assert sum(bool(r.get("likely_speedup")) for r in layout) == 4


def test_twenty_first_held_out_set(clean_rows):
    # Pre-registered at 2e9559c, recorded on one H100 lease in two processes: a channels_last fp32 conv net with
    # cuDNN's TF32 off -> on (2.46-2.49x measured), and a compiled bf16 MLP that must stay healthy. As committed,
    # the conv net read 1.13x (-55%): cuDNN's FFT path and its transposes (80% of the GPU time) were not counted.
    got = [r for r in clean_rows if r["run"] in ("h100_clean18A", "h100_clean18B")]
    conv = [r for r in got if r["workload"] == "holdout21_fp32_convnet_notf32"]
    mlp = [r for r in got if r["workload"] == "holdout21_healthy_compiled_mlp"]
    assert len(conv) == 4 and len(mlp) == 4
    assert all(r["healthy"] for r in mlp)
    assert all(r["top"] == "fp32_matmul" and r["ok_top"] for r in conv)
    assert all(abs(r["err_pct"]) <= 40 for r in conv) and sum(abs(r["err_pct"]) <= 25 for r in conv) >= 2


def test_fp32_convolutions_are_one_path_with_their_transposes():
    # The FFT convolutions, FFMA implicit GEMMs, generic engines and the NHWC <-> NCHW transposes around them
    # run because TF32 is off: fp32_matmul owns them all, and layout_permute (whose advice, channels_last, the
    # model already follows) claims none of the transposes.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h100_clean18B/"
                                     "holdout21_fp32_convnet_notf32__before__stack.json.gz"))
    kinds = {f["kind"]: f for f in d["findings"] + d["minor_findings"]}
    assert d["findings"][0]["kind"] == "fp32_matmul"
    assert kinds["fp32_matmul"]["evidence"]["pct_of_gpu_time"] > 80      # (convolve_common_engine_float_NHWC too)
    assert "convolutions" in kinds["fp32_matmul"]["title"]
    assert "layout_permute" not in kinds


def test_twenty_second_held_out_set(clean_rows):
    # Pre-registered at 79efc66 (the tool at 6b557e2, unchanged for the set), recorded on one H200 host in six
    # processes: SGD(foreach=False) -> fused (and graphed), a per-step torch.cuda.synchronize() step timer
    # (removing it measured 0.89-1.12x; the step graphed without it 1.57-1.61x), and a ViT registered as healthy
    # whose tool-ranked fusion (1.2x) measured 1.27-1.29x under torch.compile (b5b89a3).
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean19")]
    sgd = [r for r in got if r["workload"] == "holdout22_sgd_foreach_off"]
    timer = [r for r in got if r["workload"] == "holdout22_sync_step_timer"]
    vit = [r for r in got if r["workload"] == "holdout22_healthy_vit_bf16"]
    assert (len(sgd), len(timer), len(vit)) == (16, 16, 4)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 30 and all(abs(r["err_pct"]) <= 50 for r in got)
    # The fix measured to help most is first on every row: the graph for the SGD (3.9-5.6x against 1.14-1.65x)
    # and the timer, the compile for the ViT.
    assert all(r["ok_top"] for r in got)
    assert {r["top"] for r in sgd} == {"launch_overhead"} and {r["top"] for r in vit} == {"fusion_candidates"}
    # A sync whose removal measured nothing is predicted as little, and first on one row of twelve (19D's default
    # trace, 1.21x; the graph after it second).
    nosync = [r for r in timer if r["variant"] == "after"]
    assert len(nosync) == 12 and all(r["pred_speedup"] < 1.25 for r in nosync)
    assert sum(r["top"] == "sync_stall" for r in nosync) <= 1
    # The fusion the tool found on the "healthy" ViT is real, and its size within 25% on every row.
    assert all(abs(r["err_pct"]) <= 25 for r in vit)


def test_twenty_third_held_out_set(clean_rows):
    # Pre-registered at b8f53a0 (the tool at 88cbdba), recorded on one H200 host in nine processes (20A-I):
    # channels_last on a bf16 bottleneck ResNet (and its NCHW step graphed), on the same net's fp16 inference,
    # and torch.cuda.empty_cache() after every step (and, added once the tool ranked the launches first, the
    # step graphed without it). As committed: 27 of 50 rows within 25%, all 50 within 50%, top right on 38.
    # Then, fitted on this set: cuDNN's inference batch norm left out of the layout gain (its NHWC kernel took
    # 0.87x the NCHW one's time: the fp16 eval was predicted 1.8x against 1.23x), PyTorch's own bf16 batch norm
    # in (0.42x), and the allocator's cudaMalloc calls after an empty_cache dropped with its cudaFree.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean20")]

    def of(wl, *variants):
        return [r for r in got if r["workload"] == wl and r["variant"] in variants]
    cache, graph = of("holdout23_empty_cache_step", "after"), of("holdout23_empty_cache_step", "after_graph")
    evals = of("holdout23_layout_eval_fp16", "after")
    resnet = of("holdout23_layout_resnet_bf16", "after", "after_graph_only")
    assert (len(cache), len(graph), len(evals), len(resnet)) == (18, 4, 10, 18)
    assert all(abs(r["err_pct"]) <= 50 for r in got)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 44, sorted(r["err_pct"] for r in got)
    # The empty_cache step: the graph after the sync (3.7-3.9x) is the most that helps, and first everywhere.
    assert all(r["top"] == "launch_overhead" and r["ok_top"] for r in cache + graph)
    assert all(abs(r["err_pct"]) <= 20 for r in graph)
    # The sync alone measured 1.28-1.88x: its cudaFree wait predicted 1.09-1.15x, with the cudaMalloc calls too
    # 1.26-1.39x (still short: the allocator's own CPU work around those calls is not counted).
    assert sum(abs(r["err_pct"]) <= 25 for r in cache) >= 13 and all(r["err_pct"] < 10 for r in cache)
    # The inference net: 1.22x predicted on the four processes whose trace was GPU-bound, 1.23x measured.
    assert sum(abs(r["err_pct"]) <= 5 for r in evals) >= 8
    # The bf16 ResNet: channels_last measured 0.89-1.30x and the graph 1.03-1.32x across processes of one host
    # (medians 1.05x and 1.05x); every estimate within 25%, and the top goes either way.
    assert all(abs(r["err_pct"]) <= 25 for r in resnet)


def test_twenty_fourth_held_out_set(clean_rows):
    # Pre-registered at b468cf6 (the tool at 4d6dcc6, unchanged for the set), recorded on one H200 host in three
    # processes: the bottleneck ResNet in fp32 on TF32 (PyTorch's fp32 batch norm, which the twenty-third set's
    # 0.42x was fitted on in bf16 only) and an inference loop with torch.cuda.empty_cache() after every batch (the
    # cudaMalloc rule, fitted on a training loop). As committed: 19 of 24 within 25%, 22 within 50%, top 22.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean21")]
    assert len(got) == 24
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 19 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 22
    assert sum(r["ok_top"] for r in got) >= 22
    # Both fits held where they were not made: channels_last on the fp32 net, and the eval loop's empty_cache
    # removal on the two processes whose un-profiled before-step was steady (21A's p90 ran 1.5x its median).
    layout = [r for r in got if r["workload"] == "holdout24_layout_resnet_fp32" and r["variant"] == "after"]
    assert len(layout) == 6 and all(abs(r["err_pct"]) <= 20 for r in layout)
    cache = [r for r in got if r["workload"] == "holdout24_empty_cache_eval" and r["variant"] == "after"
             and r["run"] != "h200_clean21A"]
    assert len(cache) == 4 and all(abs(r["err_pct"]) <= 15 for r in cache)


def test_twenty_fifth_held_out_set(clean_rows):
    # Pre-registered at 381e1ee (the tool at f2d3a78), recorded on one H200 host in four processes: causal
    # attention written out by hand -> F.scaled_dot_product_attention, in inference and in training. As
    # committed: 3 of 16 within 25% (the inference read 1.20x against 3.30x). The attention core model was
    # fitted on the inference program (its fused kernel at 0.41 of the two GEMMs); the training program, its
    # pre-registered check, then read 1 of 8 within 25% (the profiled step hid that the GPU is the bottleneck,
    # and the backward's kernels took 1.9x the forward's share), fitted there too. After: 13 of 16.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean22")]
    assert len(got) == 16
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 13 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 15
    assert sum(r["ok_top"] for r in got) == 16
    infer = [r for r in got if r["workload"] == "holdout25_attention_infer"]
    assert len(infer) == 8 and all(abs(r["err_pct"]) <= 10 for r in infer)


def test_twenty_sixth_held_out_set(clean_rows):
    # Pre-registered at b4665a0 (the tool at 33788d3, unchanged for the set), recorded on one H200 host in three
    # processes: written-out attention with an additive padding mask (bf16) and with none (a ViT in fp16), which
    # the twenty-fifth set's fit (causal masks only) had not seen. As committed: 12 of 12 within 25%, top 12.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean23")]
    assert len(got) == 12
    assert all(abs(r["err_pct"]) <= 25 for r in got) and all(r["ok_top"] for r in got)
    assert {r["top"] for r in got} == {"fusion_candidates"}


def test_twenty_seventh_held_out_set(clean_rows):
    # Pre-registered at 865d71e (the tool at e89ad64), recorded on one H200 host in six processes (24A-F; the
    # gradient-norm step's graph, the tool's top there, added at 603a589 before 24D-F): a timm ModelEmaV2-style
    # weight EMA over state_dict outside the optimizer, and 74 per-parameter gradient-norm .item() reads a step.
    # As committed: 42 of 54 within 25%, 53 within 50%, top 54 (the graph first on both). The EMA loop's foreach
    # fix had no finding (1.00x against 1.01-1.49x); unfused_optimizer now finds per-tensor loops after the
    # optimizer step (written after reading this set, no constant fitted: the optimizer's fused share reused).
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean24")]
    assert len(got) == 54
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 46 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 53
    assert all(r["ok_top"] for r in got) and {r["top"] for r in got} == {"launch_overhead"}
    ema = [r for r in got if r["workload"] == "holdout27_ema_state_dict" and r["variant"] == "after"]
    assert len(ema) == 12 and all(abs(r["err_pct"]) <= 25 for r in ema)


def test_twenty_eighth_held_out_set(clean_rows):
    # Pre-registered at f053a82 (the tool at 21285d4; the GPU-bound step's compile at 6a87787 before 25D-E),
    # recorded on one H200 host in five processes (25A-E): PyTorch's AveragedModel with a per-tensor avg_fn on a
    # channels_last ResNet, and the ModelEmaV2 loop in a GPU-bound 201M-parameter step. As committed: 20 of 20
    # within 25%, top 0 (the graph behind AveragedModel's own counter sync was not measured on the ResNet; the
    # compile headlined the GPU-bound step). Since fd64a92 (read after this set) the EMA fix heads the GPU-bound
    # rows; the ResNet's tops stay the unmeasured graph.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean25")]
    assert len(got) == 20
    assert all(abs(r["err_pct"]) <= 25 for r in got)
    gpu_bound = [r for r in got if r["workload"] == "holdout28_ema_gpu_bound"]
    assert len(gpu_bound) == 14 and all(r["ok_top"] and r["top"] == "unfused_optimizer" for r in gpu_bound)
    assert all(abs(r["err_pct"]) <= 10 for r in gpu_bound)


def test_twenty_ninth_held_out_set(clean_rows):
    # Pre-registered at aee393b with the tool it tests (loops before the optimizer step, tensors counted per
    # backward), recorded on one H200 host in four processes (26A-D): a ModelEmaV2 loop under four backwards a step,
    # and clip_grad_norm_(foreach=False). As committed: 25 of 32 within 25%, 30 within 50%, top 32 (the graph);
    # the tool before aee393b, finding neither loop: 23, 30, 32. The fixes measured at the host's noise (EMA
    # 0.79-1.05x, clip 1.05-1.42x); the misses are graph rows of processes whose stack-profiled step read far
    # above the others, and the process that measured the EMA fix at 0.79x.
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean26")]
    assert len(got) == 32
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 25 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 30
    assert all(r["ok_top"] and r["top"] == "launch_overhead" for r in got)
    clip = [r for r in got if r["workload"] == "holdout29_clip_per_tensor" and r["variant"] == "after"]
    assert len(clip) == 8 and all(abs(r["err_pct"]) <= 25 for r in clip)
    # Neither fix is overclaimed: no prediction above 1.3x where the measured median was 1.1x.
    assert all(r["pred_speedup"] < 1.3 for r in got if r["variant"] == "after")



def test_thirtieth_held_out_set(clean_rows):
    # Pre-registered at 3211f90 with the tool at 887dd50: two generate loops over a static KV cache that sync
    # once a token (an "all finished?" check on a small decoder, .tolist() of each token on a larger one),
    # recorded on one H200 host in three processes (27A-C). Both loops are CPU-bound there: the syncs alone
    # measured 0.70-0.98x, the per-token forward graphed 5.5-6.1x and 2.2-2.4x. As committed: 15 of 24 within
    # 25%, 22 within 50%, top 24 (the graph, with the per-token sync as what it needs first). The misses: the
    # measured slowdowns of the sync fixes, and 27C's small model, whose profiled steps rose 156 -> 314 ms as
    # its launch calls slowed (the host, not the program).
    got = [r for r in pairs(clean_rows) if r["run"].startswith("h200_clean27")]
    assert len(got) == 24
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 15 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 22
    assert all(r["ok_top"] and r["top"] == "launch_overhead" for r in got)
    # The syncs alone are not overclaimed: at most 1.1x predicted where they measured 0.70-0.98x.
    assert all(r["pred_speedup"] <= 1.1 for r in got if r["variant"] == "after")
    graphed = [r for r in got if r["variant"] == "after_graph" and "_clean27C" not in r["run"]]
    assert len(graphed) == 8 and all(abs(r["err_pct"]) <= 25 for r in graphed)


def test_a_per_token_sync_is_named_as_what_the_graph_needs_first():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean27B/holdout30_decode_eos_check__before__default.json.gz"))
    top = d["findings"][0]
    assert top["kind"] == "launch_overhead"
    need = top["evidence"]["prerequisites"]
    assert [p["kind"] for p in need] == ["sync_stall"] and "aten::is_nonzero" in need[0]["what"]
    assert "48 times per step" in need[0]["what"]
    # The sync alone saves little in a CPU-bound loop (the host still launches every kernel).
    sync = next(x for x in d["findings"] + d["minor_findings"] if x["kind"] == "sync_stall")
    assert sync["estimated_savings_ms"] < 0.02 * top["estimated_savings_ms"]
    # And it blocks a graph of the whole generate call only: the step repeats one token's 71 launches between
    # its 48 syncs, and the measured fix graphed that forward (an expert review read "needs sync_stall fixed
    # first" as wrong for a decode loop).
    assert sync["evidence"]["repeated_between_syncs"] == {"repeats_per_step": 48.0, "launches_each": 71}
    assert "a graph of only the sequence repeated between them (71 launches, 48 times a step" in top["fix"]
    assert "needs sync_stall fixed first to be captured whole" in d["verdict"]
    # A step whose syncs have a few launches between them (a norm per parameter, read with .item()) is no such
    # loop: its syncs are what a graph of the step needs gone.
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean24A/holdout27_grad_norm_items__before__default.json.gz"))
    sync = next(x for x in d["findings"] + d["minor_findings"] if x["kind"] == "sync_stall")
    assert sync["evidence"]["sync_sites"] and "repeated_between_syncs" not in sync["evidence"]

def test_a_per_tensor_weight_ema_is_an_unfused_update(tmp_path):
    from conftest import raw_json, write_trace
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document

    def loop_finding(path):
        d = document(analyze_file(path))
        return next((x for x in d["findings"] + d["minor_findings"] if x["kind"] == "unfused_optimizer"), None)
    run = ROOT / "sample_traces/matrix/h200_clean24B"
    before = run / "holdout27_ema_state_dict__before__default.json.gz"
    f = loop_finding(before)
    # 98 tensors, four launches each (two scalings, an add: kernels; the copy back: a device-to-device memcpy),
    # after AdamW's fused step; state_dict()'s detaches launch nothing and are not the loop (the fix keeps them).
    ev = f["evidence"]
    assert ev["update_loop_launches_per_step"] == 392 and "optimizer" not in ev
    assert set(ev["update_loop_ops"]) == {"aten::mul", "aten::add", "aten::copy_"}
    assert 0.45 < ev["update_loop_gpu_ms_per_step"] < 0.6, ev
    assert "_foreach_lerp_" in f["fix"] and "state_dict()" in f["fix"] and "after the optimizer step" in f["title"]
    # With Python stacks it says which function runs the loop (the frame's def line: the profiler's).
    f = loop_finding(run / "holdout27_ema_state_dict__before__stack.json.gz")
    assert f["evidence"]["update_loop_source"] == "in ema_loop(), def at workloads/holdout27_ema_state_dict.py:40"
    assert f["title"].endswith("in ema_loop(), def at workloads/holdout27_ema_state_dict.py:40")
    # The foreach EMA (one multi-tensor lerp) is no such loop.
    assert loop_finding(run / "holdout27_ema_state_dict__after__default.json.gz") is None
    # Nor is the same loop doing no arithmetic (zeroing each tensor), or one that syncs each tensor (per-tensor
    # .item() logging is sync_stall's): the real trace with its loop's ops renamed / a copy made blocking.
    doc = raw_json(before)
    ev_ = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    opt_end = [e["ts"] + e["dur"] for e in ev_ if str(e.get("name", "")).startswith("Optimizer.step#")]

    def after_step(e):
        return any(0 <= e["ts"] - t < 8000 for t in opt_end)
    zeroed = [dict(e, name="aten::zero_") if e.get("cat") == "cpu_op" and e["name"] in ("aten::mul", "aten::add")
              and after_step(e) else e for e in doc["traceEvents"]]
    assert loop_finding(write_trace(tmp_path / "zeroed.json", dict(doc, traceEvents=zeroed))) is None
    synced = [dict(e, name="cudaStreamSynchronize") if e.get("name") == "cudaMemcpyAsync" and after_step(e) else e
              for e in doc["traceEvents"]]
    assert loop_finding(write_trace(tmp_path / "synced.json", dict(doc, traceEvents=synced))) is None


def test_a_per_tensor_loop_before_the_optimizer_step_is_an_unfused_update(tmp_path):
    # The same real loop, with each step's Optimizer.step annotation moved to just after it: the loop now runs
    # between the backward and the optimizer step, where per-tensor gradient clipping or scaling runs.
    from conftest import raw_json, write_trace
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    doc = raw_json(ROOT / "sample_traces/matrix/h200_clean24B/holdout27_ema_state_dict__before__default.json.gz")
    ev = doc["traceEvents"]
    opt = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("Optimizer.step#")]
    ops = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "cpu_op" and e.get("ph") == "X"
                 and e["name"] in ("aten::mul", "aten::add", "aten::copy_"))
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    for o in opt:
        end = o["ts"] + o["dur"]
        # The loop: its ops after the step, to the end of its ProfilerStep; the annotation goes 1 us after them.
        stop = next(b for a, b in steps if a <= o["ts"] < b)
        last = max((b for a, b in ops if end <= a < stop), default=None)
        if last is not None:
            o["ts"], o["dur"] = last + 1, 1
    d = document(analyze_file(write_trace(tmp_path / "moved.json", doc)))
    f = next(x for x in d["findings"] + d["minor_findings"] if x["kind"] == "unfused_optimizer")
    assert f["evidence"]["update_loop_launches_per_step"] == 392
    assert "before the optimizer step" in f["title"] and "clip_grad_norm_" in f["fix"] and "_foreach_lerp_" not in f["fix"]


def test_update_loops_under_gradient_accumulation_and_before_the_optimizer():
    # The twenty-ninth set's programs (h200_clean26B): a ModelEmaV2 loop after the optimizer in a step of four
    # backwards, and clip_grad_norm_(foreach=False) between the backward and the optimizer.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    run = ROOT / "sample_traces/matrix/h200_clean26B"

    def found(name, kind):
        d = document(analyze_file(run / name))
        return next((x for x in d["findings"] + d["minor_findings"] if x["kind"] == kind), None)
    ema = found("holdout29_ema_grad_accum__before__default.json.gz", "unfused_optimizer")
    # The tensors are one backward's AccumulateGrad calls (101), not the step's (404); four launches a tensor.
    assert ema["evidence"]["update_loop_tensors"] == 101 and ema["evidence"]["update_loop_launches_per_step"] == 404
    assert "after the optimizer step" in ema["title"] and "4.0 for each of 101" in ema["title"]
    # state_dict()'s detaches, each step, are a loop over existing tensors: no torch.tensor advice for them.
    host = found("holdout29_ema_grad_accum__before__default.json.gz", "host_bound")
    assert "existing tensors" in host["title"] and "torch.tensor" not in host["fix"] and "once" in host["fix"]
    clip = found("holdout29_clip_per_tensor__before__default.json.gz", "unfused_optimizer")
    ev = clip["evidence"]
    # A norm and a scale a tensor (with the big weights' memsets); the total norm and the coefficient between the
    # two runs are the fixed program's too and are not the loop's (231 launches in the window, 226 in the runs).
    assert ev["update_loop_tensors"] == 100 and ev["update_loop_launches_per_step"] == 226
    assert set(ev["update_loop_ops"]) == {"aten::linalg_vector_norm", "aten::mul_"}
    assert "before the optimizer step" in clip["title"] and "copies" not in clip["title"]
    assert "clip_grad_norm_" in clip["fix"] and "foreach=True" in clip["fix"]
    # The foreach versions are no such loops.
    assert found("holdout29_clip_per_tensor__after__default.json.gz", "unfused_optimizer") is None
    assert found("holdout29_ema_grad_accum__after__default.json.gz", "unfused_optimizer") is None


def test_an_update_loops_chains_are_not_the_compilers():
    # The twenty-eighth set's GPU-bound step (recorded at c57412c, read before this rule): a ModelEmaV2 loop over
    # 38 tensors after a 201M-parameter step. torch.compile(model) does not run the loop, and its GPU time is the
    # update loop's fix: with its chains in, fusion_candidates headlined at 1.27-1.29x against 1.07x measured for
    # the compile (the EMA fix 1.11x). Without them the loop's fix is first and the compile's estimate 1.12x.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean25D/holdout28_ema_gpu_bound__before__default.json.gz"))
    assert d["findings"][0]["kind"] == "unfused_optimizer"
    fusion = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "fusion_candidates")
    # (One such chain stays: the loop of the step before the window, queued before it and run in its first
    # step, has no launch in the trace to place it in the loop; the per-step median does not see it.)
    u = d["summary"]["unprofiled_step_ms"]
    assert 1.08 < u / (u - fusion["estimated_savings_ms"]) < 1.16      # measured 1.07x


def test_written_out_attention_is_one_fused_kernel_to_the_estimate():
    from traceinsight.analyses.attention import SOFTMAX_FORWARD
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    run = ROOT / "sample_traces/matrix/h200_clean22B"
    d = document(analyze_file(run / "holdout25_attention_train__before__default.json.gz"))
    f = d["findings"][0]
    assert f["kind"] == "fusion_candidates" and "scaled_dot_product_attention(q, k, v, is_causal=True)" in f["fix"]
    ev = f["evidence"]
    # 6 blocks: a forward and a backward core each, per step; the trace's 10.7 ms of their kernels become
    # about 1 ms of fused ones (measured: 0.82 ms of cuDNN's attention kernels in the fixed step's trace).
    assert ev["attention_cores_per_step"] == 12 and ev["attention_backward_cores_per_step"] == 6
    assert 8 < ev["attention_kernel_ms_per_step"] < 11 and 0.6 < ev["attention_fused_ms_per_step"] < 1.2
    assert "softmax_warp_forward" in ev["attention_core"] and "nvjet" in ev["attention_core"]
    # The fixed step has none (SDPA's kernels), and a cross-entropy's log-softmax between GEMMs is not one.
    after = document(analyze_file(run / "holdout25_attention_train__after__default.json.gz"))
    assert not any("attention_cores_per_step" in x["evidence"] for x in after["findings"] + after["minor_findings"])
    assert not re.search(SOFTMAX_FORWARD, "void (anonymous namespace)::softmax_warp_forward<float, float, float, "
                                          "10, true, false>(float*, float const*, int, int, int, bool const*)")
    # A core with no mask over its scores (a ViT's) is not told to pass one.
    vit = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean23B/holdout26_attention_vit_fp16__before__default"
                                       ".json.gz"))["findings"][0]
    assert "scaled_dot_product_attention(q, k, v) (" in vit["fix"] and "is_causal" not in vit["fix"]


def test_an_empty_cache_in_the_loop_also_costs_the_allocator_its_blocks():
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean20H/holdout23_empty_cache_step__before__default.json.gz"))
    f = next(x for x in d["findings"] if x["kind"] == "sync_stall")
    assert "cudaFree" in f["title"] and "empty_cache" in f["fix"] and "cudaMalloc" in f["fix"]
    assert f["evidence"]["allocator_refills_per_step"] >= 10 and f["evidence"]["allocator_refill_ms_per_step"] > 0.5
    # Without the cudaFree the mallocs are the allocator's normal growth: no such claim on the fixed step.
    after = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean20H/holdout23_empty_cache_step__after__default.json.gz"))
    assert not any("allocator_refills_per_step" in x["evidence"] for x in after["findings"] + after["minor_findings"])


def test_compiled_code_under_with_stack_is_named_a_limit():
    # The twenty-second set's compiled ViT: its with_stack steps ran 55-77 ms against 26.2 ms un-profiled, the
    # tool took 23 ms out and called it launch-bound; its default-options trace reads 26.3 ms, healthy. The
    # with_stack trace says its estimate's weak point; the default one and the eager ViT's do not.
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    run = ROOT / "sample_traces/matrix/h200_clean19E"

    def limits(name):
        return [x for x in document(analyze_file(run / name))["trace"]["limits"] if x.startswith("Compiled code")]
    got = limits("holdout22_healthy_vit_bf16__after_compile__stack.json.gz")
    assert len(got) == 1 and "7,821 Python calls a step" in got[0] and "default options" in got[0]
    assert not limits("holdout22_healthy_vit_bf16__after_compile__default.json.gz")
    assert not limits("holdout22_healthy_vit_bf16__before__stack.json.gz")


def test_the_thirty_seventh_sets_plan_on_a_gpt_step_with_three_faults(clean_rows):
    # A GPT training step with AdamW(foreach=False), per-tensor clipping and loss.item() each step, at two sizes
    # (h200_clean41A-D, registered before it was recorded): each fault fixed alone, then the plan (all three and the
    # step in one CUDA graph: 10.97-13.19x small, 2.06-2.93x medium). Read as registered: 40 of 48 within 25%, 46
    # within 50%, the top finding right on all 16 before traces, the plan rows 12 of 16 (the four misses are two
    # traces' un-profiled steps: 41B's with_stack window ran 1.5x its default one; 41D's un-profiled steps ran slow).
    got = [r for r in clean_rows if r["workload"].startswith("holdout37_gpt_")]
    assert len(got) == 48
    assert all(r["ok_top"] for r in got) and not any(r["over_idle"] for r in got)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 40 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 46
    plan = [r for r in got if r["variant"] == "after_graph"]
    assert sum(abs(r["err_pct"]) <= 25 for r in plan) >= 12
    assert all(abs(r["err_pct"]) <= 25 for r in plan if r["setting"] == "default")
    # The sync removed alone saves nothing while the step stays launch-bound (measured 0.80-1.14x).
    assert all(r["pred_speedup"] <= 1.02 for r in got if r["variant"] == "after_nosync")


def test_a_loader_hidden_behind_fp32_work_is_planned_after_tf32():
    # The thirty-eighth set's deep model (h200_clean42A, registered before it was recorded): a main-process numpy
    # loader (about 37 ms a batch) beside 62 ms of fp32 matmuls. TF32 alone measured 1.47x, the workers alone 1.12x,
    # both 4.90x. Read as registered the plan held TF32 only (1.65x predicted for both, -66%): the loading caused
    # no idle, so no host_bound finding was made for the plan to place. It is now a hidden finding that the plan
    # places after TF32, where the loading is the step.
    import json

    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    run = ROOT / "sample_traces/matrix/h200_clean42A"
    d = document(analyze_file(run / "holdout38_patch_loader_gpu__before__default.json.gz"))
    assert d["findings"][0]["kind"] == "fp32_matmul"
    h = next(f for f in d["findings"] if f["kind"] == "host_bound")
    assert h["estimated_savings_ms"] < 0.5 and h["needs_first"] == ["fp32_matmul"]
    assert h["saves_after_needs_first_ms"] > 10 and "num_workers=0" in h["title"]
    plan = d["whatif"]["plan"]
    assert [r["kind"] for r in plan] == ["fp32_matmul", "host_bound"] and plan[1]["pays_after_fixes_above"]
    assert not plan[0]["pays_after_fixes_above"] and plan[1]["loader_workers_needed"]
    steps = {e["variant"]: e["step_ms"]["median"] for e in json.loads((run / "manifest.json").read_text())["entries"]
             if e["workload"] == "holdout38_patch_loader_gpu"}
    measured = steps["before"] / steps["after_both"]
    predicted = d["summary"]["unprofiled_step_ms"] / plan[-1]["estimated_step_ms"]
    assert abs(predicted - measured) / measured <= 0.35, (predicted, measured)
    # The workers alone: the hidden finding's own estimate says about nothing (measured 1.12x).
    assert d["summary"]["unprofiled_step_ms"] / (d["summary"]["unprofiled_step_ms"] - h["estimated_savings_ms"]) < 1.02
    # Where the loading is the step already (the one-block model), host_bound is a finding of its own, first.
    d1 = document(analyze_file(run / "holdout38_patch_loader_host__before__default.json.gz"))
    h1 = d1["findings"][0]
    assert h1["kind"] == "host_bound" and not h1["needs_first"] and h1["estimated_savings_ms"] > 20


def test_the_thirty_eighth_sets_faults_that_hide_each_other(clean_rows):
    # A main-process numpy loader in front of an fp32 patch MLP at two depths (h200_clean42A-D, registered before it
    # was recorded): one block, the loader is the step; eight, the fp32 GPU work is. Each fix alone and both. As
    # registered: 37 of 48 within 25%, 40 within 50%, the deep model's plan -65..-76% (the hidden loader was in no
    # finding); with the hidden fix and uncapped kernel fixes after another: 38 and 48.
    got = [r for r in clean_rows if r["workload"].startswith("holdout38_patch_loader_")]
    assert len(got) == 48
    assert all(r["ok_top"] for r in got) and not any(r["over_idle"] for r in got)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 38 and all(abs(r["err_pct"]) <= 50 for r in got)
    both = [r for r in got if r["variant"] == "after_both"]
    assert sum(abs(r["err_pct"]) <= 25 for r in both) >= 8
    # The fix that cannot pay alone is priced so: TF32 where the loader is the step (measured 0.83-0.94x), the
    # workers where the fp32 work is (1.11-1.14x), on every trace without stacks.
    alone = [r for r in got if r["setting"] == "default" and (r["workload"], r["variant"]) in {
        ("holdout38_patch_loader_host", "after_tf32"), ("holdout38_patch_loader_gpu", "after_workers")}]
    assert len(alone) == 8 and all(r["pred_speedup"] <= 1.02 for r in alone)


def test_tf32_gain_is_read_against_the_measured_gemm_time():
    # What TF32 made of each program's FP32 GEMM time, ops matched before/after (fit_tf32.py): 4.9-6.6x over six
    # programs on two GPUs. fp32_matmul's central guess (0.75 of the peak ratio) is within 20% of every one; the
    # constant it replaced (0.6 of peak) was 10-33% low on all eight, and a law by each GEMM's length,
    # registered with the thirty-ninth held-out set, read its inference MLP's GEMMs 32% low.
    import json

    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    import importlib.util
    # (loaded by its path: sample_traces/matrix on sys.path would shadow sample_traces/workloads for later tests)
    spec = importlib.util.spec_from_file_location("fit_tf32", ROOT / "sample_traces" / "matrix" / "fit_tf32.py")
    fit_tf32 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit_tf32)
    pts = fit_tf32.pairs(settings=("default",))       # (the kernels are the same with stacks; half the reading)
    keys = {(p[1], p[0]) for p in pts}
    assert len(keys) == 8
    for k in keys:
        t = [p for p in pts if (p[1], p[0]) == k]
        measured = sum(p[2] for p in t) / sum(p[3] for p in t)
        assert 4.5 < measured < 7.0, (k, measured)
        assert abs(5.55 / measured - 1) <= 0.2, (k, measured)
    # The finding states the guess it replays, on a held-out trace.
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean43A/holdout39_fp32_mlp_infer__before__default.json.gz"))
    f = d["findings"][0]
    assert f["kind"] == "fp32_matmul" and f["evidence"]["assumed_speedup"].startswith("5.6x")
    assert json.dumps(f["evidence"]).count("range 2x-7.4x") == 1


def test_a_host_fix_after_a_kernel_fix_may_add_the_gpu_time_that_fix_cut():
    # A host-work fix's own estimate (the idle it measured, replayed on the step as it was) caps what it adds in
    # the plan; after a fix that shortened the GPU's work, the host time that hid behind that work is exposed too
    # (TF32 ranked first on holdout38_patch_loader_gpu with stacks, at the length law's 6.8x: the loader's 15.5 ms
    # idle had capped both fixes at 35 ms of a 76 ms replayed saving; measured both: 4.78x). Without such a fix
    # the cap is the estimate's upper end; a hidden fix is capped at its loading; a kernel fix after another, and
    # a fix after its prerequisites, by the replay alone.
    from traceinsight.analyses.base import Finding
    from traceinsight.analyses.fixes import CudaGraph, RemoveHostWork, ScaleKernels
    from traceinsight.estimate.plan import _own_cap
    host = Finding(kind="host_bound", title="t", lost_per_step_us=15_000.0, lost_total_us=0.0, fix="f",
                   confidence="high", evidence={}, fixes=(RemoveHostWork(loading_us=37_000.0),))
    host.estimated_savings_us, host.savings_bound_us = 15_000.0, None
    tf32 = (ScaleKernels("gemm", 0.2),)
    assert _own_cap(host, (), set(), 0.0) == 15_000.0
    assert _own_cap(host, tf32, {"fp32_matmul"}, 48_000.0) == 63_000.0
    kernel = Finding(kind="fp32_matmul", title="t", lost_per_step_us=0.0, lost_total_us=0.0, fix="f",
                     confidence="medium", evidence={}, fixes=tf32)
    kernel.estimated_savings_us, kernel.savings_bound_us = 20_000.0, (10_000.0, 25_000.0)
    assert _own_cap(kernel, (), set(), 0.0) == 25_000.0
    assert _own_cap(kernel, (RemoveHostWork(loading_us=1.0),), {"host_bound"}, 0.0) is None
    graph = Finding(kind="launch_overhead", title="t", lost_per_step_us=0.0, lost_total_us=0.0, fix="f",
                    confidence="high", evidence={}, fixes=(CudaGraph(),))
    graph.estimated_savings_us, graph.savings_bound_us = 5_000.0, None
    assert _own_cap(graph, (ScaleKernels("x", 0.5),), {"sync_stall"}, 0.0) is None
    host.hidden = True
    assert _own_cap(host, tf32, {"fp32_matmul"}, 48_000.0) == 37_000.0


def test_a_hidden_fix_is_said_to_apply_alone_and_pay_after_the_fixes_before_it():
    # An expert review (2026-12-01) read the hidden loader's card as "it cannot be applied alone": the workers can
    # be added alone, they pay nothing until TF32 shortens the GPU's work. A CUDA graph that syncs break cannot.
    from traceinsight.render import html
    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import build_report
    rep = build_report(analyze_file(ROOT / "sample_traces/matrix/h200_clean42A/holdout38_patch_loader_gpu__before__default.json.gz"))
    h = next(f for f in rep.doc["findings"] if f["kind"] == "host_bound")
    assert h["hidden"] and not next(f for f in rep.doc["findings"] if f["kind"] == "fp32_matmul")["hidden"]
    page = html.render([rep])
    card = page[page.index('<code class="kind">host_bound</code>'):]
    card = card[:card.index("</article>")]
    assert "it pays only after fp32_matmul" in card and "it can be applied alone" in card
    assert "cannot be applied alone" not in card and "GPU idle it causes per step now" in card
    assert "un-profiled step after (ms)" in page


def test_the_thirty_ninth_set_tf32_on_gemms_the_guess_was_not_fitted_on(clean_rows):
    # fp32 inference of a residual MLP (~95 us GEMMs) and fp32 MoE training on batched GEMMs (torch.bmm, ~410 us),
    # TF32 on one H200, four processes (h200_clean43A-D, registered before recording with a per-GEMM length law,
    # which failed there: the MLP's GEMMs read 4.0x, measured 5.9x). With the share of peak (5.6x): the MoE within
    # 10% on all eight rows; the MLP's fixed step is the CPU's, whose pace the slower processes did not keep.
    got = [r for r in clean_rows if r["workload"].startswith("holdout39_fp32_")]
    assert len(got) == 16 and all(r["kind"] == "fp32_matmul" for r in got)
    assert all(r["top"] == "fp32_matmul" and r["ok_top"] for r in got) and not any(r["over_idle"] for r in got)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 14
    moe = [r for r in got if r["workload"] == "holdout39_fp32_moe_bmm_train"]
    assert len(moe) == 8 and all(abs(r["err_pct"]) <= 10 for r in moe)


def test_the_fortieth_set_models_from_the_libraries_users_bring(clean_rows):
    # transformers' GPT-2 and BERT, timm's ViT-S and ResNet-50, built from configs (h200_clean44A-D, registered before
    # recording), then the top findings nobody had measured (h200_clean45A-B: GPT-2 compiled 1.88-1.89x, predicted
    # 2.06x; BERT's sync then graphs 1.32-1.33x, predicted 1.30-1.48x). Every pair within 25%; the top finding the
    # best measured fix but on GPT-2's three with_stack traces that led with the fused optimizer (1.08x).
    got = [r for r in clean_rows if r["workload"].startswith("holdout40_") and r["kind"] != "healthy"]
    assert len(got) == 40 and all(abs(r["err_pct"]) <= 25 for r in got), sorted(r["err_pct"] for r in got)
    assert sum(r["ok_top"] for r in got) >= 37 and not any(r["over_idle"] for r in got)
    fused = [r for r in got if r["kind"] == "fusion_candidates"]
    assert len(fused) == 4 and all(r["top"] == "fusion_candidates" for r in fused)
    healthy = [r for r in clean_rows if r["workload"] == "holdout40_timm_resnet50_bf16_healthy"]
    assert len(healthy) == 8 and sum(r["ok_top"] for r in healthy) >= 7



def test_the_forty_first_set_library_models_with_one_fault_each(clean_rows):
    # transformers' GPT-2 with eager attention, timm's ViT-Ti serving batch 1, timm's ResNet-18 fed from pageable
    # memory, timm's ViT-B as healthy (h200_clean46A-D, registered before recording at 706badc). As registered: top
    # 24 of 24, within 25% on 9 (GPT-2 -27% on all 8: the forward's attention cores, softmax then dropout, were missed).
    # With dropout in the core's pattern GPT-2 lands -3..-9%. ViT-Ti's launch estimate stays short where its
    # un-profiled step is estimated short (-25..-45% on 7 of 8; the matrix's other inference programs read theirs right).
    got = [r for r in clean_rows if r["run"].startswith("h200_clean46") and r["kind"] != "healthy"]
    assert len(got) == 24 and all(r["ok_top"] for r in got) and not any(r["over_idle"] for r in got)
    gpt = [r for r in got if "gpt2" in r["workload"]]
    assert len(gpt) == 8 and all(-15 <= r["err_pct"] <= 5 for r in gpt), sorted(r["err_pct"] for r in gpt)
    assert all(abs(r["err_pct"]) <= 25 for r in got if "resnet18" in r["workload"])
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 17 and all(abs(r["err_pct"]) <= 50 for r in got)
    # The ViT-B, measured afterwards under torch.compile (h200_clean47A-B): 1.06x and 1.17x, its GPU work 25.7 ->
    # 19.8 ms; the traces that led with fusion_candidates (about 1.2x) were not inventing it.
    # (Where launch_overhead ranks above fusion_candidates the compile is scored against the launch fix's torch_compile
    # option since 2026-12-04: one of the four then reads past 25%.)
    comp = [r for r in clean_rows if r["workload"] == "holdout41_timm_vit_base_bf16_compile"]
    assert len(comp) == 4 and sum(abs(r["err_pct"]) <= 25 for r in comp) >= 3 and all(abs(r["err_pct"]) <= 50 for r in comp)
    healthy = [r for r in clean_rows if r["workload"] == "holdout41_timm_vit_base_bf16_healthy"]
    assert len(healthy) == 8 and sum(r["ok_top"] for r in healthy) >= 5

def test_the_forty_second_set_library_models_as_registered(clean_rows):
    # transformers' Llama reading each micro-batch's loss with .item(), timm's EfficientNet-B0 fed by DataLoader(
    # num_workers=0), timm's MobileNetV3 served eagerly, transformers' Llama eager -> torch.compile (h200_clean48A-D,
    # registered before recording at 2d337ee). As registered: top 9 of 32, within 25% on 17, within 50% on 26.
    got = [r for r in clean_rows if r["run"].startswith("h200_clean48")]
    assert len(got) == 32 and not any(r["over_idle"] for r in got)
    by = lambda name: [r for r in got if name in r["workload"]]    # noqa: E731
    # MobileNetV3: the launch fix leads on all 8; its misses are the un-profiled step's (-45% where it read 2.32 ms
    # against 4.51 measured).
    assert all(r["ok_top"] for r in by("mobilenetv3")) and sum(abs(r["err_pct"]) <= 25 for r in by("mobilenetv3")) >= 5
    # The .item() Llama is launch-bound: the tool says removing the reads alone saves nothing (1.00x), and the
    # measured 0.78-1.12x bears it out, within 25% on 6 of 8.
    item = by("loss_item")
    assert all(r["top"] == "launch_overhead" and r["pred_speedup"] == 1.0 for r in item)
    assert sum(abs(r["err_pct"]) <= 25 for r in item) >= 6
    # The compiled Llama was the set's miss (-49..-61% on all 8: no fusion_candidates finding on a step 42-58% idle
    # without the profiler, where compiling measured 1.96-2.58x). Since 2026-12-04 the launch fix carries torch.compile
    # as another way (fitted on it among others, so no longer held out): within 25% on 7 of 8, the top right on 8.
    comp = by("bf16_compile")
    assert all(r["top"] == "launch_overhead" and r["ok_top"] and r["option"] == "torch_compile" for r in comp)
    assert sum(abs(r["err_pct"]) <= 25 for r in comp) >= 7
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 17
    # The EfficientNet's launch fix, measured afterwards (h200_clean49A-B: the model under cudagraphs, 1.77-1.89x
    # against the workers' 1.22-1.29x), is the fix that helps most, as the top finding said; its size reads high
    # against a partial graph (705 input copies and 213 gradient accumulations still launched a step).
    graph = [r for r in clean_rows if r["run"].startswith("h200_clean49") and r["variant"] == "after_graph_only"]
    assert len(graph) == 4 and all(r["ok_top"] and r["err_pct"] > 50 for r in graph)
    assert sum(r["ok_top"] for r in by("effnet")) >= 7


def test_the_forty_third_set_eager_library_models_compiled(clean_rows):
    # transformers' GPT-2 and BERT tagger, timm's ResNet-18 serving and ConvNeXt-Atto training, each eager ->
    # torch.compile(model) (h200_clean50A-D, registered before recording at 45e5292 to test the launch fix's
    # torch_compile option). As registered: top 32 of 32, within 25% on 15, within 50% on 30; the ResNet-18 read 1.00x
    # on all 8 (its BatchNorm formed no chain). With BatchNorm's pass counted and the multiple refitted on this set
    # and the earlier compiles (so no longer held out): within 25% on 25.
    got = [r for r in clean_rows if r["run"].startswith("h200_clean50")]
    assert len(got) == 32 and not any(r["over_idle"] for r in got)
    assert all(r["top"] == "launch_overhead" and r["option"] == "torch_compile" and r["ok_top"] for r in got)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 24 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 30
    resnet = [r for r in got if "resnet18" in r["workload"]]
    assert sum(r["pred_speedup"] > 1.3 for r in resnet) >= 6
    # ConvNeXt's compile measured 0.91-1.30x between processes of one host: the estimate (1.3-1.55x) is not that noise.
    conv = [r for r in got if "convnext" in r["workload"]]
    assert min(r["meas_speedup"] for r in conv) < 0.95 and all(1.2 <= r["pred_speedup"] <= 1.6 for r in conv)


def test_the_forty_fourth_set_generate_and_a_fast_tokenizer(clean_rows):
    # transformers' generate() (a Llama at batch 1, a Qwen2 at batch 16) eager -> the static cache that compiles the
    # forward, and a BERT fed by a fast tokenizer with num_workers=0 -> 4 (h200_clean51A-D, registered at c8ee243).
    # As registered 6 of 24 within 25%: every generate() row read 5.5-28x (the whole step graphed) against 1.84-3.72x.
    # With the generation loop read as such (its forwards graphed, the loop's own work kept): 12, and 22 within 50%.
    got = [r for r in clean_rows if r["run"].startswith("h200_clean51")]
    assert len(got) == 24 and all(r["ok_top"] for r in got) and not any(r["over_idle"] for r in got)
    gen = [r for r in got if "generate" in r["workload"]]
    assert all(r["top"] == "launch_overhead" and r["pred_speedup"] < 4.0 for r in gen)
    assert sum(abs(r["err_pct"]) <= 25 for r in got) >= 12 and sum(abs(r["err_pct"]) <= 50 for r in got) >= 22
    assert sum(bool(r["in_likely"]) for r in gen) >= 12     # (13 of 16 with the likely table refitted on them)


def test_the_worker_count_advised_is_the_most_the_plan_needs():
    # 42D's with_stack trace of the thirty-eighth set: the workers fix first (1 worker keeps up with the step as it
    # is), TF32 after it (the step then needs 2). A review read "num_workers=1 (the fewest that keep up)" beside
    # the plan's ">= 2": the advice names the most any row needs.
    import re

    from traceinsight.report.analyze import analyze_file
    from traceinsight.report.document import document
    d = document(analyze_file(ROOT / "sample_traces/matrix/h200_clean42D/holdout38_patch_loader_gpu__before__stack.json.gz"))
    counts = [r["loader_workers_needed"] for r in d["whatif"]["plan"] if r["loader_workers_needed"]]
    assert len(counts) == 2 and counts[0] < counts[1]
    h = next(f for f in d["findings"] if f["kind"] == "host_bound")
    assert re.findall(r"num_workers=(\d+)", h["fix"]) == [str(max(counts))]
