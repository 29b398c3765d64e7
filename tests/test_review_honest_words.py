"""Review notes on what the reports said in words. On TraceLens's small-BERT inference trace (a profiling harness,
moca, runs the model): the harness's own torch.cuda.synchronize() at the step's edge was advised away as if it were
the program's, and the compile alternative was said to save "about 0.0 ms". On a compiled GPT-2 recorded with stacks:
the verdict gave "about 4.4x faster" and a 17.43 ms saving from an un-profiled step estimated at 22.6 ms against 8.5 ms
measured."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from traceinsight.analyses.sync_advice import harness_timing
from traceinsight.render.sections import alternatives
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import build_report

BERT = Path(__file__).resolve().parents[1] / "tests/data/external/tracelens/h100_gaunernst_bert-small-uncased__1016001.json.gz"


@lru_cache(maxsize=None)
def _doc() -> dict:
    if not BERT.exists():
        pytest.skip("the BERT trace is not in the test data")
    return build_report(analyze_file(BERT)).doc


def _sync(d: dict) -> dict:
    return next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")


def test_a_harness_timing_sync_is_named_the_measurements_and_kept():
    f = _sync(_doc())
    sites = {s["op"]: s for s in f["evidence"]["sync_sites"]}
    harness = sites["cudaDeviceSynchronize"]
    assert "run_torch_profiler()" in harness["source"] and harness["at_step_edge"]
    assert harness_timing(harness) and not harness_timing(sites["aten::is_nonzero"])
    # Its advice says to leave it; the model's own `if tensor:` keeps its advice.
    assert "cudaDeviceSynchronize: the measurement's own, not the program's" in f["fix"]
    assert "drop it from the loop" not in f["fix"]
    assert "aten::is_nonzero: `if tensor:` syncs" in f["fix"]
    # The title names the program's sync, not the harness's (a review), and the library's check gets its own advice.
    assert f["title"].startswith("The CPU waits for the GPU in aten::is_nonzero") and "once per step" in f["title"]
    assert "pass attention_mask=None when no sequence is padded" in f["fix"]


def test_harness_rule_needs_a_harness_frame_at_the_step_edge():
    site = {"call": "cudaDeviceSynchronize", "at_step_edge": True,
            "source": "synchronize() in train_step(), def at train.py:40"}
    assert not harness_timing(site)                                   # the program's own loop
    # A loop that times its own steps pays for the sync (holdout22_sync_step_timer measured it): not a harness.
    assert not harness_timing({**site, "source": "synchronize() in step(), def at workloads/sync_step_timer.py:80"})
    assert harness_timing({**site, "source": "synchronize() in time_step(), def at bench.py:12"})
    assert not harness_timing({**site, "source": "synchronize() in time_step(), def at bench.py:12",
                               "at_step_edge": False})                 # inside the step: it splits the work
    assert not harness_timing({**site, "call": "cudaMemcpyAsync",
                               "source": "item() in run_torch_profiler(), def at profile.py:3"})


def test_an_alternative_that_saves_nothing_says_so_in_words():
    f = next(f for f in _doc()["findings"] if f["kind"] == "launch_overhead")
    alt = f["alternatives"][0]
    assert alt["option"] == "torch_compile" and alt["estimated_savings_ms"] <= 0.05 * f["estimated_savings_ms"]
    # Its range spans the eager -> compiled pairs' whole spread (0.6-2.2x the eager CPU per kernel): a review read
    # "range 0.0-0.028 ms" beside transformers' models measured at up to 1.8x compiled.
    rng = alt["savings_range_ms"] or alt["likely_savings_range_ms"]
    assert rng[1] > 0.2 * f["estimated_savings_ms"]
    assert f"saves about {alt['estimated_savings_ms']} ms per step" in alternatives(f)
    # Where the range too is next to nothing, the words say so.
    none = {**f, "alternatives": [{**alt, "savings_range_ms": [0.0, 0.01], "likely_savings_range_ms": None}]}
    line = alternatives(none)
    assert "saves next to nothing, about " in line and "saves about" not in line
    big = {**f, "alternatives": [{**alt, "estimated_savings_ms": 0.5 * f["estimated_savings_ms"]}]}
    assert f"saves about {0.5 * f['estimated_savings_ms']} ms per step" in alternatives(big)


GPT2_STACK = Path(__file__).resolve().parents[1] / "sample_traces/matrix/h200_clean50A"


@pytest.mark.parametrize("setting", ["stack", "default"])
def test_no_multiple_from_the_least_certain_unprofiled_step(setting):
    d = build_report(analyze_file(GPT2_STACK / f"holdout43_hf_gpt2_small_compile__after__{setting}.json.gz")).doc
    limited = any("Compiled code recorded with with_stack" in x for x in d["trace"]["limits"])
    assert limited == (setting == "stack")
    assert d["findings"][0]["kind"] == "launch_overhead"
    if limited:
        # The step the fix leaves and its GPU work are said; no saving, share or multiple from the doubtful figure (a
        # review: "would save about 17.43 ms" of a step measured at 8.49 ms; "about 94%" idle un-profiled was 84%).
        assert "would leave a step of about" in d["verdict"] and "of it GPU work" in d["verdict"]
        assert "what that saves is not given" in d["verdict"]
        assert "x faster" not in d["verdict"] and "would save" not in d["verdict"]
        assert "without the profiler" not in d["verdict"]
    else:
        assert "x faster" in d["verdict"] and "would save about" in d["verdict"]


ALEXNET = Path(__file__).resolve().parents[1] / "tests/data/external/hta/a100_alexnet_memcpy_sync_permute.json.gz"


def test_a_trace_without_step_markers_says_its_figures_of_the_window():
    # HTA's AlexNet has no ProfilerStep: its one-time weight copies had read "244.4 MB per step".
    d = build_report(analyze_file(ALEXNET)).doc
    assert d["trace"]["step_source"] == "whole trace"
    pageable = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "pageable_memcpy")
    assert pageable["title"].startswith("244.4 MB in the window copied from pageable host memory")
    words = [f["title"] for f in d["findings"] + d["minor_findings"] + d["notes"]] + [d["verdict"]]
    assert not [w for w in words if "per step" in w or "of each step" in w or "median step" in w]
    # The advice too (a review: "Each step copies 244.4 MB ..."), and the terminal's facts.
    fixes = " ".join(f["fix"] for f in d["findings"] + d["minor_findings"])
    assert "Each step" not in fixes and "The window copies 244.4 MB" in fixes
    from traceinsight.render.sections import per_step
    assert per_step(d) == "in the window"
    # The field names and numbers stay what they are.
    assert pageable["measured_cost_ms_per_step"] > 0


def test_a_trace_with_steps_keeps_per_step():
    d = _doc()
    assert d["trace"]["step_source"] == "ProfilerStep"
    assert "per step" in next(f for f in d["findings"] if f["kind"] == "launch_overhead")["title"] or \
        "of each step" in next(f for f in d["findings"] if f["kind"] == "launch_overhead")["title"]


def test_the_multiple_comes_with_its_likely_band():
    # A review read a cold B200 window's "about 2.3x faster" as a measured figure: where the finding's likely band
    # (8 in 10 of our measured fixes of that kind and size) spans a wide range of multiples, the verdict says it.
    from traceinsight.report.analyze import analyze_file as af
    from traceinsight.report.verdict import LIKELY_SPREAD
    a = af(Path(__file__).resolve().parents[1] / "sample_traces/launch_small_mlp__before.json.gz")
    top, u = a.fixes[0], a.reference_step_us
    lo, hi = (u / (u - x) for x in top.likely_range_us)
    assert hi >= LIKELY_SPREAD * lo
    assert f"about {u / (u - top.estimated_savings_us):.1f}x faster, likely {lo:.1f}-{hi:.1f}x" in a.verdict
    assert lo <= u / (u - top.estimated_savings_us) <= hi


def test_the_html_and_markdown_labels_of_a_window_say_the_window():
    # The page's cards had kept "saved per step", "estimate, median per step" and "measured cost per step" for
    # AlexNet's one window, and the Markdown its "GPU idle 99.8% of each step (median of the steps' shares)".
    import re
    from traceinsight.render import html, markdown
    r = build_report(analyze_file(ALEXNET))
    page = re.sub(r"<[^>]+>", " ", html.render([r]))
    for gone in ("saved per step", "estimate, median per step", "measured cost per step", "idle ms per step",
                 "ms per step (medians)", "median over full steps"):
        assert gone not in page, gone
    assert "saved in the window" in page and "measured cost in the window" in page and "idle ms in the window" in page
    md = markdown.render([r])
    assert "GPU idle 99.8% of the window" in md and "each step (median of the steps' shares)" not in md
    assert "Without the profiler the window is about" in md and "Window 43425.365 ms; GPU busy" in md
    # "a step or two" of warm-up is advice about steps, not a figure of the window.
    words = " ".join(f["fix"] for f in r.doc["notes"] + r.doc["findings"] + r.doc["minor_findings"])
    assert "in the window or two" not in words


def test_a_trace_with_steps_keeps_its_per_step_labels():
    from traceinsight.render import html
    r = build_report(analyze_file(Path(__file__).resolve().parents[1] / "sample_traces/launch_small_mlp__before.json.gz"))
    page = html.render([r])
    assert "saved per step" in page and "estimate, median per step" in page and "in the window" not in page


def test_a_windows_verdict_and_minor_line_say_the_window():
    # HTA's multi-stream trace (no step markers): "would save about 0.78 ms in the window (4% of the un-profiled
    # step)", and the minor findings' "saves about 0.402 ms per step".
    from traceinsight.render.sections import minor_line
    d = build_report(analyze_file(ALEXNET.parent / "a100_cuda_event_sync_multi_stream.json.gz")).doc
    assert d["trace"]["step_source"] == "whole trace"
    assert "of the un-profiled window)" in d["verdict"] and "un-profiled step" not in d["verdict"], d["verdict"]
    line = minor_line(d)
    assert line and "ms in the window)" in line and "per step" not in line, line


def test_a_compiled_step_with_stacks_that_may_be_gpu_bound_is_not_called_launch_bound_flat():
    # The forty-fifth set's DiT, compiled (default mode), 6% idle measured without the profiler: its with_stack trace
    # had opened "Launch-bound: the GPU is idle 62%". A compiled step truly launch-bound keeps the plain label.
    matrix = Path(__file__).resolve().parents[1] / "sample_traces/matrix"
    dit = analyze_file(matrix / "h200_clean52A/holdout45_ddim_dit_healthy__before__stack.json.gz")
    assert dit.verdict.startswith("Launch-bound as profiled, perhaps not without the profiler: ")
    assert "least certain figure" in dit.verdict
    ro = analyze_file(matrix / "h200_clean2A/holdout_compile_infer__before__stack.json.gz")
    assert ro.verdict.startswith("Launch-bound: the GPU is idle 98% of each step")
