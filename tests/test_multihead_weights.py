"""nn.MultiheadAttention asked for its attention weights (need_weights=True, its default) writes its attention out; the
written-out core is named so and advised need_weights=False, and the kernels that average the weights go with it.
Estimates against the fifty-sixth held-out set's measured fixes (sample_traces/matrix/h100_clean70*, registered before
it was recorded; one H100 host, two processes): the module's ViT trained in bf16 and a padded text encoder's fp16
inference, need_weights=True -> False, and an encoder LM already on need_weights=False as the control; and against the
fifty-seventh's (h100_clean71*): the module's native fast path, its cross-attention, an encoder's attention written out
without a mask, and the control compiled."""
from __future__ import annotations

import pytest

from matrix_runs import context_of, doc, kinds, measured_speedup, predicted_speedup, trace_path
from traceinsight.analyses import attention
from traceinsight.analyses.fusion_candidates import ELEMENTWISE

RUNS = ("h100_clean70A", "h100_clean70B")
VIT, TEXT, CONTROL = ("holdout56_mha_weights_vit_train", "holdout56_mha_weights_text_infer", "holdout56_mha_sdpa_healthy")


def _cores(d: dict) -> list[dict]:
    return [f for f in d["findings"] + d["minor_findings"] if "attention_cores_per_step" in f["evidence"]]


def _names_the_call_within_25(run: str, wl: str, setting: str) -> tuple[dict, str, float, float]:
    """The before trace's top finding is the written-out attention, advised the call that replaces it (SDPA for the
    encoder written by hand, need_weights=False for the module), and its estimate within 25% of the measured fix:
    the finding, its advice, the predicted and the measured speed-up."""
    d = doc(run, wl, "before", setting)
    f = d["findings"][0]
    assert f["kind"] == "fusion_candidates" and "attention_cores_per_step" in f["evidence"], kinds(d)
    advice = f["fix"].split("(If it is")[0]
    assert ("F.scaled_dot_product_attention(q, k, v)" in advice) if wl == BIDIR else ("need_weights=False" in advice)
    predicted, truth = predicted_speedup(d, f), measured_speedup(run, wl)
    assert abs(predicted / truth - 1) <= 0.25, (predicted, truth)
    return f, advice, predicted, truth


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("wl", (VIT, TEXT))
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_the_modules_weights_are_named_and_the_estimate_meets_the_measured_fix(run, wl, setting):
    f, *_ = _names_the_call_within_25(run, wl, setting)
    assert "nn.MultiheadAttention" in f["title"]   # need_weights=False in its advice: the helper
    # With Python frames the module's own function is read; without, the weights' mean over heads after each core.
    how = f["evidence"]["multihead_attention_weights"]
    assert ("F.multi_head_attention_forward" in how) == (setting == "stack")


@pytest.mark.parametrize("wl", (VIT, TEXT))
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_the_weights_mean_over_heads_goes_with_each_forward_core(wl, setting):
    ctx = context_of(trace_path("h100_clean70A", wl, "before", setting))
    cores = attention.cores(ctx, ELEMENTWISE)
    how, averages = attention.module_weights(ctx, cores)
    assert how == ("stack" if setting == "stack" else "mean")
    forward = [k for k, c in enumerate(cores) if not c.backward]
    # every forward core of the full steps but where the mean falls outside them
    assert len(averages) >= len(forward) - 1 and set(averages) <= set(forward)
    names = ctx.model.gpu["name"].astype(str).to_numpy()
    assert all(len(r) == 1 and "MeanOps" in names[r[0]] for r in averages.values())
    with_them = attention.with_averages(cores, averages, ctx.model.gpu["dur"].to_numpy())
    assert all(w.rows[-1] == averages[k][0] for k, w in enumerate(with_them) if k in averages)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_no_written_out_attention_is_read_after_the_fix_or_in_the_control(run, setting):
    """need_weights=False runs SDPA's fused kernel: no core, and no advice to pass what the program already passes.
    (The control is not called healthy: its eager LayerNorm, GELU and residual chains are fusion_candidates' 22%.)"""
    for wl, var in ((VIT, "after"), (TEXT, "after"), (CONTROL, "before")):
        d = doc(run, wl, var, setting)
        assert not _cores(d), (wl, kinds(d))
        assert not any("need_weights" in f["fix"] for f in d["findings"] + d["minor_findings"]), wl


def test_attention_written_by_hand_is_not_read_as_the_module():
    """Hand-written attention (holdout25's causal decoder) has no mean over heads after its cores and no module frame:
    the advice stays SDPA."""
    for setting in ("default", "stack"):
        f = doc("h200_clean22A", "holdout25_attention_train", "before", setting)["findings"][0]
        assert "multihead_attention_weights" not in f["evidence"] and "nn.MultiheadAttention" not in f["title"]
        assert f["fix"].startswith("Replace the written-out attention with F.scaled_dot_product_attention")


def test_a_mean_counts_only_right_after_the_output_projection():
    """The module's order after a core: layout copies, the output projection's GEMM, the mean over heads. A
    hand-written block with RMSNorm puts a residual add and a pow before its norm's mean (a review's edited trace had
    read that as the module's weights)."""
    import numpy as np
    names = ["copy", "gemm", "mean", "add", "pow", "splitK"]
    flag = {n: np.array([x == n for x in names]) for n in names}
    gemm = flag["gemm"] | flag["splitK"]
    order = {n: i for i, n in enumerate(names)}
    take = lambda *seq: attention._projection_then_mean([order[x] for x in seq], gemm, flag["copy"], flag["mean"])  # noqa: E731
    assert take("copy", "gemm", "mean") == (order["mean"],)
    assert take("gemm", "splitK", "mean") == (order["mean"],)
    assert take("gemm", "add", "pow", "mean") == ()
    assert take("add", "gemm", "mean") == () and take("mean") == ()


@pytest.mark.parametrize("setting", ("default", "stack"))
def test_the_q_scaling_multiply_and_its_gradient_go_with_the_core(setting):
    """F.multi_head_attention_forward scales q by a Python float before q @ k^T; the fused kernel scales inside. The
    multiply ends the forward core's q side and its gradient the backward's; the head-split copy before it stays."""
    ctx = context_of(trace_path("h100_clean70A", VIT, "before", setting))
    names = ctx.model.gpu["name"].astype(str).to_numpy()
    cores = attention.cores(ctx, ELEMENTWISE)
    for backward in (False, True):
        these = [c for c in cores if c.backward == backward]
        end = [c.rows[-1 if backward else 0] for c in these]
        assert these and all("AUnaryFunctor" in names[r] and "MulFunctor" in names[r] for r in end), backward
    # no other scalar multiply inside a core (a forward core holds exactly one, at its start)
    assert all(sum("AUnaryFunctor" in names[r] for r in c.rows) == 1 for c in cores)


# The fifty-seventh set (registered before recording; sample_traces/matrix/h100_clean71*): the module's native fast
# path and its cross-attention, and an encoder's attention written out without a mask.
RUNS57 = ("h100_clean71A", "h100_clean71B")
FAST, CROSS, BIDIR = ("holdout57_mha_fastpath_infer", "holdout57_mha_cross_attn_train",
                      "holdout57_attention_bidir_train")


@pytest.mark.parametrize("run", RUNS57)
@pytest.mark.parametrize("wl", (FAST, CROSS, BIDIR))
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_set_57_names_the_call_and_meets_the_measured_fix(run, wl, setting):
    f, advice, predicted, truth = _names_the_call_within_25(run, wl, setting)
    if wl == BIDIR:
        assert "need_weights" not in advice
    else:
        how = f["evidence"]["multihead_attention_weights"]
        expected = ("torch._native_multi_head_attention" if wl == FAST else
                    "F.multi_head_attention_forward" if setting == "stack" else "mean over its output")
        assert expected in how, how
    # the fix's kernels are not all in the trace: the estimate stays under the measured speed-up here (-12..-2%)
    assert predicted <= truth


@pytest.mark.parametrize("run", RUNS57)
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_set_57_after_traces_have_no_written_out_attention(run, setting):
    for wl in (FAST, CROSS, BIDIR):
        assert not _cores(doc(run, wl, "after", setting)), wl


@pytest.mark.parametrize("setting", ("default", "stack"))
def test_the_controls_fusion_claim_meets_its_compiled_measurement(setting):
    """Set 56's control (need_weights=False already) compiled: 1.37x measured; its fusion claim 1.28-1.29x."""
    run = "h100_clean71A"
    d = doc(run, CONTROL, "before", setting)
    f = d["findings"][0]
    assert f["kind"] == "fusion_candidates" and not _cores(d)
    truth = measured_speedup(run, CONTROL, "after_compile")
    predicted = predicted_speedup(d, f)
    assert abs(predicted / truth - 1) <= 0.25, (predicted, truth)


# Sets 56 and 57 again, on two more processes of another H100 lease (registered before recording as "on the other
# GPU"; the lease gave an H100: sample_traces/matrix/h100_clean72*). The bidirectional encoder's fixed step measured
# 12.5, 15.0 and 16.6 ms in the three leases' processes (p10-p90 within a process up to 1.5 ms): the estimate is
# over the measured speed-up on one of them (+18%), so `predicted <= truth` above is set 57's, not a rule.
RUNS72 = ("h100_clean72A", "h100_clean72B")


@pytest.mark.parametrize("run", RUNS72)
@pytest.mark.parametrize("wl", (VIT, TEXT, FAST, CROSS, BIDIR))
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_sets_56_and_57_on_another_machine_name_the_call_and_meet_the_measured_fix(run, wl, setting):
    _names_the_call_within_25(run, wl, setting)


@pytest.mark.parametrize("run", RUNS72)
@pytest.mark.parametrize("setting", ("default", pytest.param("stack", marks=pytest.mark.xfail(strict=True, reason=(
    "Open: on this machine with_stack doubles the control's step (41.6 ms profiled, 24.4 ms un-profiled, estimated "
    "within 1%) and the fusion claim is lost: the step is called healthy where compiling measured 1.37x. "
    "fusion_candidates reads chains other than attention cores only where the profiled step is GPU-bound (the gate "
    "that kept sync-bound steps from headlining fusion), not where only the profiler's inflation hides it")))))
def test_the_controls_fusion_claim_on_another_machine(run, setting):
    d = doc(run, CONTROL, "before", setting)
    assert d["findings"] and d["findings"][0]["kind"] == "fusion_candidates" and not _cores(d), kinds(d)
    predicted, truth = predicted_speedup(d, d["findings"][0]), measured_speedup(run, CONTROL, "after_compile")
    assert abs(predicted / truth - 1) <= 0.25, (predicted, truth)
