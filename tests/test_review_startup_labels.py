"""What an expert review of six traces found wrong in the reports (2026-12-01: a subagent with EXPERT_REVIEW.md,
every figure recomputed from the raw events), each checked on the trace it was found on."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import doc_of as _doc
from conftest import findings_of as _all

from traceinsight.render import sections

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = ROOT / "tests" / "data" / "external"


def test_input_shapes_of_a_pretty_printed_trace_show_every_input():
    # The bert-small trace is indented JSON: its SDPA's Input Dims had come out as "[\n            [\n ..." cut
    # after 2 of its 8 inputs.
    d = _doc("tests/data/external/tracelens/h100_gaunernst_bert-small-uncased__1016001.json.gz")
    sdpa = next(r for r in d["top_ops"] if r["op"] == "aten::scaled_dot_product_attention")
    assert sdpa["input_dims"] == "[[1, 8, 141, 64], [1, 8, 141, 64], [1, 8, 141, 64], [], [], [], [], []]"
    assert all("\n" not in r["input_dims"] and "  " not in r["input_dims"] for r in d["top_ops"])


def test_steps_bounded_by_the_gpu_say_so():
    # The V100 ResNet's ProfilerStep#101 is 35.1 ms on the CPU; the report's step 101 is 101.2 ms, from where
    # the GPU finished the step before: a reviewer checking against the ProfilerStep ranges was not told.
    d = _doc("tests/data/external/hta/v100_resnet_ns_timestamps.pt.trace.json.gz")
    # All five: each has a boundary where the GPU finished (the first its end, the rest both ends, ~60 ms after the
    # CPU's), though the last three are as long as their ProfilerStep ranges (a second review: 2 had been said).
    assert d["trace"]["steps_moved_to_gpu"] == 5
    assert "all bounded where the GPU finished a step's work, not by their ProfilerStep range" in sections.step_counts(d)
    # A launch-bound step (the GPU never behind) keeps its ProfilerStep ranges, and says nothing.
    d = _doc("sample_traces/launch_tiny_conv__before.json.gz")
    assert d["trace"]["steps_moved_to_gpu"] == 0 and sections.step_counts(d) == "5 steps (ProfilerStep)"


def test_an_item_sites_copy_direction_is_named_though_it_waited_for_queued_work():
    # aten::item and aten::nonzero copy 4 bytes to the host after the queued work: the table said "n/a" beside
    # aten::index's "to the host".
    d = _doc("sample_traces/sync_mask_loss__before.json.gz")
    sites = {s["op"]: s for s in next(f for f in _all(d) if f["kind"] == "sync_stall")["evidence"]["sync_sites"]}
    for op in ("aten::item", "aten::nonzero", "aten::index"):
        assert sites[op]["waits_for"] == "queued GPU work" and sites[op]["copy_direction"] == "to the host"
        assert sites[op]["copy_bytes_per_call"] == 4


def test_start_up_is_left_out_of_the_cpu_time_per_kernel():
    # a100_alexnet: 43.4 s of window, 42.1 s of it start-up calls, 79 kernels: "CPU us per kernel 163722.51".
    d = _doc("tests/data/external/hta/a100_alexnet_memcpy_sync_permute.json.gz")
    ev = next(f for f in _all(d) if f["kind"] == "launch_overhead")["evidence"]
    idle = d["summary"]["idle_by_cause_ms_median_per_step"]
    steady_ms = d["summary"]["median_step_ms"] - idle["cuda_startup"] - idle["host_bound"] - idle["sync_stall"]
    assert ev["cpu_us_per_kernel"] == pytest.approx(1000 * steady_ms / ev["kernels_per_step"], rel=0.01)
    assert ev["cpu_us_per_kernel"] < 20_000


def test_calls_a_library_made_inside_an_op_are_not_a_cut_file(tmp_path):
    # a100_alexnet's four quiet stretches (494 ms, 4,791 correlation ids) all lie inside aten::cudnn_convolution's
    # first run: cuDNN's driver calls, which CUPTI numbers and Kineto does not write. "The trace was filtered or
    # cut after recording" was not supported; the idle there stays unattributed either way.
    d = _doc("tests/data/external/hta/a100_alexnet_memcpy_sync_permute.json.gz")
    lim = d["trace"]["limits"]
    assert not any(x.startswith("Events are missing") for x in lim)
    assert any(x.startswith("Calls the profiler does not write: 493.6 ms in 4 stretches inside aten::cudnn_convolution")
               for x in lim)
    assert d["summary"]["idle_by_cause_ms_median_per_step"]["unattributed"] > 490
    # The multi-stream trace's stretch is between ops (after aten::matmul). Its profiler's log accounts for the
    # ids (1,410 records read and not written); without that log, nothing does: a file that lacks events.
    src = "tests/data/external/hta/a100_cuda_event_sync_multi_stream.json.gz"
    d = _doc(src)
    assert any(x.startswith("Calls the profiler does not write: 18.6 ms in 1 stretch between ops")
               for x in d["trace"]["limits"])
    raw = json.load(gzip.open(ROOT / src))
    del raw["INFO"]
    bare = tmp_path / "no_log.json"
    bare.write_text(json.dumps(raw))
    lim = _doc(str(bare))["trace"]["limits"]
    assert any(x.startswith("Events are missing from this file: 18.6 ms in 1 stretch") for x in lim)
    assert not any(x.startswith("Calls the profiler does not write") for x in lim)
