"""diff for CI: --fail-on-regression [PCT] gates on the measured step time; a cause that grew is never
called resolved."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from test_diff import synth
from traceinsight.analyses import CAUSES
from traceinsight.cli import app
from traceinsight.render import diff_view
from traceinsight.report import diff as D


def _doc(step_ms: float, findings: list, idle: dict) -> dict:
    return {"schema_version": 1, "trace": {"file": "x", "gpu": "NVIDIA H100", "step_source": "ProfilerStep"},
            "verdict": "", "healthy": False,
            "summary": {"steps": 5, "full_steps": 5, "median_step_ms": step_ms, "median_gpu_busy_ms": 5.0,
                        "median_gpu_idle_ms": step_ms - 5.0, "idle_by_cause_ms_median_per_step": idle},
            "findings": findings, "minor_findings": [],
            "steps": [{"step": i, "duration_ms": step_ms + j, "partial": False}
                      for i, j in enumerate((0.0, 0.02, -0.02, 0.01, -0.01))],
            "top_kernels": [], "top_ops": []}


def test_a_cause_that_grew_is_not_resolved(tmp_path):
    """Reported as a finding before, not after (a longer step pushed it down the list), but its cost
    went from 18.2 to 21.7 ms per step: grown, drawn red, never a green "resolved"."""
    cause = CAUSES[1]
    f = {"kind": cause, "title": "t", "estimated_savings_ms": 15.0, "measured_cost_ms_per_step": 18.2, "fix": "x"}
    before, after = _doc(40.0, [f], {cause: 18.2}), _doc(44.0, [], {cause: 21.7})
    pb, pa = tmp_path / "b.json", tmp_path / "a.json"
    pb.write_text(json.dumps(before))
    pa.write_text(json.dumps(after))
    d = D.diff_files(pb, pa)[0]
    row = next(c for c in d["causes"] if c["kind"] == cause)
    assert (row["before_ms_per_step"], row["after_ms_per_step"]) == (18.2, 21.7)
    assert row["status"] == "grown" and row["resolved_how"] is None
    assert cause not in d["findings"]["resolved"]
    assert not any("reduced" in n or "went down" in n for n in d["notes"])
    html = diff_view.render_html(d)
    assert 'class="st st-resolved"' not in html and 'class="st st-grown">grown' in html
    assert "| grown |" in diff_view.render_markdown(d)


def test_a_cause_that_shrank_out_of_the_findings_is_resolved(tmp_path):
    cause = CAUSES[1]
    f = {"kind": cause, "title": "t", "estimated_savings_ms": 1.5, "measured_cost_ms_per_step": 2.0, "fix": "x"}
    pb, pa = tmp_path / "b.json", tmp_path / "a.json"
    pb.write_text(json.dumps(_doc(10.0, [f], {cause: 2.0})))
    pa.write_text(json.dumps(_doc(8.0, [], {cause: 0.1})))
    row = next(c for c in D.diff_files(pb, pa)[0]["causes"] if c["kind"] == cause)
    assert row["status"] == "resolved" and row["resolved_how"] == "gone"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    return (synth(d / "before.json.gz"), synth(d / "slower.json.gz", scale=1.3),
            synth(d / "faster.json.gz", scale=0.7), d)


def _gate(*args):
    r = CliRunner().invoke(app, ["diff", *map(str, args), "-q"])
    return r.exit_code, r.stderr


@pytest.mark.parametrize("flag, slower, code", [
    ([], True, 0),                                  # no gate asked: the diff never fails
    (["--fail-on-regression"], True, 1),            # slower beyond noise
    (["--fail-on-regression", "10"], True, 1),      # ~30% slower > 10%
    (["--fail-on-regression=50"], True, 0),         # ~30% slower, under the 50% asked for
    (["--fail-on-regression"], False, 0),           # faster: never a regression
])
def test_fail_on_regression_exit_status_and_json(pair, tmp_path, flag, slower, code):
    before, slow, fast, _ = pair
    out = tmp_path / "diff.json"
    rc, err = _gate(before, slow if slower else fast, "--json", out, *flag)
    assert rc == code, err
    reg = json.loads(out.read_text())["regression"]
    # Without the gate the block still says what it would answer; only the exit status ignores it.
    assert reg["checked"] is bool(flag) and reg["regressed"] is (code == 1 or (not flag and slower))
    assert reg["significance"] in ("beyond_noise", "well_beyond_noise")
    assert reg["reason"].startswith("slower by" if slower else "not slower")
    if flag:
        assert ("REGRESSION" if code else "no regression") in err


def test_the_gate_option_may_come_before_the_traces(pair, tmp_path):
    before, slow, _, _ = pair
    rc, err = _gate("--fail-on-regression", before, slow)
    assert rc == 1 and "REGRESSION: slower by" in err


def test_same_trace_is_no_regression(pair):
    before = pair[0]
    rc, err = _gate(before, before, "--fail-on-regression", "0")
    assert rc == 0 and "no regression: not slower" in err


def test_negative_threshold_is_a_usage_error(pair):
    before, slow, _, _ = pair
    rc, err = _gate(before, slow, "--fail-on-regression=-5")
    assert rc == 2 and "0 or more" in err


def test_the_headline_and_the_gate_name_one_noise_band():
    # Steps of 2.130 +- 0.001 ms: the noise (0.0015 ms) is below its floor (0.5% of the step, 0.011 ms). The
    # headline had said "±0.011 ms" and the gate's reason "±0.0015 ms" for the same comparison.
    from traceinsight.report.diff_regression import regression

    def doc(ms):
        return {"steps": [{"duration_ms": ms + d} for d in (-0.001, 0.0, 0.001, 0.0, 0.001)]}
    b, a = D.step_stats(doc(2.13)), D.step_stats(doc(2.135))
    ch = D.step_change(b, a)
    assert ch["noise_floor_ms"] > ch["noise_ms"]
    assert ch["noise_band"].startswith(f"±{D._fmt_ms(ch['noise_floor_ms'])}, the noise floor")
    assert ch["noise_band"] in ch["sentence"]
    assert ch["noise_used_ms"] == ch["noise_floor_ms"]       # the table's "change" row shows the band used
    assert ch["noise_band"] in regression({**ch, **{"before": b, "after": a}}, 0.0)["reason"]
