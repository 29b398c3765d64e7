"""torch.compile (default mode) as another way of an eager launch-bound step's launch fix (analyses/launch_overhead.py,
option `torch_compile`): fusion_candidates' chains fused and each kernel left launched from generated code
(fixes.CompiledDispatch). Checked against measured compiles of library models on one H200 host: the forty-second
set's Llama (h200_clean48B) and the forty-third set's GPT-2 and BERT tagger (h200_clean50A-D), default profiler
options; the estimate's un-profiled step is the tool's own (no measured step given)."""
from __future__ import annotations

from pathlib import Path

import pytest

from matrix_runs import measured_speedup
from traceinsight.analyses.fixes import CompiledDispatch
from traceinsight.render.sections import alternatives
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces/matrix"
PAIRS = [("h200_clean48B", "holdout42_hf_llama_bf16_compile")] + [
    (f"h200_clean50{k}", w) for k in "ABCD" for w in ("holdout43_hf_gpt2_small_compile", "holdout43_hf_bert_tagger_compile")]


def _option(d: dict) -> dict | None:
    f = next((x for x in d["findings"] + d["minor_findings"] if x["kind"] == "launch_overhead"), None)
    return next((a for a in (f or {}).get("alternatives") or () if a["option"] == "torch_compile"), None)


def test_the_compile_estimate_holds_measured_compiles_of_library_models():
    within, inside = 0, 0
    for run, workload in PAIRS:
        d = document(analyze_file(MATRIX / run / f"{workload}__before__default.json.gz"))
        opt = _option(d)
        assert opt is not None, (run, workload)
        u = d["summary"]["unprofiled_step_ms"]
        pred = u / (u - opt["estimated_savings_ms"])
        lo, hi = (u / (u - x) for x in opt["savings_range_ms"])
        meas = measured_speedup(run, workload)
        within += abs(pred - meas) <= 0.25 * meas
        inside += lo <= meas <= hi
        # Physics: the compiled step is no shorter than the GPU work left once the chains are fused.
        assert u - opt["estimated_savings_ms"] > 0.3 * d["summary"]["median_gpu_busy_ms"]
    # (9 of 9 and 6 of 9 when fitted, 2026-12-04: the range misses two of the fastest compiles, GPT-2 and BERT on
    # h200_clean50A; the spread is the compiler's kernel count, not in the eager trace)
    assert within >= 8 and inside >= 6, (within, inside)


def test_the_compile_option_is_said_as_another_way():
    d = document(analyze_file(MATRIX / "h200_clean50B/holdout43_hf_gpt2_small_compile__before__default.json.gz"))
    f = d["findings"][0]
    assert f["kind"] == "launch_overhead"
    line = alternatives(f)
    assert "Done another way: torch.compile(model) in its default mode (fused Triton kernels, no CUDA graphs)" in line
    assert "ms per step" in line


def test_a_compiled_step_gets_no_compile_option():
    # The same model already compiled: the launch fix is reduce-overhead, and compiling again is no other way.
    d = document(analyze_file(MATRIX / "h200_clean50B/holdout43_hf_gpt2_small_compile__after__default.json.gz"))
    assert _option(d) is None


@pytest.mark.parametrize("bad", [dict(ratio=-1.0), dict(wrapper_us=-5.0), dict(bounds=((1.0, 0.0), (-1.0, 0.0)))])
def test_a_compiled_dispatch_with_a_negative_cost_fails_when_made(bad):
    with pytest.raises(ValueError):
        CompiledDispatch(**bad)


def test_a_compiled_dispatch_at_an_end_of_its_range_has_no_range():
    fx = CompiledDispatch((), 1.3, 200.0, bounds=((1.0, 0.0), (1.9, 400.0)))
    worst = fx.at(fx.bounds[1])
    assert (worst.ratio, worst.wrapper_us, worst.bounds) == (1.9, 400.0, None)


def test_a_compile_that_saves_nothing_gets_no_likely_range():
    # A tiny conv net at batch 1 (the root sample): no chain to fuse, so compiling launches about as many kernels. Below
    # the bar for a ranked fix a likely range is host noise: it had read "0.0 ms, likely -25.5 to 29.0 ms".
    root = Path(__file__).resolve().parents[1] / "sample_traces"
    d = document(analyze_file(root / "launch_tiny_conv__before.json.gz"))
    opt = _option(d)
    step = d["summary"]["unprofiled_step_ms"]
    assert opt is not None and opt["estimated_savings_ms"] < 0.03 * step
    assert opt["likely_savings_range_ms"] is None
    assert "likely" not in alternatives(next(f for f in d["findings"] if f["kind"] == "launch_overhead"))
