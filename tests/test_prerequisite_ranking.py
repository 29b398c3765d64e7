"""A fix that needs another ranked fix first is ranked by what it adds after it (estimate/rank.py,
_after_prerequisites): a CUDA graph cannot capture a sync, so the user removes the syncs first anyway.
On committed H100 traces whose fixes were measured (sample_traces/matrix)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from traceinsight.render.sections import plan_note, prerequisite_fixes, saving
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces" / "matrix"


@pytest.fixture(scope="module")
def masked_loss():
    return document(analyze_file(MATRIX / "h100_clean8A" / "sync_mask_loss__before__default.json.gz"))


def test_syncs_that_take_most_of_a_launch_bound_step_rank_above_the_graph_they_block(masked_loss):
    # Measured on this host: the syncs removed 4.51 -> 3.71 ms, a CUDA graph on top 3.7145 -> 3.7125 ms.
    # The graph alone would save more than the syncs (1.2 ms) but cannot be captured with them in place.
    d = masked_loss
    ranked = [f["kind"] for f in d["findings"]]
    assert ranked[:2] == ["sync_stall", "launch_overhead"]
    launch = d["findings"][1]
    plan = {r["kind"]: r for r in d["whatif"]["plan"]}
    assert launch["needs_first"] == ["sync_stall"]
    assert launch["saves_after_needs_first_ms"] == plan["launch_overhead"]["saves_ms"]
    assert launch["saves_after_needs_first_ms"] < 0.3 < d["findings"][0]["estimated_savings_ms"] < launch["estimated_savings_ms"]
    assert d["verdict"].startswith("Sync-bound") and "top fix (sync_stall) would save about 1.11 ms" in d["verdict"]
    # The tables lead with what it adds once the syncs are gone (what it is ranked by), then what it would
    # save alone; the verdict promises only the plan's figures.
    # (what it would save alone carries its likely range: estimate/likely.py)
    lo, hi = launch["likely_savings_range_ms"]
    assert saving(launch, "; ") == (f"{launch['saves_after_needs_first_ms']} ms once sync_stall is fixed; "
                                    f"{launch['estimated_savings_ms']} ms alone (likely {lo} to {hi} ms)")
    assert saving(d["findings"][0], "; ").startswith(f"{d['findings'][0]['estimated_savings_ms']} ms (")


@pytest.mark.parametrize("run, workload", [("h100_clean2A", "nonzero_unique_sync"),
                                           ("h100_clean2A", "sync_and_small_kernels"),
                                           ("h100_clean2B", "holdout4_masked_seq_loss")])
def test_a_graph_that_saves_most_even_after_the_syncs_stays_on_top(run, workload):
    # Measured on the clean hosts: the syncs removed, then the step graphed, 2.5-9.8x; the syncs alone
    # 1.0-1.4x (sync_and_small_kernels has no syncs-only variant).
    d = document(analyze_file(MATRIX / run / f"{workload}__before__default.json.gz"))
    top = d["findings"][0]
    plan = [r["kind"] for r in d["whatif"]["plan"]]
    assert top["kind"] == "launch_overhead" and plan[:2] == ["sync_stall", "launch_overhead"]
    assert top["fix"].startswith("First: ") and "needs sync_stall fixed first" in d["verdict"]
    if workload == "sync_and_small_kernels":
        # Its syncs' own idle (0.06 ms of a 3.1 ms step, the refill after a copy that waited only for itself capped
        # at its blocked time since 2026-12-02) is under the bar: a minor finding, still the plan's first fix.
        assert any(f["kind"] == "sync_stall" for f in d["minor_findings"])
        return
    second = d["findings"][1]
    assert second["kind"] == "sync_stall"
    assert top["needs_first"] == ["sync_stall"]
    assert top["saves_after_needs_first_ms"] > second["estimated_savings_ms"]
    # No fix that needs nothing first carries the note.
    assert second["needs_first"] == [] and second["saves_after_needs_first_ms"] is None


def test_the_verdict_promises_what_the_plan_gives_a_top_fix_that_needs_another_first():
    # nonzero_unique_sync (h100_clean2A): the graph tops the ranking but cannot be captured with the syncs in
    # place; alone it would save 1.97 ms. Measured: syncs removed then graphed, 2.46x.
    d = document(analyze_file(MATRIX / "h100_clean2A" / "nonzero_unique_sync__before__default.json.gz"))
    plan = {r["kind"]: r for r in d["whatif"]["plan"]}
    top = d["findings"][0]
    assert top["kind"] == "launch_overhead" and top["needs_first"] == ["sync_stall"]
    said = (f"the top fix (launch_overhead) needs sync_stall fixed first (see the plan): the two save about "
            f"{plan['launch_overhead']['cumulative_saves_ms']:.2f} ms per step")
    assert said in d["verdict"], d["verdict"]
    assert f"launch_overhead about {plan['launch_overhead']['saves_ms']:.2f} ms of it" in d["verdict"]
    assert f"{top['estimated_savings_ms']:.2f} ms" not in d["verdict"]


def test_a_sync_at_the_step_end_is_not_needed_first():
    # item_logging logs loss.item() after the optimizer: nothing is launched after it in the step, so a CUDA
    # graph of the step captures fine and launch_overhead does not need it gone first. The sync costs 0.01 ms
    # alone (measured on this host: removed, 1.06x); the plan still puts it first, as the graph then saves more
    # (the graphed step no longer waits at its end), marked as helping, not needed.
    d = document(analyze_file(MATRIX / "h100_cleanA" / "item_logging__before__default.json.gz"))
    sync = next(f for f in d["minor_findings"] if f["kind"] == "sync_stall")
    assert [s["at_step_edge"] for s in sync["evidence"]["sync_sites"]] == [True]
    launch = d["findings"][0]
    assert launch["kind"] == "launch_overhead" and launch["needs_first"] == []
    assert not launch["fix"].startswith("First:") and "needs sync_stall fixed first" not in d["verdict"]
    plan = d["whatif"]["plan"]
    assert [r["kind"] for r in plan] == ["sync_stall", "launch_overhead"]
    assert plan[0]["prerequisite_for"] == [] and plan[0]["helps"] == ["launch_overhead"]
    assert plan[1]["saves_ms"] > launch["estimated_savings_ms"]
    assert plan_note(plan[0]) == "first: launch_overhead then saves more"
    assert prerequisite_fixes(d) == [("sync_stall", "first in the plan", sync["fix"])]


def test_a_ranked_sync_at_the_step_end_still_goes_before_the_graph_unmarked():
    # holdout14_train_topk_acc copies its logits to the host after the optimizer (4 MB) and scores them on the
    # CPU: a ranked sync at the step's end. The graph does not need it gone, but saves more once it is: the
    # plan places it first without calling it needed, and the graph is ranked by what it saves alone.
    d = document(analyze_file(MATRIX / "h200_clean3B" / "holdout14_train_topk_acc_cpu_torch__before__stack.json.gz"))
    plan = d["whatif"]["plan"]
    kinds = [r["kind"] for r in plan]
    assert kinds.index("sync_stall") < kinds.index("launch_overhead")
    assert all(r["prerequisite_for"] == [] for r in plan)
    launch = next(f for f in d["findings"] if f["kind"] == "launch_overhead")
    assert launch["needs_first"] == [] and plan[kinds.index("launch_overhead")]["saves_ms"] > launch["estimated_savings_ms"]


def test_copies_after_a_sync_do_not_put_it_inside_the_step():
    # sync_then_host_work logs loss.item() after the optimizer, then copies the next step's class weights to
    # the GPU: only kernels count as the step's work after a sync (a copy, or a prefetch, does not).
    d = document(analyze_file(MATRIX / "h200_rerun2" / "sync_then_host_work__before__default.json.gz"))
    sync = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")
    assert [(s["op"], s["at_step_edge"]) for s in sync["evidence"]["sync_sites"]] == [("aten::item", True)]
    assert all(f["needs_first"] == [] for f in d["findings"])


def test_without_step_markers_no_sync_is_at_an_edge(tmp_path):
    # One step for the whole trace: where a step begins and ends is not known, so the .item() calls stay
    # what a graph needs gone first, as before the edge rule.
    src = MATRIX / "h100_cleanA" / "item_logging__before__default.json.gz"
    raw = json.load(gzip.open(src))
    raw["traceEvents"] = [e for e in raw["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep")]
    p = tmp_path / "no_markers.json"
    p.write_text(json.dumps(raw))
    d = document(analyze_file(p))
    # Its optimizer steps still mark the loop's iterations: read so, the trace gives the ProfilerStep reading
    # (the .item() at a step's edge, the launch fix first; 3.14 ms a step against 3.09, saving 1.45 ms against 1.37).
    marked = document(analyze_file(src))
    assert d["trace"]["step_source"] == "Optimizer.step"
    assert d["summary"]["median_step_ms"] == pytest.approx(marked["summary"]["median_step_ms"], rel=0.05)
    assert [f["kind"] for f in d["findings"]] == [f["kind"] for f in marked["findings"]] == ["launch_overhead"]
    assert d["findings"][0]["estimated_savings_ms"] == pytest.approx(marked["findings"][0]["estimated_savings_ms"],
                                                                      rel=0.1)
    raw["traceEvents"] = [e for e in raw["traceEvents"] if not str(e.get("name", "")).startswith("Optimizer.step#")]
    p.write_text(json.dumps(raw))
    d = document(analyze_file(p))
    sync = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")
    assert d["trace"]["step_source"] == "whole trace"
    assert not any(s["at_step_edge"] for s in sync["evidence"]["sync_sites"])


def test_syncs_outside_any_op_count_once_each():
    # a100_rank0_of2_nccl's harness calls cudaEventSynchronize 8 times a step under only the step's annotation:
    # each call is its own instance (the first version counted them as one "no op" across the window: 0.33 a
    # step, expert review); the GPU queue still drains once a step.
    ext = Path(__file__).resolve().parent / "data" / "external" / "hta" / "a100_rank0_of2_nccl.json.gz"
    a = analyze_file(ext)
    (sync,) = [f for f in a.findings + a.minor_findings if f.kind == "sync_stall"]
    (site,) = sync.evidence["sync_sites"]
    assert site["call"] == "cudaEventSynchronize" and site["per_step"] == 8.0 and site["stalls_per_step"] == 1.0
    assert "drains once per step" in sync.title
