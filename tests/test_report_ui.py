"""What a perf engineer sees first, in the terminal, the Markdown and the HTML page: a CPU-only run is a
neutral notice and a CPU time breakdown (no alarm, no "GPU idle 100%", no "None%", no empty chart);
notes about the measurement are never ranked as fixes; what the trace cannot show sits by the verdict;
the header names the whole file, a single-rank trace has no "(rank 0)", one step is "1 step", a
warning is printed once, an AMD GPU is named."""
from __future__ import annotations

import re
import shutil

import pytest

from conftest import HTA_DIR, TRACELENS_DIR, X, write_trace
from traceinsight.cli.common import analyze_and_write
from traceinsight.render import html as html_r, markdown as md_r, terminal
from traceinsight.report.document import freeze, thaw

MI300 = TRACELENS_DIR / "mi300_resnet_act_checkpoint.json.gz"      # AMD MI300X, communication-bound
MI210 = TRACELENS_DIR / "mi210_gpu_only_trace_gpu_only_trace.json.gz"  # one window, no ProfilerStep
VLLM = TRACELENS_DIR / "inference_vllm_decode_full_graph_execution.json.gz"  # AMD, device name left empty


def cpu_only_trace(path, steps: int = 3):
    """A CPU-only training loop: per step an outer op with a nested op, and Python time between ops."""
    ev = []
    for s in range(steps):
        t = s * 10_000.0
        ev.append(X(f"ProfilerStep#{s + 1}", "user_annotation", t, 9_000))
        ev.append(X("aten::linear", "cpu_op", t + 100, 5_000))
        ev.append(X("aten::addmm", "cpu_op", t + 200, 4_500))
        ev.append(X("aten::relu", "cpu_op", t + 6_000, 1_000))
    return write_trace(path, {"schemaVersion": 1, "traceEvents": ev})


def _text(reports, width: int = 100) -> str:
    from rich.console import Console
    con = Console(width=width, record=True, file=open("/dev/null", "w"))
    terminal.show(reports, console=con)
    return con.export_text()


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    p = cpu_only_trace(tmp_path_factory.mktemp("cpu") / "cpu_train.json")
    (r,) = analyze_and_write([p])
    return r


def test_cpu_only_terminal_is_a_cpu_time_breakdown(cpu_report):
    out = _text([cpu_report])
    assert "CPU time per step" in out and "aten::addmm" in out and "in torch ops" in out
    assert "GPU idle by cause" not in out and "idle 100" not in out and "GPU busy" not in out


def test_cpu_only_markdown_has_no_gpu_idle_and_no_none_percent(cpu_report):
    md = md_r.render([cpu_report])
    assert "None%" not in md and "GPU idle 100" not in md and "replay error" not in md
    assert "CPU only" in md and "<summary>CPU time by op</summary>" in md and "`aten::addmm`" in md


def test_cpu_only_html_is_neutral_with_the_cpu_breakdown_and_no_empty_charts(cpu_report):
    page = html_r.render([cpu_report])
    verdict = re.search(r'<p class="verdict ([a-z]+)" data-testid="verdict">', page).group(1)
    assert verdict == "neutral"
    assert 'data-testid="cpu-only"' in page and 'data-testid="cpu-time"' in page and "aten::addmm" in page
    assert 'class="bar100"' not in page and 'class="chart"' not in page   # no empty GPU charts
    assert "What-if replay" not in page and "GPU busy / idle" not in page


def test_cpu_time_splits_ops_from_python(cpu_report):
    c = cpu_report.doc["cpu_time"]
    assert c["step_ms"] == 9.0 and c["in_ops_ms"] == 6.0 and c["outside_ops_ms"] == 3.0
    top = {o["op"]: o for o in c["top_ops"]}
    assert top["aten::addmm"]["self_ms_per_step"] == 4.5
    assert top["aten::linear"]["self_ms_per_step"] == 0.5 and top["aten::linear"]["total_ms_per_step"] == 5.0


@pytest.fixture(scope="module")
def healthy():
    (r,) = analyze_and_write([MI210])   # healthy (89% busy), with a profiler note
    return r


def test_a_healthy_trace_shows_notes_not_fix_cards(healthy):
    d = healthy.doc
    assert d["healthy"] and d["verdict"].startswith("Healthy")
    page = html_r.render([healthy])
    assert '<span class="rank">#1</span>' not in page            # no numbered fix card
    assert 'data-testid="notes"' in page and "Notes about the measurement" in page
    md = md_r.render([healthy])
    assert "| 1 |" not in md and "Notes about the measurement" in md
    out = _text([healthy])
    assert "Fixes, ranked" not in out and "Notes about the measurement" in out


def _with(report, **trace_extra):
    doc = thaw(report.doc)
    doc["trace"].update(trace_extra)
    note = dict(doc["findings"][0] if doc["findings"] else doc["minor_findings"][0])
    note.update(kind="a_measurement_note", title="The profiler inflated CPU time", fix="Record without with_stack.")
    doc["notes"] = [note]
    return type(report)(doc=freeze(doc), timeline=report.timeline, warnings=report.warnings)


def test_notes_and_limits_from_the_document_are_rendered_neutrally(tmp_path):
    (r,) = analyze_and_write([HTA_DIR / "a100_cuda_event_sync.json.gz"])
    r = _with(r, limits=["what the CPU did: the trace has no cpu_op events"])
    page = html_r.render([r])
    v, lim, notes = (page.index('data-testid="verdict"'), page.index('data-testid="limits"'),
                     page.index('data-testid="notes"'))
    assert v < lim < page.index("Fixes, ranked")              # the limits sit by the verdict
    assert "The profiler inflated CPU time" in page[notes:] and "a_measurement_note" not in page
    md = md_r.render([r])
    assert "**Limits of this trace:** what the CPU did" in md
    assert "The profiler inflated CPU time" in md.split("Notes about the measurement")[1]
    out = _text([r])
    assert "Limits of this trace: what the CPU did" in out
    assert out.index("Notes about the measurement") > out.index("Fixes, ranked")


def test_terminal_header_step_count_rank_and_warning(run_cli, tmp_path):
    long_name = tmp_path / ("a_rather_long_trace_file_name_from_a_training_run_on_the_cluster_" * 2 + "mi210.json.gz")
    shutil.copy(MI210, long_name)
    p = run_cli(["analyze", long_name])
    assert p.returncode == 0, p.stderr
    flat = p.stdout.replace("\n", "")
    assert str(long_name) in flat                                # the whole file name, wrapped not cut
    assert "1 step (" in p.stdout and "1 steps" not in p.stdout
    assert "(rank" not in p.stdout                               # a single process: no rank
    both = p.stdout + p.stderr
    assert both.count("no ProfilerStep annotations") == 1


def test_terminal_names_the_rank_of_a_multi_rank_job(run_cli):
    p = run_cli(["analyze", HTA_DIR / "a100_rank0_of2_nccl.json.gz"])
    assert "(rank 0 of 2)" in p.stdout


def test_amd_gpus_are_named(run_cli, tmp_path):
    p = run_cli(["analyze", MI300, VLLM, "--markdown", tmp_path / "t.md"])
    assert p.returncode == 0, p.stderr
    assert "GPU AMD Instinct MI300X" in p.stdout
    assert "unknown GPU" not in p.stdout and "not named in the trace (an AMD GPU: a ROCm trace, gfx version 9.4 (no CUDA compute capability))" in p.stdout
    assert "unknown GPU" not in (tmp_path / "t.md").read_text()
