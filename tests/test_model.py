"""model.py against the raw JSON, checked by hand.

Every expected value here is computed independently from the raw trace with the json module (exact
Decimal arithmetic, no pandas, no traceinsight code): ProfilerStep windows, per-device union of
kernel + memcpy + memset intervals inside each window, launch links by correlation id.
"""
from __future__ import annotations

import json
import math
import random
import re
from collections import Counter, defaultdict
from decimal import Decimal
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from conftest import X, hta_model, hta_path, hta_trace_names, raw_events, raw_json, tiny_gpu_trace, write_trace
from traceinsight.report import analyze as pipeline
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
STEP_CATS = {"user_annotation", "Operator"}  # PyTorch 1.8-1.9 wrote ProfilerStep#N as an "Operator"
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

GPU_TRACES = ["a100_alexnet_memcpy_sync_permute.json.gz", "a100_cuda_event_sync.json.gz",
              "a100_cuda_event_sync_multi_stream.json.gz", "a100_rank0_of2_nccl.json.gz",
              "amd_mi250_minitoy_train.json.gz", "backward_thread.json", "triton_example.json.gz",
              "v100_resnet_ns_timestamps.pt.trace.json.gz"]
CPU_ONLY_TRACES = ["cpu_only.pt.trace.json.gz", "rank_non_gpu.json.gz"]

model_of = hta_model


@lru_cache(maxsize=None)
def exact_events(name: str) -> list:
    """The raw events with every decimal as an exact Decimal (cached: treat as read-only)."""
    return raw_events(raw_json(hta_path(name), parse_float=Decimal))


@lru_cache(maxsize=None)
def float_events(name: str) -> list:
    """The raw events as the json module reads them, floats and all (cached: treat as read-only)."""
    return raw_events(raw_json(hta_path(name)))


# ---------------------------------------------------------------- the oracle (pure Python, exact)

def oracle_steps(events) -> list[tuple[int, Decimal, Decimal]]:
    """(step number, start, end) of every ProfilerStep#N range, widest per number, by start."""
    by_num: dict[int, list] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in STEP_CATS:
            continue
        m = STEP_RE.match(str(e.get("name", "")))
        if not m:
            continue
        s = Decimal(e["ts"])
        t = s + Decimal(e.get("dur", 0))
        n = int(m.group(1))
        if n in by_num:
            by_num[n] = [min(by_num[n][0], s), max(by_num[n][1], t)]
        else:
            by_num[n] = [s, t]
    return sorted(((n, s, t) for n, (s, t) in by_num.items()), key=lambda r: r[1])


def oracle_clipped(events, steps):
    """The steps as the model keeps them: one that runs on past every other recorded event (the profiler's own
    'Trace' span aside) by more than half of itself and 1 ms ends at the last of them (steps.clip_to_data)."""
    last = max((Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in events
                if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") != "Trace"
                and not STEP_RE.match(str(e.get("name", "")))), default=None)
    if last is None:
        return steps
    return [(n, s, last if t - last > max(Decimal(1000), (t - s) / 2) else t) for n, s, t in steps]


def gpu_intervals(events) -> dict[int, list[tuple[Decimal, Decimal]]]:
    """Per device (the GPU event's pid, per Kineto), the [start, end) of every kernel/memcpy/memset."""
    out: dict[int, list] = defaultdict(list)
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            s = Decimal(e["ts"])
            out[int(e["pid"])].append((s, s + Decimal(e.get("dur", 0))))
    return {d: sorted(v) for d, v in out.items()}


def union_inside(intervals, lo: Decimal, hi: Decimal) -> Decimal:
    """Length of the union of the intervals clipped to [lo, hi]."""
    total = Decimal(0)
    cur_s = cur_e = None
    for s, e in intervals:
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if cur_s is None:
            cur_s, cur_e = s, e
        elif s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_s is not None:
        total += cur_e - cur_s
    return total


def time_tol(events) -> float:
    """What float64 can hold of the trace's timestamps: 16-digit epoch microseconds lose the ns part."""
    big = max(abs(float(e["ts"])) for e in events if isinstance(e, dict) and e.get("ph") == "X")
    return max(0.002, 4 * math.ulp(big))


# ---------------------------------------------------------------- step counts and windows

@pytest.mark.parametrize("name", hta_trace_names())
def test_step_count_matches_profiler_step_annotations(name):
    events = exact_events(name)
    expected = oracle_steps(events)
    m = model_of(name)
    if expected:
        assert m.step_source == "ProfilerStep"
        assert m.steps["step"].tolist() == [n for n, _, _ in expected]
    else:
        # No ProfilerStep: the whole trace is one window.
        assert m.step_source == "whole trace"
        assert len(m.steps) == 1


@pytest.mark.parametrize("name", ["a100_alexnet_memcpy_sync_permute.json.gz",
                                  "a100_cuda_event_sync_multi_stream.json.gz"])
def test_trace_without_steps_says_so(name):
    assert not oracle_steps(exact_events(name))
    m = model_of(name)
    assert any("no ProfilerStep" in w for w in m.warnings), m.warnings


def cpu_bounds(m):
    """The CPU-side ProfilerStep ranges the model kept (cpu_start/cpu_end; start/end in older models)."""
    st = m.steps
    if "cpu_start" in st:
        return st["cpu_start"], st["cpu_end"]
    return st["start"], st["end"]


@pytest.mark.parametrize("name", hta_trace_names())
def test_step_cpu_ranges_match_raw_annotations(name):
    events = exact_events(name)
    expected = oracle_steps(events)
    if not expected:
        pytest.skip("trace has no ProfilerStep annotations")
    m = model_of(name)
    tol = time_tol(events)
    cs, ce = cpu_bounds(m)
    expected = oracle_clipped(events, expected)
    assert len(cs) == len(expected)
    for (n, s, e), step, a, b in zip(expected, m.steps["step"], cs, ce):
        assert step == n
        assert b - a == pytest.approx(float(e - s), abs=tol)
        # Model times are microseconds from t0; t0 + start must land back on the raw timestamp.
        assert a + m.t0_us == pytest.approx(float(s), abs=tol)
    # The offsets between steps survive the shift to relative time.
    starts = [float(s - expected[0][1]) for _, s, _ in expected]
    assert (cs - cs.iloc[0]).tolist() == pytest.approx(starts, abs=tol)


def oracle_gpu_aware_windows(events, cpu_windows):
    """Step windows as model._gpu_aware_bounds documents them, recomputed from the raw events:
    step i starts at max(its CPU start, end of the GPU work launched during step i-1's CPU range)
    and ends where step i+1 starts; the last ends at max(its CPU end, end of the GPU work it launched)."""
    launch_ts = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS:
            c = (e.get("args") or {}).get("correlation")
            if c is not None and c >= 0 and c not in launch_ts:
                launch_ts[c] = Decimal(e["ts"])
    done = [None] * len(cpu_windows)
    for e in events:
        if not (isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in GPU_CATS):
            continue
        lt = launch_ts.get((e.get("args") or {}).get("correlation"))
        if lt is None:
            continue
        for i, (s, t) in enumerate(cpu_windows):
            if s <= lt < t:
                end = Decimal(e["ts"]) + Decimal(e.get("dur", 0))
                done[i] = end if done[i] is None else max(done[i], end)
    starts = [cpu_windows[0][0]] + [max(s, d) if d is not None else s
                                    for (s, _), d in zip(cpu_windows[1:], done[:-1])]
    last_end = cpu_windows[-1][1] if done[-1] is None else max(cpu_windows[-1][1], done[-1])
    return list(zip(starts, starts[1:] + [last_end]))


@pytest.mark.parametrize("name", [n for n in GPU_TRACES])
def test_step_windows_follow_gpu_work(name):
    events = exact_events(name)
    expected = oracle_steps(events)
    if not expected:
        pytest.skip("trace has no ProfilerStep annotations")
    m = model_of(name)
    if "cpu_start" not in m.steps:
        pytest.skip("this model's step windows are the CPU ranges")
    tol = time_tol(events)
    windows = oracle_gpu_aware_windows(events, [(s, e) for _, s, e in oracle_clipped(events, expected)])
    for (lo, hi), row in zip(windows, m.steps.itertuples()):
        assert row.start + m.t0_us == pytest.approx(float(lo), abs=tol), f"step {row.step}"
        assert row.end + m.t0_us == pytest.approx(float(hi), abs=tol), f"step {row.step}"
        assert row.dur == pytest.approx(float(hi - lo), abs=tol), f"step {row.step}"


def test_known_step_counts():
    """A few counted by hand with zcat | grep -c ProfilerStep#, so the oracle itself is checked."""
    expected = {"a100_rank0_of2_nccl.json.gz": [4, 5, 6],
                "v100_resnet_ns_timestamps.pt.trace.json.gz": [101, 102, 103, 104, 105],
                "amd_mi250_minitoy_train.json.gz": [1, 2],
                "backward_thread.json": [552],
                "triton_example.json.gz": [1],
                "cpu_only.pt.trace.json.gz": [551],
                "rank_non_gpu.json.gz": [1009]}
    for name, steps in expected.items():
        assert [n for n, _, _ in oracle_steps(exact_events(name))] == steps, name
        assert model_of(name).steps["step"].tolist() == steps, name


# ---------------------------------------------------------------- GPU busy time, per step, per device

@pytest.mark.parametrize("name", GPU_TRACES)
def test_gpu_busy_per_step_matches_interval_union(name):
    events = exact_events(name)
    m = model_of(name)
    per_dev = gpu_intervals(events)
    assert sorted(per_dev) == sorted(int(d) for d in m.gpu["device"].unique())
    assert len(m.gpu) == sum(len(v) for v in per_dev.values())
    tol = time_tol(events)
    t0 = Decimal(m.t0_us)
    if not oracle_steps(events):
        # One window over the whole trace: it holds every GPU activity.
        total = sum(union_inside(v, Decimal("-1e30"), Decimal("1e30")) for v in per_dev.values())
        assert float(m.steps["gpu_busy"].iloc[0]) * len(per_dev) == pytest.approx(float(total), abs=8 * tol)
    # Busy time inside the model's own step windows (how they are drawn is checked above).
    windows = [(t0 + Decimal(float(a)), t0 + Decimal(float(b))) for a, b in zip(m.steps["start"], m.steps["end"])]
    for (lo, hi), row in zip(windows, m.steps.itertuples()):
        busy = {d: union_inside(v, lo, hi) for d, v in per_dev.items()}
        mean_busy = float(sum(busy.values())) / len(per_dev)
        assert row.gpu_busy == pytest.approx(mean_busy, abs=8 * tol), f"step {row.step}"
        assert row.gpu_idle == pytest.approx(float(hi - lo) - mean_busy, abs=8 * tol), f"step {row.step}"
        # The idle gaps of each device inside the step add up to the window minus its busy time.
        for d, b in busy.items():
            g = m.gaps[(m.gaps["step"] == row.step) & (m.gaps["device"] == d)]
            assert float(g["dur"].sum()) == pytest.approx(float(hi - lo - b), abs=8 * tol)
            assert (g["start"] >= row.start - 1e-6).all() and (g["end"] <= row.end + 1e-6).all()


def test_known_gpu_busy_values():
    """Hand-checked numbers (union of kernel/memcpy/memset inside the step, in us)."""
    m = model_of("amd_mi250_minitoy_train.json.gz")
    events = exact_events("amd_mi250_minitoy_train.json.gz")
    per_dev = gpu_intervals(events)
    assert list(per_dev) == [2]                      # MI250: the GPU events sit on device 2
    (n1, s1, e1), (n2, s2, e2) = oracle_steps(events)
    assert float(union_inside(per_dev[2], s1, e1)) == pytest.approx(149.042, abs=1e-6)
    assert m.steps["gpu_busy"].iloc[0] == pytest.approx(149.042, abs=1e-3)
    assert m.steps["gpu_busy"].iloc[1] == pytest.approx(0.0, abs=1e-9)


# ---------------------------------------------------------------- launch links

def oracle_links(events) -> Counter:
    """(gpu name, launcher name, gpu ts - launcher ts) for every GPU activity whose correlation id
    matches a runtime/driver call; (gpu name, None, None) for the ones that match none."""
    launch = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS:
            c = (e.get("args") or {}).get("correlation")
            if c is not None and c not in launch:
                launch[c] = e
    out = Counter()
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            r = launch.get((e.get("args") or {}).get("correlation"))
            out[(e["name"], r["name"] if r else None,
                 round(e["ts"] - r["ts"], 3) if r else None)] += 1
    return out


def model_links(m) -> Counter:
    cpu, gpu = m.cpu, m.gpu
    out = Counter()
    for name, ts, launcher in zip(gpu["name"], gpu["ts"], gpu["launcher"]):
        if launcher >= 0:
            out[(name, cpu["name"].iat[launcher], round(ts - cpu["ts"].iat[launcher], 3))] += 1
        else:
            out[(name, None, None)] += 1
    return out


@pytest.mark.parametrize("name", GPU_TRACES)
def test_launch_links_follow_correlation_ids(name):
    # Float parse on purpose: the launch delay is then the same float64 difference on both sides.
    events = float_events(name)
    m = model_of(name)
    expected = oracle_links(events)
    assert model_links(m) == expected
    assert sum(n for (_, r, _), n in expected.items() if r is not None) > 0
    # Every launcher is a runtime/driver row, and kernels are launched by 'launch' calls.
    linked = m.gpu[m.gpu["launcher"] >= 0]
    rows = m.cpu.iloc[linked["launcher"].to_numpy()]
    assert (rows["kind"] == "runtime").all()
    assert (rows["correlation"].to_numpy() == linked["correlation"].to_numpy()).all()
    kern = (linked["kind"] == "kernel").to_numpy()
    assert set(rows["rkind"].to_numpy()[kern]) <= {"launch"}


def test_triton_kernel_is_linked_to_cuLaunchKernel():
    m = model_of("triton_example.json.gz")
    assert len(m.gpu) == 1
    k = m.gpu.iloc[0]
    assert k["name"] == "triton_poi_fused_add_cos_sin_0"
    launcher = m.cpu.iloc[k["launcher"]]
    assert launcher["name"] == "cuLaunchKernel" and launcher["cat"] == "cuda_driver"
    assert launcher["rkind"] == "launch" and launcher["correlation"] == 35
    # It sits under the compiled-region op that called it.
    parent = m.cpu.iloc[launcher["parent"]]
    assert parent["name"] == "triton_poi_fused_add_cos_sin_0" and parent["cat"] == "cpu_op"


def test_hip_runtime_names_are_classified():
    m = model_of("amd_mi250_minitoy_train.json.gz")
    rt = m.runtime
    kinds = dict(zip(rt["name"], rt["rkind"]))
    assert kinds["hipLaunchKernel"] == "launch"
    assert kinds["hipExtModuleLaunchKernel"] == "launch"
    assert kinds["hipMemcpyWithStream"] == "memcpy"
    assert kinds["hipDeviceSynchronize"] == "sync"
    assert kinds["hipGetDevicePropertiesR0600"] == "other"
    assert (m.gpu["launcher"] >= 0).all()
    assert set(m.gpu["device"]) == {2}
    assert m.devices[2].name == "AMD Radeon Graphics"


# ---------------------------------------------------------------- trace shapes

def test_relative_timestamps_keep_nanoseconds():
    """baseTimeNanoseconds traces: ts is small enough that float64 keeps the ns decimals."""
    name = "a100_rank0_of2_nccl.json.gz"
    events = exact_events(name)
    m = model_of(name)
    assert "baseTimeNanoseconds" in m.meta
    kernels = sorted((e["ts"], e["dur"]) for e in events if isinstance(e, dict) and e.get("cat") == "kernel")
    t0 = min(Decimal(e["ts"]) for e in events if isinstance(e, dict) and e.get("ph") == "X"
             and e.get("cat") in GPU_CATS | RUNTIME_CATS | {"cpu_op", "user_annotation", "python_function"})
    got = m.gpu[m.gpu["kind"] == "kernel"].sort_values("ts")
    assert len(got) == len(kernels)
    assert got["ts"].to_numpy() == pytest.approx([float(ts - t0) for ts, _ in kernels], abs=1e-3)
    assert got["dur"].to_numpy() == pytest.approx([float(d) for _, d in kernels], abs=1e-9)


def test_absolute_epoch_timestamps_with_ns_decimals():
    """16-digit epoch-us timestamps: durations keep their ns, start times are exact to float64."""
    name = "v100_resnet_ns_timestamps.pt.trace.json.gz"
    events = exact_events(name)
    m = model_of(name)
    assert "baseTimeNanoseconds" not in m.meta
    kernels = sorted((e["ts"], e["dur"]) for e in events if isinstance(e, dict) and e.get("cat") == "kernel")
    assert any(ts % 1 != 0 for ts, _ in kernels)          # the file really has ns decimals
    got = m.gpu[m.gpu["kind"] == "kernel"].sort_values("ts", kind="stable")
    assert got["dur"].to_numpy() == pytest.approx([float(d) for _, d in kernels], abs=1e-9)
    rel = [float(ts) - m.t0_us for ts, _ in kernels]         # what float64 can carry
    assert got["ts"].to_numpy() == pytest.approx(rel, abs=1e-6)
    exact_rel = [float(ts - Decimal(repr(m.t0_us))) for ts, _ in kernels]
    assert got["ts"].to_numpy() == pytest.approx(exact_rel, abs=0.25)


def test_partial_last_step_is_flagged():
    m = model_of("amd_mi250_minitoy_train.json.gz")
    # Step 2 lasts 49 us against 9288 us for step 1: the profiler stopped inside it.
    assert m.steps["partial"].tolist() == [False, True]
    for name in ("v100_resnet_ns_timestamps.pt.trace.json.gz", "a100_rank0_of2_nccl.json.gz"):
        assert not model_of(name).steps["partial"].any(), name


def test_partial_flag_on_synthetic_steps(make_trace):
    doc = tiny_gpu_trace(steps=4)
    cut = tiny_gpu_trace(steps=4)
    last = [e for e in cut["traceEvents"] if e["name"] == "ProfilerStep#4"][0]
    last["dur"] = 100.0
    full = build_model(load_trace(make_trace(doc, "full.json")))
    short = build_model(load_trace(make_trace(cut, "cut.json")))
    assert full.steps["partial"].tolist() == [False] * 4
    assert short.steps["partial"].tolist() == [False, False, False, True]
    cs, ce = cpu_bounds(short)
    assert (ce - cs).iloc[-1] == pytest.approx(100.0)
    # The analysis leaves the partial step out of its medians.
    a = pipeline.analyze_model(short)
    assert list(a.full_steps["step"]) == [1, 2, 3]


@pytest.mark.parametrize("name", CPU_ONLY_TRACES)
def test_cpu_only_traces(name):
    events = exact_events(name)
    m = model_of(name)
    assert not m.has_gpu and m.gpu.empty
    assert m.steps["gpu_busy"].eq(0).all()
    assert m.steps["gpu_idle"].tolist() == pytest.approx(m.steps["dur"].tolist())
    n_cpu = sum(1 for e in events if isinstance(e, dict) and e.get("ph") == "X"
                and e.get("cat") in {"cpu_op", "user_annotation", "python_function"})
    assert len(m.cpu) == n_cpu
    a = pipeline.analyze_model(m)
    assert a.findings == [] and not a.healthy
    # rank_non_gpu ran NCCL and FusedAdam: a GPU job whose GPU side the profiler did not record.
    assert a.verdict.startswith("No GPU activity was recorded, though the CPU drove GPU work"
                                if name == "rank_non_gpu.json.gz" else "CPU-only trace")


def test_legacy_categories_gpu_and_runtime(make_trace):
    """PyTorch 1.8-1.9: Operator / Runtime / Kernel / Memcpy / Memset, 'stream 7' tids, 'external id'."""
    events = legacy_events()
    m = build_model(load_trace(make_trace(events, "legacy.json")))
    assert sorted(m.gpu["kind"]) == ["kernel", "kernel", "memcpy", "memset"]
    assert set(m.gpu["stream"]) == {7} and set(m.gpu["device"]) == {0}
    assert (m.gpu["launcher"] >= 0).all()
    launchers = m.cpu.iloc[m.gpu["launcher"].to_numpy()]
    assert sorted(launchers["name"]) == ["cudaLaunchKernel", "cudaLaunchKernel", "cudaMemcpyAsync",
                                         "cudaMemsetAsync"]
    assert set(m.runtime["cat"]) == {"Runtime"}
    ops = m.cpu[m.cpu["name"] == "aten::mm"]
    assert (ops["kind"] == "op").all()
    # Runtime calls nest under the op that made them (string tid "456").
    rt = m.runtime
    assert (m.cpu["name"].to_numpy()[rt["parent"].to_numpy()] == "aten::mm").all()


def test_legacy_profiler_step_is_a_step(make_trace):
    """PyTorch 1.8 wrote ProfilerStep#N with cat 'Operator' (see kineto's tb_plugin tests)."""
    events = legacy_events()
    m = build_model(load_trace(make_trace(events, "legacy.json")))
    expected = oracle_steps(json.loads(json.dumps(events), parse_float=Decimal))
    assert [n for n, _, _ in expected] == [1, 2]
    assert m.step_source == "ProfilerStep"
    assert m.steps["step"].tolist() == [1, 2]
    per_dev = gpu_intervals(json.loads(json.dumps(events), parse_float=Decimal))
    for (n, lo, hi), row in zip(expected, m.steps.itertuples()):
        assert row.gpu_busy == pytest.approx(float(union_inside(per_dev[0], lo, hi)))


def legacy_events() -> list:
    ev = []
    corr = 40000
    for s in range(2):
        t = 50 + 1000 * s
        ev.append(X(f"ProfilerStep#{s + 1}", "Operator", t, 900, pid=13721, tid="123",
                    args_={"Input Dims": [], "External id": 1 + 10 * s}))
        ev.append(X("aten::mm", "Operator", t + 100, 300, pid=13721, tid="456",
                    args_={"Input Dims": [[32, 64], [64, 8]], "External id": 2 + 10 * s}))
        corr += 1
        ev.append(X("cudaLaunchKernel", "Runtime", t + 110, 5, pid=13721, tid="456",
                    correlation=corr, args_={"external id": 2 + 10 * s}))
        ev.append(X("void gemm<float>", "Kernel", t + 130, 15, pid=0, tid="stream 7",
                    correlation=corr, device=0, stream=7, args_={"external id": 2 + 10 * s}))
        corr += 1
        if s == 0:
            ev.append(X("cudaMemcpyAsync", "Runtime", t + 200, 20, pid=13721, tid="456",
                        correlation=corr, args_={"external id": 2}))
            ev.append(X("Memcpy HtoD (Pageable -> Device)", "Memcpy", t + 230, 10, pid=0, tid="stream 7",
                        correlation=corr, stream=7, args_={"external id": 2}))
        else:
            ev.append(X("cudaMemsetAsync", "Runtime", t + 200, 10, pid=13721, tid="456",
                        correlation=corr, args_={"external id": 12}))
            ev.append(X("Memset (Device)", "Memset", t + 220, 5, pid=0, tid="stream 7",
                        correlation=corr, stream=7, args_={"external id": 12}))
    return ev


def test_string_pids_and_tids(make_trace):
    """pid/tid as strings on both sides; the GPU side carries its device/stream only in pid/tid."""
    ev = [X("ProfilerStep#1", "user_annotation", 0, 1000, pid="1234", tid="MainThread"),
          X("aten::add", "cpu_op", 10, 100, pid="1234", tid="MainThread"),
          X("cudaLaunchKernel", "cuda_runtime", 20, 5, pid="1234", tid="MainThread", correlation=5),
          X("add_kernel", "kernel", 40, 30, pid="0", tid="stream 7", correlation=5),
          X("other_kernel", "kernel", 100, 50, pid="1", tid="stream 13", correlation=99)]
    m = build_model(load_trace(make_trace({"traceEvents": ev})))
    g = m.gpu.set_index("name")
    assert g.loc["add_kernel", "device"] == 0 and g.loc["add_kernel", "stream"] == 7
    assert g.loc["other_kernel", "device"] == 1 and g.loc["other_kernel", "stream"] == 13
    assert m.cpu.iloc[g.loc["add_kernel", "launcher"]]["name"] == "cudaLaunchKernel"
    assert g.loc["other_kernel", "launcher"] == -1
    rt = m.runtime.iloc[0]
    assert m.cpu.iloc[rt["parent"]]["name"] == "aten::add" and rt["depth"] == 2
    assert m.steps["gpu_busy"].iloc[0] == pytest.approx((30 + 50) / 2)


def test_events_out_of_order_synthetic(make_trace):
    doc = tiny_gpu_trace(steps=3)
    a = build_model(load_trace(make_trace(doc, "a.json")))
    rev = dict(doc, traceEvents=list(reversed(doc["traceEvents"])))
    b = build_model(load_trace(make_trace(rev, "b.json")))
    for x, y in zip(canonical(a), canonical(b)):
        pd.testing.assert_frame_equal(x, y)


def canonical(m):
    """The model's tables with row indices replaced by what they point at, rows sorted."""
    cpu, gpu = m.cpu, m.gpu
    nm, ts = cpu["name"].to_numpy(), cpu["ts"].to_numpy()
    par = cpu["parent"].to_numpy()
    c = pd.DataFrame({"thread": cpu["thread"], "name": cpu["name"], "cat": cpu["cat"], "ts": cpu["ts"],
                      "dur": cpu["dur"], "depth": cpu["depth"], "rkind": cpu["rkind"],
                      "correlation": cpu["correlation"],
                      "parent": np.where(par >= 0, nm[np.maximum(par, 0)], ""),
                      "top_op": np.where(cpu["top_op"] >= 0, nm[np.maximum(cpu["top_op"], 0)], "")})
    c = c.sort_values(list(c.columns), kind="stable").reset_index(drop=True)
    ln = gpu["launcher"].to_numpy()
    g = gpu.drop(columns=["launcher"]).assign(
        launcher_name=np.where(ln >= 0, nm[np.maximum(ln, 0)], ""),
        launcher_ts=np.where(ln >= 0, ts[np.maximum(ln, 0)], -1.0))
    g = g.sort_values(list(g.columns), kind="stable").reset_index(drop=True)
    gn, gts = gpu["name"].to_numpy(), gpu["ts"].to_numpy()
    gaps = m.gaps.copy()
    for col in ("next_gpu", "prev_gpu"):
        idx = gaps[col].to_numpy().astype(np.int64)
        gaps[col] = [f"{gn[i]}@{gts[i]}" if i >= 0 else "" for i in idx]
    gaps = gaps.sort_values(["device", "start"], kind="stable").reset_index(drop=True)
    return c, g, m.steps.reset_index(drop=True), gaps


@pytest.mark.parametrize("name", ["amd_mi250_minitoy_train.json.gz", "a100_alexnet_memcpy_sync_permute.json.gz",
                                  "a100_rank0_of2_nccl.json.gz"])
def test_shuffled_real_trace_gives_the_same_model(name, make_trace):
    doc = raw_json(hta_path(name))
    random.Random(1234).shuffle(doc["traceEvents"])
    shuffled = build_model(load_trace(make_trace(doc, "shuffled.json")))
    original = model_of(name)
    for part, x, y in zip(("cpu", "gpu", "steps", "gaps"), canonical(original), canonical(shuffled)):
        pd.testing.assert_frame_equal(x, y, obj=f"{name}: {part}")


def test_bare_array_form_gives_the_same_model(make_trace):
    name = "amd_mi250_minitoy_train.json.gz"
    events = raw_json(hta_path(name))["traceEvents"]
    m = build_model(load_trace(make_trace(events, "bare.json")))
    for x, y in zip(canonical(model_of(name)), canonical(m)):
        pd.testing.assert_frame_equal(x, y)
    assert m.devices == {}            # a bare array carries no deviceProperties


# ---------------------------------------------------------------- ranks

def test_distributed_info_rank():
    m = model_of("a100_rank0_of2_nccl.json.gz")
    assert m.rank == 0
    facts = pipeline.trace_facts(m)
    assert facts["rank"] == 0 and facts["world_size"] == 2
    m = model_of("cpu_only.pt.trace.json.gz")
    assert m.rank == 34 and pipeline.trace_facts(m)["world_size"] == 300


@pytest.mark.parametrize("rank, expected", [(3, 3), ("5", 5), (None, 0)])
def test_distributed_info_rank_synthetic(make_trace, rank, expected):
    doc = tiny_gpu_trace()
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 8}
    m = build_model(load_trace(make_trace(doc)))
    assert m.rank == expected


def test_per_rank_directory_gives_one_analysis_per_trace(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    write_trace(d / "rank1.json", tiny_gpu_trace(rank=1))
    write_trace(d / "rank0.json.gz", tiny_gpu_trace(rank=0, steps=4))
    (d / "notes.txt").write_text("not a trace")
    from traceinsight.trace.load import expand
    analyses = [pipeline.analyze_file(f) for f in expand([d])]
    assert [a.model.rank for a in analyses] == [0, 1]
    assert [len(a.model.steps) for a in analyses] == [4, 3]
    assert [a.model.path for a in analyses] == [str(d / "rank0.json.gz"), str(d / "rank1.json")]


@pytest.mark.parametrize("name", hta_trace_names()[:4] + ["mixed pids"])
def test_thread_rows_are_the_thread_groups(name, tmp_path):
    """thread_rows / thread_frames (from the thread codes) give what grouping the thread column does,
    also when two pids print alike (1 and "1" are both thread "1/7")."""
    if name == "mixed pids":
        ev = [X(f"op{i}", "cpu_op", 10.0 * i, 5, pid=1 if i % 3 else "1", tid=7 if i % 2 else 8) for i in range(40)]
        m = build_model(load_trace(write_trace(tmp_path / "t.json", {"traceEvents": ev})))
    else:
        m = hta_model(name)
    cpu = m.cpu
    want = cpu.groupby("thread", sort=False).indices
    got = m.thread_rows()
    assert list(got) == list(want) and all(np.array_equal(got[k], want[k]) for k in want)
    mask = np.arange(len(cpu)) % 3 == 0
    frames = m.thread_frames(mask, ["ts", "name"])
    groups = {th: g[["ts", "name"]] for th, g in cpu[mask].groupby("thread")}
    assert list(frames) == list(groups) and all(frames[k].equals(groups[k]) for k in groups)
    assert all(frames[k].index.equals(groups[k].index) for k in groups)


def test_name_ranks_group_and_sort_as_the_names(tmp_path):
    """Grouping by name_ranks gives the groups, in the order, that grouping by the name text gives,
    also when two interned names print alike (1 and "1")."""
    ev = [X(v, "cpu_op", 10.0 * i, 5) for i, v in enumerate(["b", 1, "a", "1", "b", "B", "a", 1, ""] * 3)]
    m = build_model(load_trace(write_trace(tmp_path / "t.json", {"traceEvents": ev})))
    rank, names = m.name_ranks("cpu")
    by_text = m.cpu.groupby("name")["ts"].sum()
    by_rank = m.cpu.groupby(rank)["ts"].sum()
    assert [names[k] for k in by_rank.index] == list(by_text.index)
    assert by_rank.tolist() == by_text.tolist()
