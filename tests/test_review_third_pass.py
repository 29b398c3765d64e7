"""What three reviews of 2026-12-02 (session 68) found wrong: two expert reviews (EXPERT_REVIEW.md, every figure
recomputed from the raw events) of ten traces recorded by others, and a new user's pass over record/analyze/diff.
Each is checked on the trace where it was seen."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import build_report

ROOT = Path(__file__).resolve().parents[1]
TRACELENS = ROOT / "tests" / "data" / "external" / "tracelens"
HTA = ROOT / "tests" / "data" / "external" / "hta"
SGLANG = TRACELENS / "inference_sglang_decode_sglang_Qwen3-8B_decode.json.gz"
VLLM_REPLAY = TRACELENS / "inference_vllm_decode_full_graph_execution.json.gz"
ALEXNET = HTA / "a100_alexnet_memcpy_sync_permute.json.gz"
MI250 = HTA / "amd_mi250_minitoy_train.json.gz"


@lru_cache(maxsize=None)
def _doc(path: Path) -> dict:
    if not path.exists():
        pytest.skip(f"{path.name} not found")
    return build_report(analyze_file(path)).doc


def test_a_wait_inside_an_op_and_untraced_time_are_said_apart():
    """SGLang's step thread sat 463 ms in hipMemcpyWithStream inside aten::copy_ (the report had said "inside
    torch ops" beside "0.0 ms waiting for the GPU"), and its window runs 8.1 ms past the thread's last event
    (read as "Python and other host code")."""
    c = _doc(SGLANG)["cpu_time"]
    assert 460 < c["waiting_for_gpu_in_ops_ms"] <= c["in_ops_ms"]
    assert 7.5 < c["untraced_ms"] < 8.5 and c["untraced_ms"] <= c["outside_ops_ms"]
    # vLLM's replay window: 16.7 ms after the thread's last recorded event, not host code.
    c = _doc(VLLM_REPLAY)["cpu_time"]
    assert c["untraced_ms"] > 15.0


def test_every_costly_profiler_option_in_the_header_is_named():
    """vLLM's header turns on profile_memory and with_flops; the report had named with_stack + record_shapes."""
    d = _doc(VLLM_REPLAY)
    opts = d["whatif"]["profiler_options"]
    assert "profile_memory" in opts and "with_flops" in opts


def test_an_amd_gpu_has_no_cuda_compute_capability():
    """An MI250's gfx90a reads 9.0 in the header: no compute capability (a review read it as Hopper's)."""
    t = _doc(MI250)["trace"]
    assert t.get("compute_capability") is None and t["gfx_arch"] == "9.0" and t["vendor"] == "AMD"


def test_a_start_up_call_is_not_a_sync_waiting_for_queued_work():
    """AlexNet's cuDNN cudaFree blocked 6.5 s creating the context; the sync table said "6533.7 ms, queued GPU work"."""
    f = next(f for f in _doc(ALEXNET)["minor_findings"] if f["kind"] == "sync_stall")
    assert all(s["blocked_ms_per_step"] < 1000 for s in f["evidence"]["sync_sites"])


def test_a_cut_off_gpu_trace_is_not_called_cpu_only(tmp_path):
    """A user's H200 trace cut off after its first 98 events (Kineto writes the CPU's first) had been called
    "CPU-only trace", exit 0: the header names the GPU, so the GPU side was lost, not absent."""
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes((ROOT / "sample_traces" / "fp32_matmul__before.json.gz").read_bytes()[:3000])
    d = build_report(analyze_file(cut)).doc
    assert "CPU-only" not in d["verdict"] and "cut off" in d["verdict"] and "H200" in d["verdict"]
    assert d["trace"]["gpu_events_cut_off"] == "NVIDIA H200" and not d["trace"]["gpu_work_unrecorded"]
    assert any("cut off" in x for x in d["trace"]["limits"])
    from traceinsight.render import html, sections
    assert "cut off" in sections.no_gpu_label(d)
    assert "GPU side lost" in html.render([build_report(analyze_file(cut))])


def _cpu_only(path: Path, batch: int, unprofiled_ms: float | None = None) -> Path:
    """A CPU-only loop recorded with shapes: per step an aten::linear and an aten::relu on [batch, 256]; with
    `unprofiled_ms`, as `traceinsight record` writes it with the step it measured outside the profiler."""
    import json
    ev, t = [], 0.0
    for i in range(6):
        cost = 0.5 * batch
        for k, op in enumerate(("aten::linear", "aten::relu")):
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t + 5 + k * (cost + 5),
                       "dur": cost, "args": {"Input Dims": [[batch, 256], [256, 256]] if k == 0 else [[batch, 256]]}})
        end = t + 2 * cost + 20 + i
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "pid": 1, "tid": 1,
                   "ts": t, "dur": end - t})
        t = end + 1
    rec = {"traceinsight_record": {"unprofiled_step_ms": unprofiled_ms}} if unprofiled_ms else {}
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev} | rec))
    return path


def test_diff_flags_another_batch_size_between_cpu_only_runs(tmp_path):
    """A user's CPU-only record at batch 32 and 512, shapes recorded: diff had said like for like (the shapes
    check read only the GPU op table, which a CPU-only run lacks)."""
    from traceinsight.report.diff import diff_files
    d = diff_files(_cpu_only(tmp_path / "b.json", 32), _cpu_only(tmp_path / "a.json", 512))[0]
    assert not d["like_for_like"]
    w = " ".join(d["comparability_warnings"])
    assert "input shapes of the top ops differ" in w and "[[32, 256]" in w and "[[512, 256]" in w
    same = diff_files(_cpu_only(tmp_path / "b2.json", 32), _cpu_only(tmp_path / "a2.json", 32))[0]
    assert same["like_for_like"]


def test_a_measured_unprofiled_step_above_the_profiled_one_is_doubted():
    """A user's 2-rank gloo job measured 4.85 ms un-profiled beside 2.72 ms profiled, said without a word."""
    from traceinsight.render import sections
    from traceinsight.report.document import thaw
    d = thaw(_doc(ROOT / "sample_traces" / "launch_small_mlp__before.json.gz"))
    p = d["summary"]["median_step_ms"]
    for u, doubted in ((1.8 * p, True), (0.5 * p, False)):
        d["summary"] = dict(d["summary"], unprofiled_step_ms=u, unprofiled_step_method="measured by traceinsight record")
        assert ("measured longer than the profiled step" in sections.unprofiled(d)) is doubted


def test_diff_names_both_files_in_full_and_apart(tmp_path):
    """Piped at 80 columns the terminal header had cut the after file's name; `record` names every trace
    train.pt.trace.json.gz, and the Markdown header had read "train.pt.trace.json.gz -> train.pt.trace.json.gz"."""
    import io
    from rich.console import Console
    from traceinsight.render import diff_view
    from traceinsight.report.diff import diff_files
    for name in ("rec_s32", "rec_s512"):
        (tmp_path / name).mkdir()
    b = _cpu_only(tmp_path / "rec_s32" / "train.pt.trace.json", 32)
    a = _cpu_only(tmp_path / "rec_s512" / "train.pt.trace.json", 512)
    d = diff_files(b, a)[0]
    out = io.StringIO()
    diff_view.show(d, Console(file=out, width=80))
    text = out.getvalue()
    assert str(b) in text.replace("\n", "") and str(a) in text.replace("\n", "")
    md = diff_view.render_markdown(d)
    assert "rec_s32/train.pt.trace.json" in md.splitlines()[0] and "rec_s512/train.pt.trace.json" in md.splitlines()[0]


def test_a_cpu_only_html_report_gives_the_unprofiled_step_and_no_gpu_heading(tmp_path):
    """The HTML of a CPU-only record left out the un-profiled step the record measured (the terminal and
    Markdown gave it), and was headed "Why the GPU sits idle"."""
    from traceinsight.render import html
    rep = build_report(analyze_file(_cpu_only(tmp_path / "cpu.json", 32, unprofiled_ms=0.02)))
    assert rep.doc["summary"]["unprofiled_step_ms"] == 0.02
    page = html.render([rep])
    assert 'data-testid="unprofiled"' in page and "Why the GPU sits idle" not in page


XDIT = TRACELENS / "inference_xdit_flux.1_capture_traces_capture_trace_rank_0.json.gz"
VLLM_CAPTURE = TRACELENS / "inference_vllm_decode_full_capture_traces_graph_capture_rank_0.json.gz"


def test_a_graph_trees_recording_set_up_is_capture_not_launch_overhead():
    """xDiT's warm-up: CUDAGraphNode.__init__ (the recording inputs, the memory pool; 68-90 ms) launched almost
    nothing, and 39 ms of gaps there had been launch overhead (63 ms in all, of which the eager prompt encoding's
    ~24 ms is real)."""
    idle = _doc(XDIT)["summary"]["idle_by_cause_ms_median_per_step"]
    assert idle["launch_overhead"] < 35.0 and idle["graph_capture"] > 270.0


def test_the_profilers_cost_on_one_window_is_not_per_step():
    """vLLM's capture trace (no step markers, a one-time capture): "added about 48.34 ms to each step" had read as
    a per-step cost."""
    note = next(f for f in _doc(VLLM_CAPTURE)["notes"] if f["kind"] == "profiler_overhead")
    assert "to the window" in note["title"] and "each step" not in note["title"]


def test_a_wait_names_the_host_call_blocked_behind_it():
    """SGLang's decode: while the kernel waited 463 ms on an event the trace never records, the step thread sat in
    hipMemcpyWithStream (aten::copy_ in populate_from_forward_batch) behind it: half of the diagnosis, which the
    report had left to a minor sync finding's table."""
    f = _doc(SGLANG)["findings"][0]
    assert f["kind"] == "dependency_wait"
    w = f["evidence"]["largest_waits"][0]
    assert "hipMemcpyWithStream" in w["host_blocked_in"] and "populate_from_forward_batch" in w["host_blocked_in"]
    assert 460 < w["host_blocked_ms"] < 465
    assert "Meanwhile the host sat 463." in f["fix"]


def test_the_programs_own_ranges_can_be_the_steps(tmp_path):
    """AlexNet's PARAM benchmark marks its warm-up and its measured forward but no ProfilerStep: read as one 43 s
    window, CUDA start-up and all. The limits name the program's ranges, and --step-ranges takes them as steps."""
    d = _doc(ALEXNET)
    limit = next(x for x in d["trace"]["limits"] if x.startswith("No ProfilerStep markers"))
    assert "measure|forward" in limit and "--step-ranges" in limit
    own = build_report(analyze_file(ALEXNET, step_ranges=r"measure\|forward")).doc
    assert own["trace"]["step_source"] == "your ranges" and own["summary"]["steps"] == 1
    assert 79.0 < own["summary"]["median_step_ms"] < 80.5          # (the measured forward's range: 79.68 ms)
    assert not any(n["kind"] == "cuda_startup" for n in own["notes"])   # (start-up is outside it)
    assert any("--step-ranges" in x for x in own["trace"]["limits"])
    # A pattern nothing matches is said, and the steps stay as they were.
    none = analyze_file(ALEXNET, step_ranges="no such range")
    assert none.model.step_source == "whole trace"
    assert any("matches --step-ranges" in w for w in none.model.warnings)


def test_step_ranges_on_the_command_line(tmp_path):
    from typer.testing import CliRunner
    from traceinsight.cli import app
    r = CliRunner().invoke(app, ["analyze", str(ALEXNET), "--step-ranges", "measure(", "-q"])
    assert r.exit_code == 2 and "not a regular expression" in r.stderr and "Traceback" not in r.stderr
    out = tmp_path / "a.json"
    r = CliRunner().invoke(app, ["analyze", str(ALEXNET), "--step-ranges", r"measure\|forward", "-q", "--json", str(out)])
    assert r.exit_code == 0, r.stderr
    import json
    assert json.loads(out.read_text())["trace"]["step_source"] == "your ranges"


@pytest.mark.parametrize("args, said", [(["analyze"], "Missing argument"), (["analyze", "x.json", "--bogus"], "--bogus"),
                                        (["record"], "Missing argument 'SCRIPT"), (["diff", "a"], "Missing argument")])
def test_a_bad_command_line_is_one_line_and_exit_2(args, said):
    """A user's `traceinsight record` with no script printed 76 lines of help to stdout and nothing on stderr; a
    missing argument or an unknown option was a usage line and a five-line box."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", "from traceinsight.cli import main; main()", *args],
                       capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("traceinsight: error: ") and said in lines[0] and "--help" in lines[0]
    assert "Traceback" not in p.stderr and not p.stdout.strip()


def test_the_regression_gate_exits_1_through_the_real_entry_point():
    """cli.main runs typer with standalone_mode=False (one-line usage errors): the gate's exit code still comes
    back (CliRunner, which the gate's own tests use, does not go through main)."""
    import subprocess
    import sys
    samples = ROOT / "sample_traces"
    p = subprocess.run([sys.executable, "-c", "from traceinsight.cli import main; main()", "diff",
                        str(samples / "launch_small_mlp__after.json.gz"), str(samples / "launch_small_mlp__before.json.gz"),
                        "--fail-on-regression", "5"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    ok = subprocess.run([sys.executable, "-c", "from traceinsight.cli import main; main()", "--version"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.startswith("traceinsight ")


def test_a_copy_that_waited_only_for_itself_does_not_own_the_dispatch_after_it():
    """MI250's cold step: two 5x128 copies to the host with nothing queued before them waited 22 and 7 us for
    themselves; the 0.25 ms of dispatch after each (aten::linear) had been counted as the sync's refill: 0.42 ms of
    sync_stall where the host was blocked about 0.03 ms. Made asynchronous, the dispatch would overlap the copy call
    and no more: the refill it owns is capped at the time it blocked."""
    idle = _doc(MI250)["summary"]["idle_by_cause_ms_median_per_step"]
    assert 0.02 < idle.get("sync_stall", 0.0) < 0.2
    # A large blocking copy keeps its refill: 16.8 MB to pageable memory, the dispatch after it overlapped by the copy.
    big = _doc(ROOT / "sample_traces" / "matrix" / "h100" / "blocking_pageable_d2h__before__default.json.gz")
    assert big["summary"]["idle_by_cause_ms_median_per_step"]["pageable_memcpy"] > 0.2


def test_diff_of_a_trace_with_itself_is_said(tmp_path):
    """A user's `traceinsight diff A A` gave no word that both sides were one file."""
    from typer.testing import CliRunner
    from traceinsight.cli import app
    t = str(ROOT / "sample_traces" / "launch_small_mlp__before.json.gz")
    r = CliRunner().invoke(app, ["diff", t, t, "-q"])
    assert r.exit_code == 0 and "compares a trace with itself" in r.stderr
    other = str(ROOT / "sample_traces" / "launch_small_mlp__after.json.gz")
    assert "with itself" not in CliRunner().invoke(app, ["diff", t, other, "-q"]).stderr
