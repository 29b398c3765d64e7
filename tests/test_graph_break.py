"""A sync inside torch.compile'd code breaks its graph: the sync's fix also merges the compiled regions it split
(analyses/graph_break.py). Checked against the thirty-first held-out set (sample_traces/matrix/h200_clean35A-D:
a compiled training step whose forward guards with `.item()` after its third block, on one H200, four
processes), whose fix (the guard as torch.where) measured 1.16-1.74x, and the thirty-second (h200_clean36A-D: a
padding mask built only `if pad.any():`, and a finite check after every block of compiled inference)."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "sample_traces" / "matrix"
sys.path.insert(0, str(ROOT / "sample_traces"))
RUNS = [MATRIX / f"h200_clean35{k}" for k in "ABCD"]
WL = "holdout31_compiled_item_branch"


def _medians(run: Path) -> dict:
    """{(workload, variant): the un-profiled step's median, ms} of a recorded run."""
    return {(e["workload"], e["variant"]): e["step_ms"]["median"]
            for e in json.loads((run / "manifest.json").read_text())["entries"]}


def _measured(run: Path) -> float:
    by = _medians(run)
    return by[(WL, "before")] / by[(WL, "after")]


@pytest.fixture(scope="module")
def docs():
    import validate_matrix
    return {(run.name, s): validate_matrix._analyze((run / f"{WL}__before__{s}.json.gz", None))
            for run in RUNS for s in ("default", "stack")}


def _sync(doc: dict) -> dict:
    return next(f for f in doc["findings"] + doc["minor"] if f["kind"] == "sync_stall")


def _renamed_sync(tmp_path, old: bytes, new: bytes) -> dict:
    """The sync finding of the thirty-second set's finite checks (h200_clean36A, no stacks: regions of frame 1) with
    its region names rewritten, as other ways of compiling name them."""
    import validate_matrix
    src = MATRIX / "h200_clean36A" / "holdout32_compiled_nan_assert__before__default.json.gz"
    path = tmp_path / "renamed.json.gz"
    path.write_bytes(gzip.compress(gzip.decompress(src.read_bytes()).replace(old, new)))
    return _sync(validate_matrix._analyze((path, None)))


def test_the_sync_that_breaks_the_compiled_graph_is_named_with_the_regions_it_split(docs):
    for doc in docs.values():
        f = _sync(doc)
        got = f["evidence"]["breaks_the_compiled_graph"]
        # Dynamo ran the six blocks' forwards apart (the loop fell back to eager at the break): the loss
        # function's frame, six block frames and the loss's tail; seven backward nodes, six of them extra.
        assert got["compiled_regions_per_step"] == 8
        assert got["compiled_backward_nodes_merged_per_step"] == 6
        assert "breaks the graph" in f["fix"] and "torch.where" in f["fix"]


def test_the_sync_fix_of_a_graph_break_is_worth_the_merged_regions(docs):
    import validate_matrix
    errs = []
    for (run, _s), doc in docs.items():
        u = doc["summary"]["unprofiled_step_ms"]
        saving, _rng = validate_matrix._saving(doc, ("sync_stall",))
        pred, meas = u / (u - saving), _measured(MATRIX / run)
        assert meas >= 1.15
        # The wait alone predicted 1.00-1.06x on these eight traces (the regions' wrappers not counted).
        assert pred >= 1.15
        errs.append(abs(pred - meas) / meas)
    # 6 of 8 within 25%; the other two (h200_clean35B, measured 1.74x) at -31% and -28%.
    assert sum(e <= 0.25 for e in errs) >= 6 and max(errs) <= 0.35


def test_a_sync_outside_the_compiled_code_merges_nothing():
    import validate_matrix
    # item_logging_large's compiled variant reads loss.item() after the compiled call returns: no break.
    doc = validate_matrix._analyze((MATRIX / "h200_clean2A" / "item_logging_large__after_compile__default.json.gz",
                                    None))
    syncs = [f for f in doc["findings"] + doc["minor"] if f["kind"] == "sync_stall"]
    assert syncs and all("breaks_the_compiled_graph" not in f["evidence"] for f in syncs)


def _before(run: str, wl: str, setting: str) -> dict:
    import validate_matrix
    return validate_matrix._analyze((MATRIX / run / f"{wl}__before__{setting}.json.gz", None))


@pytest.mark.parametrize("run", ["h200_clean36A", "h200_clean36D"])
def test_a_break_in_a_frame_dynamo_gave_up_on_is_seen_with_stacks_and_from_compile_ids_without(run):
    # The finite check inside the loop over blocks: Dynamo runs the model's forward eagerly and compiles each
    # block apart (8 regions of one frame, nothing enclosing them but the compiled callable's Python frame).
    wl = "holdout32_compiled_nan_assert"
    doc = _before(run, wl, "stack")
    with_stack = _sync(doc)
    got = with_stack["evidence"]["breaks_the_compiled_graph"]
    assert got["compiled_regions_per_step"] == 8 and "seen_by" not in got
    # Its stalls are short (0.03 ms a step); the regions' wrappers are its cost too, so the fix (0.5-1.7 ms of a
    # 1.2-3.6 ms step) is ranked, not listed below the bar.
    assert got["wrapper_ms_per_step_profiled"] > 0.3 and with_stack in doc["findings"]
    # Without stacks the regions' compile ids say it: all of frame 1, none of frame 0 (the forward Dynamo gave up on).
    plain = _sync(_before(run, wl, "default"))
    got = plain["evidence"]["breaks_the_compiled_graph"]
    assert got["compiled_regions_per_step"] == 8 and "frame 1 " in got["seen_by"]
    assert "compile ids" in plain["fix"] and "between_compiled_regions" not in plain["evidence"]
    # The break early in the forward, outside any loop, is inside the loss function's region in both settings.
    for setting in ("default", "stack"):
        got = _sync(_before(run, "holdout32_compiled_mask_any", setting))["evidence"]["breaks_the_compiled_graph"]
        assert got["compiled_regions_per_step"] == 4 and got["compiled_backward_nodes_merged_per_step"] == 2


def test_the_merge_read_from_compile_ids_prices_what_the_fix_measured():
    import validate_matrix
    wl = "holdout32_compiled_nan_assert"
    errs = []
    for run in (MATRIX / f"h200_clean36{k}" for k in "ABCD"):
        by = _medians(run)
        doc = _before(run.name, wl, "default")
        u = doc["summary"]["unprofiled_step_ms"]
        for variant, kinds in (("after", ("sync_stall",)), ("after_graph", ("sync_stall", "launch_overhead"))):
            saving, _rng = validate_matrix._saving(doc, kinds)
            pred, meas = u / (u - saving), by[(wl, "before")] / by[(wl, variant)]
            # Priced at the wait alone, the checks' fix read 1.03-1.08x (measured 2.7-5.3x), checks then graph
            # 2.09-2.17x (measured 5.6-11.2x).
            assert pred >= (1.7 if variant == "after" else 2.4)
            errs.append((variant, (pred - meas) / meas))
    # The merged graph then graphed: 4 of 4 within 25% (with the checks' kernels gone from the GPU's work; 2 of 4 while
    # they stayed). The checks' fix alone stays under (-26..-62%; -34..-66% before the graph calls' setups were
    # counted): the merged graph also fuses across the old boundaries (80 launches a step became 33) and launches each
    # block's kernels warm, where every split call's first ones ran cold (a block's launches took 133 us in a split
    # call, 78 in the merged one, profiled, h200_clean36B), which the merge does not price.
    assert all(abs(e) <= 0.25 for v, e in errs if v == "after_graph")
    assert all(-0.7 < e < 0 for v, e in errs if v == "after")


def test_callees_compiled_one_by_one_with_a_sync_between_are_not_merged(tmp_path):
    # The same trace with its regions renumbered from frame 0, as regional compilation (torch.compile on each block,
    # called from eager code) numbers them: one function called 8 times, no caller compiled, so only the wait is priced.
    plain = _renamed_sync(tmp_path, b"Torch-Compiled Region: 1/", b"Torch-Compiled Region: 0/")
    assert "breaks_the_compiled_graph" not in plain["evidence"]
    assert plain["evidence"]["between_compiled_regions"] == 8
    assert "no graph break" in plain["fix"] and "counts the wait" in plain["fix"]


def test_one_model_compiled_whole_or_block_by_block_is_told_apart_and_priced():
    # The thirty-fifth held-out set (h200_clean38A-D): the same training step logs each block's norm with .item();
    # compiled whole, the syncs break the graph in the forward's loop (6 regions of frame 1, 6 backward nodes), and
    # keeping the norms on the GPU measured 1.20-1.63x; compiled block by block, the regions are of frame 0, nothing
    # merges, and the same change measured 0.91-1.19x.
    import validate_matrix
    errs = []
    for run in (MATRIX / f"h200_clean38{k}" for k in "ABCD"):
        by = _medians(run)
        for wl in ("holdout35_compiled_norm_log", "holdout35_regional_norm_log"):
            meas = by[(wl, "before")] / by[(wl, "after")]
            for setting in ("default", "stack"):
                doc = _before(run.name, wl, setting)
                f = _sync(doc)
                got = f["evidence"].get("breaks_the_compiled_graph")
                if wl.startswith("holdout35_compiled"):
                    assert got["compiled_regions_per_step"] == 6
                    assert got["compiled_backward_nodes_merged_per_step"] == 5
                    assert ("seen_by" in got) == (setting == "default")
                else:
                    assert got is None
                    assert f["evidence"].get("between_compiled_regions") == (6 if setting == "default" else None)
                u = doc["summary"]["unprofiled_step_ms"]
                saving, _rng = validate_matrix._saving(doc, ("sync_stall",))
                errs.append((wl, (u / (u - saving) - meas) / meas))
    # Registered criteria (matrix README): the regional rows within 25% on 6 of 8, got 8; the compiled model's sync
    # fix 8 of 8 (the tool before the compile ids read 1.01x without stacks: 1 of 4 there).
    assert all(abs(e) <= 0.25 for _wl, e in errs)


def test_a_compiled_programs_graphs_do_not_wait_for_the_syncs_between_them():
    # CUDA graph trees (mode="reduce-overhead") replay each compiled graph apart: the regional model's blocks graphed
    # with their .item() syncs kept measured 1.71-1.90x (h200_clean39A-D), the syncs' own fix 0.93-1.21x. The launch
    # fix is ranked on its own, not after the syncs, and the advice says the regions are one function, not breaks.
    wl = "holdout35_regional_norm_log"
    for run in (MATRIX / f"h200_clean39{k}" for k in "ABCD"):
        by = _medians(run)
        assert by[(wl, "before")] / by[(wl, "after_graph_only")] >= 1.7 >= by[(wl, "before")] / by[(wl, "after")] + 0.4
        for setting in ("default", "stack"):
            doc = _before(run.name, wl, setting)
            top = doc["findings"][0]
            assert top["kind"] == "launch_overhead" and top["needs_first"] == []
            assert "not graph breaks" in top["fix"] and "needs sync_stall" not in doc["verdict"]
    # An eager step's syncs still come first: a CUDA graph of the step cannot capture them.
    doc = _before("h200_clean2A", "sync_and_small_kernels", "default")
    launch = next(f for f in doc["findings"] if f["kind"] == "launch_overhead")
    assert launch["needs_first"] == ["sync_stall"]


def test_compile_ids_under_compiled_autograd_are_read_by_their_frame(tmp_path):
    # Under compiled autograd a region's id leads with its graph's own ("!0/1/0": frame 1, first compile): the frame is
    # still what says a caller was given up on, not the leading 0.
    got = _renamed_sync(tmp_path, b"Torch-Compiled Region: 1/", b"Torch-Compiled Region: !0/1/")
    got = got["evidence"]["breaks_the_compiled_graph"]
    assert got["compiled_regions_per_step"] == 8 and "frame 1 " in got["seen_by"]


def test_regions_without_a_frame_id_are_analyzed_without_a_claim(tmp_path):
    # A compiled autograd graph's region carries only its own id ("!0"): no frame to read, so no break is claimed from
    # ids, and Dynamo's cache lookups with no region of a known id are counted as eager calls (this used to raise).
    f = _renamed_sync(tmp_path, b"Torch-Compiled Region: 1/0", b"Torch-Compiled Region: !0")
    assert "breaks_the_compiled_graph" not in f["evidence"]
    assert f["evidence"]["between_compiled_regions"] == 8 and "with_stack=True" in f["fix"]


def _setup_ms(path: Path) -> float:
    """The median step's time (ms) from each compiled graph call's start to its first op, read from the raw events."""
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep")), key=lambda e: e["ts"])[1:]
    calls = [e for e in events if e["name"].startswith("## Call CompiledFxGraph")]
    ops = sorted((e["ts"], e["tid"]) for e in events if e.get("cat") == "cpu_op"
                 and not e["name"].startswith(("## Call", "Torch-Compiled Region")))
    per_step = []
    for s in steps:
        total = 0.0
        for c in (c for c in calls if s["ts"] <= c["ts"] < s["ts"] + s["dur"]):
            first = next((t for t, tid in ops if tid == c["tid"] and c["ts"] < t < c["ts"] + c["dur"]), None)
            total += (first - c["ts"]) if first is not None else 0.0
        per_step.append(total)
    return sorted(per_step)[len(per_step) // 2] / 1000


@pytest.mark.parametrize("wl", ["holdout32_compiled_nan_assert", "holdout32_compiled_mask_any",
                                "holdout31_compiled_item_branch", "holdout33_compiled_clamp_item",
                                "holdout35_compiled_norm_log"])
def test_the_merge_drops_the_setup_of_each_forward_graph_call_but_one_as_the_fixed_step_measured(wl):
    # Each compiled graph call checks its inputs before its first launch; the merged forward makes one call. What
    # the fix priced against what the fixed step's calls measured less (raw events of the before and after traces,
    # one process each, h200_clean35-38): 0.67-1.05x over the five programs' 20 pairs, 16 of them 0.83-1.05x (the
    # backward's merged calls counted too, it read 1.4-1.9x on the training steps: the fixed backward call checks all
    # their saved tensors).
    for run in sorted(MATRIX.glob("h200_clean3[5-8][AC]")):
        before = run / f"{wl}__before__default.json.gz"
        if not before.exists():
            continue
        got = _sync(_before(run.name, wl, "default"))["evidence"]["breaks_the_compiled_graph"]
        measured = _setup_ms(before) - _setup_ms(run / f"{wl}__after__default.json.gz")
        assert measured > 0.02 and 0.6 <= got["of_which_graph_call_setups_ms"] / measured <= 1.15, (run.name, got)
