"""A Python loop over a batch's items with no sync in it (analyses/item_loop.py): the launch fix names it and is
the loop done on the whole batch (fixes.BatchItems: the other turns' CPU work and their kernels' fixed cost gone, the
CPU work left warm), the graph another way. Checked against the forty-seventh set's measured fixes (four processes of
one H200 host, h200_clean54A-D): GPU augmentation one image at a time in a conv net's training step, and a detector's
decode one image at a time in bf16 inference, each -> the same on the whole batch. The graph's estimate, the loop's
kernels kept, had read the decode at 2.9-5.0x against 5.3-6.1x measured, and the advice had been a graph alone."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from matrix_runs import measured_speedup
from traceinsight.analyses.item_loop import _node_runs, _runs, _work
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces/matrix"
RUNS = sorted(p.name for p in MATRIX.glob("h*_clean54?") if (p / "manifest.json").exists())
RUNS48 = sorted(p.name for p in MATRIX.glob("h*_clean55?") if (p / "manifest.json").exists())
# workload: (items, ops a turn, autograd nodes a turn in the backward)
LOOPS48 = {"holdout48_per_sample_forward_infer": (32, 16, 0), "holdout48_per_seq_loss_train": (32, 5, 5)}
LOOPS = {"holdout47_aug_loop_train": ("augment_loop", 128, 8), "holdout47_postproc_loop_infer": ("decode_loop", 16, 23)}


def test_the_batched_estimate_holds_the_measured_fixes():
    assert len(RUNS) == 4, RUNS
    within, n = 0, 0
    for run in RUNS:
        for workload, (function, items, ops) in LOOPS.items():
            for setting in ("default", "stack"):
                d = document(analyze_file(MATRIX / run / f"{workload}__before__{setting}.json.gz"))
                f = d["findings"][0]
                loop = f["evidence"]["item_loop"]
                assert loop["loops_per_step"] == 1.0 and abs(loop["items_each"] - items) <= 1, loop
                assert abs(loop["ops_each_item"] - ops) <= 1, loop
                assert f["kind"] == "launch_overhead", f["kind"]
                assert f["fix"].startswith("Much of the step is a Python loop that takes one item a turn"), f["fix"]
                assert "Do it on the whole batch (the estimate is of this" in f["fix"] and "CUDA graph" in f["fix"]
                assert [a["option"] for a in f["alternatives"]][0] == "cuda_graph", f["alternatives"]
                # with_stack: where the loop is, its function (Kineto's Python frames carry the def line), and the
                # augmentation's draws from Python's random (2 randint and 1 random a turn), which a graph would freeze
                assert (function in f["fix"]) == (setting == "stack"), (run, workload, setting)
                draws = loop["host_random_draws_per_step"]
                # (the first turn's two offsets are drawn before its x[i], outside the loop's span)
                assert abs(draws - (3 * items if setting == "stack" and workload.endswith("train") else 0)) <= 3, draws
                assert ("draw from Python's random" in f["fix"]) == (draws > 0)
                u = d["summary"]["unprofiled_step_ms"]
                saved = f["estimated_savings_ms"]
                pred, meas = u / (u - saved), measured_speedup(run, workload)
                assert abs(pred - meas) <= 0.5 * meas, (run, workload, setting, round(pred, 2), round(meas, 2))
                within += abs(pred - meas) <= 0.25 * meas
                n += 1
                # Physics: no shorter than the GPU work the batched loop leaves (its kernels' fixed cost gone), and
                # past the idle by no more than the GPU work its replay takes away, which the report gives.
                busy, gone = d["summary"]["median_gpu_busy_ms"], f["gpu_work_removed_ms"]
                assert 0 < gone <= loop["kernels_gpu_ms_per_step"], (gone, loop)
                assert u - saved >= busy - gone - 1e-3, (run, workload, setting)
                assert saved <= u - busy + gone + 1e-3, (run, workload, setting)
    # (13 of 16 on 2026-12-05: three training rows under, -26..-29%, their backward ran 2x slower beside the loop)
    assert n == 16 and within >= 12, within


def test_the_healthy_batched_net_has_no_item_loop():
    for run in RUNS:
        for setting in ("default", "stack"):
            d = document(analyze_file(MATRIX / run / f"holdout47_aug_batched_healthy__before__{setting}.json.gz"))
            assert d["healthy"], (run, setting, d["verdict"])
            assert not any("item_loop" in f["evidence"] for f in d["findings"] + d["minor_findings"])


def test_a_recurrence_keeps_the_graph_and_host_loops_are_no_item_loop():
    # A GRU cell stepped over 24 timesteps (x[t] each turn, aten::gru_cell in each): a recurrence, no batching
    # removes it; the fix stays the graph, measured 2.1-2.9x on this workload.
    d = document(analyze_file(MATRIX / "h100_clean16A/holdout19_launch_gru_loop__before__default.json.gz"))
    f = d["findings"][0]
    assert f["kind"] == "launch_overhead" and "item_loop" not in f["evidence"]
    assert f["fix"].startswith("Cut the per-kernel CPU cost: capture the step in a CUDA graph"), f["fix"]
    # Physics for the other ways too: reduce-overhead fuses only the bf16 casts here, its likely top leaves a step
    # no shorter than the GEMMs and the cell's kernels (a review read it at 0.207 ms beside 0.27 ms of them)
    u, busy = d["summary"]["unprofiled_step_ms"], d["summary"]["median_gpu_busy_ms"]
    for a in f["alternatives"]:
        top = (a["likely_savings_range_ms"] or a["savings_range_ms"] or [0, a["estimated_savings_ms"]])[1]
        assert u - top >= 0.9 * busy, (a["option"], top, u, busy)
    # A dataset's per-sample indexing on the CPU in the loop (num_workers=0) launches nothing: host work, not this.
    d = document(analyze_file(MATRIX / "h200_clean48A/holdout42_timm_effnet_loader_workers0__before__default.json.gz"))
    assert not any("item_loop" in f["evidence"] for f in d["findings"] + d["minor_findings"])


def test_runs_allow_an_optional_op_and_several_indexings_a_turn():
    sel, x = "aten::select", "aten::conv2d"
    # a coin-flip op in some turns: one run of 10 turns (the last turn's end found from the first's length)
    turns = [[sel, "aten::slice", "aten::to", "aten::div"] + (["aten::flip"] if i % 2 else []) for i in range(10)]
    names = np.array([x] + sum(turns, []) + ["aten::stack", x])
    bounds, = _runs(names)
    assert bounds[0] == 1 and len(bounds) - 1 in (9, 10)
    # two tensors indexed a turn (scores[i], boxes[i]): every second select heads a turn
    turn = [sel, "aten::sigmoid", "aten::topk", sel, "aten::index", "aten::mul", "aten::cat"]
    bounds, = _runs(np.array(turn * 12))
    assert bounds[0] == 0 and len(bounds) - 1 == 12 and bounds[1] - bounds[0] == len(turn)
    # a layer loop (no indexing at each turn's head) and a short loop are none
    assert _runs(np.array(["aten::layer_norm", "aten::linear", "aten::gelu", "aten::linear"] * 12)) == []
    assert _runs(np.array(turn * 5)) == []


def test_loops_that_iterate_the_tensor_and_their_backward():
    """The forty-eighth set (four processes of one H100 host, h100_clean55A-D): `for x in batch` (one aten::unbind,
    then turns with no select at their head) calling a conv classifier per image in bf16 inference, measured 31x
    batched; and `zip(logits, targets, lengths)` taking a tagger's loss per sequence in training, whose autograd
    nodes repeat per sequence in the backward, measured 1.9x. As registered the tool read them as a graph's
    (2.5-2.8x and 3.3-4.3x), none within 25%."""
    assert len(RUNS48) == 4, RUNS48
    within, n = 0, 0
    for run in RUNS48:
        for workload, (items, ops, nodes) in LOOPS48.items():
            for setting in ("default", "stack"):
                d = document(analyze_file(MATRIX / run / f"{workload}__before__{setting}.json.gz"))
                f = d["findings"][0]
                assert f["kind"] == "launch_overhead", (run, workload, setting, f["kind"])
                loop = f["evidence"]["item_loop"]
                assert (loop["items_each"], loop["ops_each_item"], loop["autograd_nodes_each_item"]) == \
                    (items, ops, nodes), (run, workload, setting, loop)
                assert f["fix"].startswith("Much of the step is a Python loop that takes one item a turn"), f["fix"]
                assert ("autograd nodes a turn in the backward" in f["fix"]) == bool(nodes)
                u, saved = d["summary"]["unprofiled_step_ms"], f["estimated_savings_ms"]
                pred, meas = u / (u - saved), measured_speedup(run, workload)
                assert abs(pred - meas) <= 0.5 * meas, (run, workload, setting, round(pred, 2), round(meas, 2))
                within += abs(pred - meas) <= 0.25 * meas
                n += 1
                busy, gone = d["summary"]["median_gpu_busy_ms"], f["gpu_work_removed_ms"]
                assert 0 < gone <= loop["kernels_gpu_ms_per_step"], (gone, loop)
                assert u - saved >= busy - gone - 1e-3 and saved <= u - busy + gone + 1e-3, (run, workload, setting)
    # (15 of 16 on 2026-12-05; the miss -31%, its un-profiled step read 31% short)
    assert n == 16 and within >= 14, within


def test_unbind_led_runs_and_the_backward_nodes():
    un, names = "aten::unbind", ["aten::linear", "aten::unbind"]
    turn = ["aten::unsqueeze", "aten::conv2d", "aten::batch_norm", "aten::relu_", "aten::linear"]
    bounds, = _runs(np.array(names + turn * 10 + ["aten::cat"]))
    assert bounds[0] == 2 and len(bounds) - 1 == 10 and bounds[1] - bounds[0] == len(turn)
    # zip(a, b): two unbinds, then turns that slice twice (every second slice heads a turn)
    turn = ["aten::slice", "aten::to", "aten::slice", "aten::cross_entropy_loss", "aten::add"]
    bounds, = _runs(np.array([un, un] + turn * 9 + ["aten::div"]))
    assert bounds[0] == 2 and len(bounds) - 1 == 9
    # a model's layers that each unbind their qkv are not items: the turns unbind again
    layer = [un, "aten::scaled_dot_product_attention", "aten::linear", "aten::add", "aten::layer_norm", "aten::linear"]
    assert _runs(np.array(layer * 12)) == []
    # the backward: as many turns of the same nodes as the forward loop's items, give or take one
    node = "autograd::engine::evaluate_function: "
    turn = [node + x for x in ("AddBackward0", "NllLossBackward0", "LogSoftmaxBackward0", "SliceBackward0")]
    other = [node + "AddmmBackward0", node + "AccumulateGrad"]
    bounds, = _node_runs(np.array([node + "DivBackward0"] + turn * 12 + other * 3), {12})
    assert len(bounds) - 1 == 12 and bounds[1] - bounds[0] == 4
    assert _node_runs(np.array(turn * 12), {30}) == []


def test_a_batched_kernel_takes_the_items_work_as_the_gpu_fills():
    # one item's launch fills 1/8 of a 132-SM GPU's threads: 32 of them take 4 waves, an eighth each of the work
    assert _work(132 * 256, 132, 32) == 0.125
    # a tiny launch: the batch's still fits one wave, each item a 1/items share
    assert _work(128, 132, 32) == 1 / 32
    # a launch that fills the GPU already, or one whose size is not in the trace: all of its work stays
    assert _work(132 * 4096, 132, 32) == 1.0 and _work(-1, 132, 32) == 1.0 and _work(4096, None, 32) == 1.0
