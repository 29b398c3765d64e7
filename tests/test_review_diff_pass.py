"""An expert review of `traceinsight diff` on the recorded sample pairs and the validation matrix: each defect it
found, pinned on the real traces' outputs."""
from __future__ import annotations

import functools
import glob
import json
import statistics
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from traceinsight.cli import app
from traceinsight.render import diff_view
from traceinsight.report.analyze import analyze_file
from traceinsight.report.diff import _fmt_ms, compare
from traceinsight.report.diff_inputs import KERNEL_OVERLAP_MIN, load_side
from traceinsight.report.diff_regression import RUN_TO_RUN_REL, regression

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
MATRIX = SAMPLES / "matrix"
PAIRS = ("fp32_matmul", "host_preprocess", "launch_small_mlp", "launch_tiny_conv", "layout_nchw_fp16", "pageable_h2d",
         "sync_mask_loss", "unfused_optimizer")


@functools.lru_cache(maxsize=None)
def _side(path: Path):
    if not path.exists():
        pytest.skip(f"{path} not in this checkout")
    return load_side(path)


def _diff(b: Path, a: Path) -> dict:
    return compare(_side(b), _side(a))


def _pair(w: str) -> dict:
    return _diff(SAMPLES / f"{w}__before.json.gz", SAMPLES / f"{w}__after.json.gz")


def _cli(*args):
    r = CliRunner().invoke(app, ["diff", *map(str, args)])
    return r.exit_code, r.stdout, r.stderr


def _terminal(d: dict) -> str:
    out = StringIO()
    diff_view.show(d, Console(file=out, width=200))
    return out.getvalue()


# 1 ------------------------------------------------------------------------- like for like

@pytest.mark.parametrize("before", ["fp32_matmul", "launch_small_mlp"])
def test_a_graph_replay_of_another_program_is_not_like_for_like(before):
    # launch_tiny_conv's after side replays a CUDA graph: almost no ops, so the shapes check compared nothing
    # and the pair had read like for like, "faster by 30.18 ms (99%)".
    d = _diff(SAMPLES / f"{before}__before.json.gz", SAMPLES / "launch_tiny_conv__after.json.gz")
    assert d["like_for_like"] is False
    assert d["kernel_overlap"] < KERNEL_OVERLAP_MIN
    assert any("run different kernels" in w for w in d["comparability_warnings"])
    assert "Not like for like" in diff_view.render_markdown(d)


@pytest.mark.parametrize("w", PAIRS)
def test_no_sample_pair_is_called_not_like_for_like(w):
    # Genuine before/after pairs of one program, kernels swapped by TF32, channels_last, a fused optimizer or a
    # graph replay: like for like, and said on what.
    d = _pair(w)
    assert d["like_for_like"] is True, d["comparability_warnings"]
    assert d["comparability_checked"]


def test_a_compiled_side_whose_kernels_cannot_be_matched_is_unknown_not_true():
    # torch.compile fuses every elementwise kernel into one Triton kernel; no shapes in the default setting: nothing
    # left to compare, which the diff says rather than "like for like".
    d = _diff(MATRIX / "h200" / "fusion_elementwise__before__default.json.gz",
              MATRIX / "h200" / "fusion_elementwise__after__default.json.gz")
    assert d["like_for_like"] is None and not d["comparability_warnings"]
    assert "Like for like: unknown" in diff_view.render_markdown(d)
    assert 'data-testid="like-unknown"' in diff_view.render_html(d)


# 2 ------------------------------------------------------------------------- profiler options

def test_a_profiler_option_change_alone_does_not_fail_the_gate(tmp_path):
    b = MATRIX / "h200" / "launch_tiny_conv__before__default.json.gz"
    a = MATRIX / "h200" / "launch_tiny_conv__before__stack.json.gz"
    if not (b.exists() and a.exists()):
        pytest.skip("matrix traces not in this checkout")
    code, out, err = _cli(b, a, "--json", tmp_path / "d.json", "--fail-on-regression")
    d = json.loads((tmp_path / "d.json").read_text())
    st = d["step_time"]
    # The profiled steps differ by the profiler's cost, which the gate had called a regression.
    mb, ma = st["before"]["median_ms"], st["after"]["median_ms"]
    assert st["profiled_delta_pct"] == pytest.approx(100 * (ma - mb) / mb, abs=0.01) and st["profiled_delta_pct"] > 10
    assert d["profiler_options_differ"] and d["before"]["profiler_options"] != d["after"]["profiler_options"]
    assert st["basis"] == "unprofiled_estimate" and d["regression"]["basis"] == "unprofiled_estimate"
    sb, sa = _side(b).doc["summary"], _side(a).doc["summary"]
    assert st["delta_ms"] == pytest.approx(sa["unprofiled_step_ms"] - sb["unprofiled_step_ms"], abs=1e-3)
    assert code == 0 and not d["regression"]["regressed"], err
    assert "profiler options differ" in err and "profiler options differ" in d["headline"]
    # Shapes on one side only: ops matched by name, no fake churn.
    assert "name only" in d["ops"]["matched_by"]
    churn = [r for r in d["ops"]["rows"] if r["status"] in ("added", "removed")]
    assert not [r for r in churn if r["op"] == "aten::conv2d"], churn


# 3 ------------------------------------------------------------------------- overlapping causes

def test_the_causes_table_says_its_rows_overlap_and_sums_nothing():
    d = _pair("unfused_optimizer")
    rows = {c["kind"]: c for c in d["causes"]}
    # The real overlap: the two causes that went down claim more than the step lost.
    gone = rows["unfused_optimizer"]["before_ms_per_step"] - (rows["unfused_optimizer"]["after_ms_per_step"] or 0)
    lo = -rows["launch_overhead"]["delta_ms_per_step"]
    assert gone + lo > -d["step_time"]["delta_ms"] > 0
    note = d["causes_note"]
    assert "can overlap" in note and "not added up" in note
    assert note in diff_view.render_markdown(d)
    assert "not added up" in _terminal(d)
    assert 'data-testid="causes-note"' in diff_view.render_html(d)
    assert not any("total" in k for c in d["causes"] for k in c)


# 4 ------------------------------------------------------------------------- not reported is not 0

def test_a_kind_a_side_did_not_report_has_no_figure_there():
    d = _pair("unfused_optimizer")
    rows = {c["kind"]: c for c in d["causes"]}
    fc = rows["fusion_candidates"]
    after_doc = _side(SAMPLES / "unfused_optimizer__after.json.gz").doc
    reported = {f["kind"]: f for f in after_doc["findings"] + after_doc["minor_findings"]}
    assert fc["before_ms_per_step"] is None and fc["status"] == "not reported before"
    assert fc["after_ms_per_step"] == pytest.approx(reported["fusion_candidates"]["measured_cost_ms_per_step"])
    assert "fusion_candidates" not in d["findings"]["new"]
    uo = rows["unfused_optimizer"]
    # The fixed kind, found no more after, is resolved (its analysis ran, the per-tensor loop is gone): no figure.
    assert uo["after_ms_per_step"] is None and uo["status"] == "resolved" and uo["resolved_how"] == "gone"
    assert "not reported" in diff_view.render_markdown(d)
    # A minor finding's figure is used, not 0.
    before_doc = _side(SAMPLES / "unfused_optimizer__before.json.gz").doc
    minor = {f["kind"]: f for f in before_doc["minor_findings"]}
    for c in d["causes"]:
        if c["reported_before"] == "minor" and minor[c["kind"]].get("measured_cost_ms_per_step") is not None:
            assert c["before_ms_per_step"] == pytest.approx(minor[c["kind"]]["measured_cost_ms_per_step"])


def test_a_profiled_cost_that_is_mostly_the_profiler_says_its_unprofiled_share():
    d = _pair("layout_nchw_fp16")
    lo = next(f for f in _side(SAMPLES / "layout_nchw_fp16__after.json.gz").doc["findings"]
              if f["kind"] == "launch_overhead")
    assert lo["estimated_savings_ms"] < 0.5 * lo["measured_cost_ms_per_step"]
    note = next(n for n in d["notes"] if n.startswith("New or larger after the change: launch_overhead"))
    assert "mostly the profiler's own cost" in note and f"{lo['estimated_savings_ms']:.3f} ms" in note


# 5 ------------------------------------------------------------------------- one band, said

def _band_cases():
    return [(SAMPLES / f"{w}__before.json.gz", SAMPLES / f"{w}__after.json.gz") for w in PAIRS] + [
        (MATRIX / "h200" / "fp32_matmul__before__default.json.gz", MATRIX / "h200" / "fp32_matmul__before__stack.json.gz"),
        (MATRIX / "h200_cleanA" / "healthy_convnet__before__default.json.gz",
         MATRIX / "h200" / "healthy_convnet__before__default.json.gz")]


@pytest.mark.parametrize("b, a", _band_cases(), ids=lambda p: p.parent.name + "/" + p.name.split(".")[0])
def test_the_sentence_names_the_band_the_decision_used(b, a):
    for d in (_diff(b, a), _diff(a, b)):
        st = d["step_time"]
        gate = regression(st, 0.0)
        # One band: the sentence's, the table's, the gate's noise_ms, and the one the decision used.
        assert st["noise_band"] in st["sentence"]
        assert st["noise_band"].startswith(f"±{_fmt_ms(st['noise_used_ms'])}")
        assert gate["noise_ms"] == st["noise_used_ms"]
        if st["direction"] == "slower":
            assert st["noise_band"] in gate["reason"]
        if st["basis"] == "profiled":
            assert (st["significance"] == "within_noise") == (abs(st["delta_ms"]) <= st["noise_used_ms"])


def test_unknown_noise_is_null():
    d = _diff(SAMPLES / "launch_tiny_conv__before.json.gz", ROOT / "tests" / "data" / "external" / "hta" /
              "cpu_only.pt.trace.json.gz")
    st = d["step_time"]
    assert st["significance"] == "unknown"
    assert st["noise_ms"] is None and st["noise_used_ms"] is None
    gate = regression(st, 0.0)
    assert gate["noise_ms"] is None and "noise is unknown" in gate["reason"]


# 6 ------------------------------------------------------------------------- run-to-run floor

def _run_to_run_deviation() -> float:
    """Median deviation of a run's un-profiled median step from its workload's median over all runs (same GPU
    model, same variant), over the committed matrix's manifests."""
    by: dict = {}
    for f in glob.glob(str(MATRIX / "*" / "manifest.json")):
        m = json.loads(Path(f).read_text())
        for e in m.get("entries") or []:
            med = (e.get("step_ms") or {}).get("median")
            if med:
                by.setdefault((m.get("gpu"), e["workload"], e["variant"]), []).append(med)
    devs = [abs(x / statistics.median(v) - 1) for v in by.values() if len(v) >= 3 for x in v]
    if len(devs) < 100:
        pytest.skip("matrix manifests not in this checkout")
    return statistics.median(devs)


def test_the_run_to_run_floor_is_drawn_from_the_matrix():
    dev = _run_to_run_deviation()
    assert dev <= RUN_TO_RUN_REL <= 1.5 * dev, dev


def test_a_bare_gate_passes_two_runs_of_the_same_code():
    b = MATRIX / "h200_cleanA" / "healthy_convnet__before__default.json.gz"
    a = MATRIX / "h200" / "healthy_convnet__before__default.json.gz"
    if not (b.exists() and a.exists()):
        pytest.skip("matrix traces not in this checkout")
    code, _, err = _cli(b, a, "-q", "--fail-on-regression")
    assert code == 0 and "no regression" in err and f"{100 * RUN_TO_RUN_REL:g}% of the step" in err, err
    assert _diff(b, a)["step_time"]["delta_ms"] > 0     # slower, within the floor


@pytest.mark.parametrize("w", PAIRS)
def test_every_sample_fix_reversed_still_fails_the_gate(w):
    d = _diff(SAMPLES / f"{w}__after.json.gz", SAMPLES / f"{w}__before.json.gz")
    gate = regression(d["step_time"], 0.0)
    assert gate["regressed"], gate["reason"]


# 7 ------------------------------------------------------------------------- op calls

def test_the_op_count_is_calls_not_gpu_activities():
    d = _pair("fp32_matmul")
    row = next(r for r in d["ops"]["rows"] if r["op"] == "aten::linear")
    # From the trace itself: aten::linear calls in the full steps.
    a = analyze_file(SAMPLES / "fp32_matmul__after.json.gz")
    fs, cpu = a.full_steps, a.model.cpu
    lin = cpu[cpu["name"] == "aten::linear"]
    inside = sum(((lin["ts"] >= s.start) & (lin["ts"] < s.end)).sum() for s in fs.itertuples())
    assert row["after_count_per_step"] == pytest.approx(inside / len(fs))
    gpu_events = next(r for r in _side(SAMPLES / "fp32_matmul__after.json.gz").doc["top_ops"]
                      if r["op"] == "aten::linear")["kernels_per_step"]
    assert gpu_events > row["after_count_per_step"] == row["before_count_per_step"]


# 8 ------------------------------------------------------------------------- pre-window steps

def test_a_step_holding_prewindow_work_is_left_out_of_the_distribution():
    d = _pair("fp32_matmul")
    st = d["step_time"]["before"]
    raw = [s["duration_ms"] for s in _side(SAMPLES / "fp32_matmul__before.json.gz").doc["steps"] if not s["partial"]]
    assert max(raw) > 2 * statistics.median(raw)          # the 91 ms first step
    assert [s["duration_ms"] for s in st["left_out"]] == [max(raw)]
    assert st["max_ms"] < 1.1 * st["median_ms"] and st["n"] == len(raw) - 1
    assert any("before the profiling window" in n for n in d["notes"])
