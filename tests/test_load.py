"""load.py: every real trace loads as it is written; odd fields are survived; cut-off traces keep
every event that was completely written before the cut.

Expected values come from the raw file through the standard json module, never from traceinsight.
"""
from __future__ import annotations

import json
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import pytest

from conftest import (X, hta_model, hta_path, hta_trace_names, raw_events, raw_json, raw_text,
                      run_cli_args, tiny_gpu_trace, write_trace)
from traceinsight.errors import TraceError
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model


def event_key(e):
    """What the loader must carry over unchanged, as the json module reads it."""
    return (e.get("ph", ""), e.get("cat"), e.get("name", ""), e.get("pid", 0), e.get("tid", 0),
            e.get("ts"), e.get("dur"))


def loaded_key(e):
    return (e.ph, e.cat, e.name, e.pid, e.tid, e.ts, e.dur)


# ---------------------------------------------------------------- every real trace

@pytest.mark.parametrize("name", hta_trace_names())
def test_every_real_trace_loads_completely(name):
    path = hta_path(name)
    doc = raw_json(path)
    raw = load_trace(path)
    events = raw_events(doc)
    assert raw.warnings == []
    assert len(raw.events) == len(events)
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in events]
    if isinstance(doc, dict):
        assert [d.id for d in raw.devices] == [d["id"] for d in doc.get("deviceProperties", [])]
        assert [d.name for d in raw.devices] == [d["name"] for d in doc.get("deviceProperties", [])]
        assert raw.distributed == doc.get("distributedInfo", {})
        for key in ("baseTimeNanoseconds", "schemaVersion", "traceName", "cupti_version"):
            assert raw.meta.get(key) == doc.get(key), key
    # The model takes them all: one row per complete CPU / GPU event of the categories it reads.
    m = hta_model(name)
    n_gpu = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    n_cpu = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in (
        "cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"))
    assert (len(m.cpu), len(m.gpu)) == (n_cpu, n_gpu)
    assert m.n_events == len(events)


def test_kernel_args_are_read():
    path = hta_path("a100_rank0_of2_nccl.json.gz")
    events = raw_events(raw_json(path))
    raw = load_trace(path)
    for e, got in zip(events, raw.events):
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            a = e["args"]
            assert (got.args.correlation, got.args.stream, got.args.device, got.args.external_id) == (
                a["correlation"], a["stream"], a["device"], a["External id"])
            if e["cat"] == "gpu_memcpy":
                assert got.args.bytes == a["bytes"]
                assert got.args.bandwidth == a["memory bandwidth (GB/s)"]


def test_bare_array_form(make_trace):
    events = tiny_gpu_trace()["traceEvents"]
    raw = load_trace(make_trace(events, "bare.json"))
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in events]
    assert raw.devices == [] and raw.distributed == {}
    gz = load_trace(make_trace(events, "bare.json.gz"))
    assert [loaded_key(e) for e in gz.events] == [event_key(e) for e in events]


def test_gzip_and_plain_give_the_same_events(make_trace):
    doc = raw_json(hta_path("triton_example.json.gz"))
    a = load_trace(make_trace(doc, "t.json"))
    b = load_trace(hta_path("triton_example.json.gz"))
    assert [loaded_key(e) for e in a.events] == [loaded_key(e) for e in b.events]


# ---------------------------------------------------------------- missing and odd fields

def _base():
    return [X("ProfilerStep#1", "user_annotation", 0, 100),
            X("aten::mm", "cpu_op", 5, 50),
            X("cudaLaunchKernel", "cuda_runtime", 10, 5, correlation=7),
            X("k", "kernel", 20, 30, pid=0, tid=7, correlation=7, device=0, stream=7)]


def _model(make_trace, events, **top):
    return build_model(load_trace(make_trace({"traceEvents": events, **top})))


def test_missing_dur_is_zero(make_trace):
    ev = _base()
    del ev[1]["dur"]
    del ev[3]["dur"]
    m = _model(make_trace, ev)
    assert m.gpu["dur"].tolist() == [0.0]
    assert m.cpu.set_index("name").loc["aten::mm", "dur"] == 0.0
    assert m.steps["gpu_busy"].iloc[0] == 0.0


def test_string_timestamps(make_trace):
    ev = _base()
    ev[3]["ts"] = "20.5"
    ev[3]["dur"] = "30"
    m = _model(make_trace, ev)
    assert m.gpu["ts"].tolist() == [20.5] and m.gpu["dur"].tolist() == [30.0]
    assert m.steps["gpu_busy"].iloc[0] == pytest.approx(30.0)


def test_unusable_timestamp_drops_the_event_with_a_warning(make_trace):
    ev = _base()
    ev[3]["ts"] = "soon"
    ev.append(X("k2", "kernel", 60, 10, pid=0, tid=7))
    m = _model(make_trace, ev)
    assert m.gpu["name"].tolist() == ["k2"]
    assert any("1 events with no usable timestamp" in w for w in m.warnings)


def test_event_without_ts_is_dropped(make_trace):
    ev = _base()
    del ev[3]["ts"]
    m = _model(make_trace, ev)
    assert m.gpu.empty and any("no usable timestamp" in w for w in m.warnings)


def test_no_args(make_trace):
    ev = _base()
    del ev[3]["args"]
    del ev[2]["args"]
    m = _model(make_trace, ev)
    k = m.gpu.iloc[0]
    assert (k["device"], k["stream"], k["launcher"], k["correlation"]) == (0, 7, -1, -1)


@pytest.mark.parametrize("field, value", [
    ("correlation", 7.0),          # an int written as a float by a re-serializing tool
    ("correlation", "7"),
    ("External id", 1.5),
    ("bytes", "big"),
    ("stream", [7]),
    ("device", {"id": 0}),
    ("Python id", "x"),
    ("labels", 5),
    ("grid", "grid(100,)"),
])
def test_args_with_wrong_types_are_survived(make_trace, field, value):
    ev = _base()
    ev[3]["args"][field] = value
    m = _model(make_trace, ev)
    assert m.gpu["name"].tolist() == ["k"]
    assert m.steps["gpu_busy"].iloc[0] == pytest.approx(30.0)
    if field == "correlation":
        # 7.0 and "7" still name correlation 7: the kernel keeps its launcher.
        assert m.cpu.iloc[m.gpu["launcher"].iloc[0]]["name"] == "cudaLaunchKernel"


@pytest.mark.parametrize("field, value", [
    ("pid", 0.0), ("tid", 7.0), ("tid", [7]), ("name", {"x": 1}), ("cat", 5), ("args", [1]),
    ("args", "none"), ("id", 1.5)])
def test_event_fields_with_wrong_types_are_survived(make_trace, field, value):
    ev = _base()
    ev[3][field] = value
    m = _model(make_trace, ev)
    assert len(m.steps) == 1 and len(m.cpu) == 3
    if field != "cat":        # an unknown category is not a GPU activity
        assert len(m.gpu) == 1


@pytest.mark.parametrize("top", [
    {"deviceProperties": [{"id": "0", "name": "GPU", "totalGlobalMem": 1.7e10}]},
    {"deviceProperties": {"id": 0}},
    {"baseTimeNanoseconds": "1711964646000000000"},
    {"traceName": 5},
    {"distributedInfo": {"rank": "3"}},
    {"distributedInfo": [0]},
])
def test_odd_top_level_metadata_is_survived(make_trace, top):
    m = _model(make_trace, _base(), **top)
    assert len(m.gpu) == 1
    assert m.rank == (3 if top.get("distributedInfo") == {"rank": "3"} else 0)


def test_non_object_entries_among_events_are_skipped(make_trace):
    ev = _base()
    doc = {"traceEvents": ev[:2] + [None, 5, "x", [1, 2]] + ev[2:]}
    raw = load_trace(make_trace(doc))
    assert [e.name for e in raw.events] == [e["name"] for e in ev]
    assert raw.warnings, "skipping entries must be said"


def test_instant_and_metadata_events_are_not_ranges(make_trace):
    ev = _base() + [
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "python main"}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 20, "bp": "e"},
        {"ph": "C", "name": "counter", "pid": 1, "tid": 1, "ts": 40, "args": {"value": 1}},
    ]
    m = _model(make_trace, ev)
    assert len(m.cpu) == 3 and len(m.gpu) == 1
    assert m.thread_names[(1, 1)] == "python main"
    assert m.n_flows == 1 and len(m.memory) == 1


# ---------------------------------------------------------------- traces cut off mid-write

@lru_cache(maxsize=None)
def event_spans(text: bytes):
    """Byte spans [start, end) of the complete events of traceEvents (or of a bare array), found with
    the standard json decoder one value at a time; and where the events array closes (or None)."""
    s = text.decode("latin-1")                # one char per byte: indices are byte offsets
    dec = json.JSONDecoder()
    i = s.index("[") + 1 if s.lstrip().startswith("[") else s.index("[", s.index('"traceEvents"')) + 1
    spans, closed = [], None
    while True:
        while i < len(s) and s[i] in " \t\r\n,":
            i += 1
        if i >= len(s):
            break
        if s[i] == "]":
            closed = i + 1
            break
        try:
            _, j = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            break
        spans.append((i, j))
        i = j
    return tuple(spans), closed


def complete_before(text: bytes, cut: int):
    """The events written completely within text[:cut]: json-parsed, and the end of the last one."""
    spans, _ = event_spans(text)
    done = [sp for sp in spans if sp[1] <= cut]
    events = [json.loads(text[a:b]) for a, b in done]
    return events, (done[-1][1] if done else None)


def gunzip_prefix(data: bytes) -> bytes:
    """All the JSON a cut gzip file still holds (what any gunzip -c would print before failing)."""
    return zlib.decompressobj(wbits=47).decompress(data)


FRACTIONS = [0.33, 0.5, 0.77, 0.95]
CUTS = [(n, f) for n in ("amd_mi250_minitoy_train.json.gz", "backward_thread.json", "triton_example.json.gz",
                         "a100_cuda_event_sync.json.gz") for f in FRACTIONS] + [
    ("a100_rank0_of2_nccl.json.gz", 0.5), ("a100_rank0_of2_nccl.json.gz", 0.95)]


def _check_cut(raw, text: bytes, cut: int):
    """The loaded trace has exactly the events completely written before the cut, and says so."""
    expected, end = complete_before(text, cut)
    assert expected, "the cut must leave some events"
    assert len(raw.events) == len(expected)
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in expected]
    warn = [w for w in raw.warnings if "dropped" in w]
    assert len(warn) == 1, raw.warnings
    assert f"{len(expected):,} complete events" in warn[0]
    _, closed = event_spans(text)
    if closed is None or cut < closed:
        # Cut inside the events: what is dropped is what follows the last complete event.
        assert f"{cut - end:,} bytes" in warn[0]


@pytest.mark.parametrize("name, frac", CUTS)
def test_plain_trace_cut_mid_write(tmp_path, name, frac):
    text = raw_text(hta_path(name))
    spans, _ = event_spans(text)
    cut = int(len(text) * frac)
    if cut <= spans[0][1] or cut >= spans[-1][1]:
        pytest.skip("this offset is outside the events")
    p = write_trace(tmp_path / "cut.json", text[:cut], gz=False)
    _check_cut(load_trace(p), text, cut)


@pytest.mark.parametrize("name, frac", [
    ("amd_mi250_minitoy_train.json.gz", 0.5), ("amd_mi250_minitoy_train.json.gz", 0.8),
    ("amd_mi250_minitoy_train.json.gz", 0.97), ("triton_example.json.gz", 0.5), ("triton_example.json.gz", 0.8),
    ("triton_example.json.gz", 0.97), ("a100_rank0_of2_nccl.json.gz", 0.8)])
def test_gzip_trace_cut_mid_write(tmp_path, name, frac):
    gz = hta_path(name).read_bytes()
    text = raw_text(hta_path(name))
    cut_gz = gz[:int(len(gz) * frac)]
    prefix = gunzip_prefix(cut_gz)
    assert text.startswith(prefix) and len(prefix) < len(text)
    p = tmp_path / "cut.json.gz"
    p.write_bytes(cut_gz)
    raw = load_trace(p)
    _check_cut(raw, text, len(prefix))
    gzw = [w for w in raw.warnings if "gzip" in w]
    assert len(gzw) == 1 and f"{len(prefix):,} bytes" in gzw[0]


@pytest.mark.parametrize("name", ["amd_mi250_minitoy_train.json.gz", "backward_thread.json"])
@pytest.mark.parametrize("upto", ["brace", "comma", "newline", "next-brace"])
def test_cut_right_after_an_event(tmp_path, name, upto):
    """A writer killed just after an event's closing brace: that event is complete and must be kept."""
    text = raw_text(hta_path(name))
    spans, _ = event_spans(text)
    k = len(spans) // 2
    cut = spans[k][1]                                    # just after its '}'
    if upto != "brace":
        cut = text.index(b",", cut) + 1                  # '},'
    if upto == "newline":
        cut = text.index(b"\n", cut) + 1                # '},\n'
    if upto == "next-brace":
        cut = text.index(b"{", cut) + 1                  # '},\n  {' : the next event has begun
    p = write_trace(tmp_path / "cut.json", text[:cut], gz=False)
    raw = load_trace(p)
    expected, _ = complete_before(text, cut)
    assert len(expected) == k + 1
    assert len(raw.events) == k + 1
    assert loaded_key(raw.events[-1]) == event_key(expected[-1])


@pytest.mark.parametrize("name", ["a100_cuda_event_sync.json.gz", "triton_example.json.gz",
                                  "a100_alexnet_memcpy_sync_permute.json.gz"])
def test_cut_after_the_events_array_keeps_every_event(tmp_path, name):
    """Killed while writing the metadata that follows traceEvents: no event is lost."""
    text = raw_text(hta_path(name))
    spans, closed = event_spans(text)
    assert closed is not None and len(text) - closed > 20
    cut = closed + (len(text) - closed) // 2
    raw = load_trace(write_trace(tmp_path / "cut.json", text[:cut], gz=False))
    assert len(raw.events) == len(spans)
    assert any("cut off" in w for w in raw.warnings)


def test_cut_before_any_event_is_an_error(tmp_path):
    text = raw_text(hta_path("amd_mi250_minitoy_train.json.gz"))
    cut = text.index(b'"traceEvents"') - 200            # inside deviceProperties
    p = write_trace(tmp_path / "cut.json", text[:cut], gz=False)
    with pytest.raises(TraceError) as exc:
        load_trace(p)
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_bare_array_cut_mid_write(tmp_path):
    events = raw_events(raw_json(hta_path("amd_mi250_minitoy_train.json.gz")))
    text = json.dumps(events, indent=1).encode()
    cut = int(len(text) * 0.6)
    raw = load_trace(write_trace(tmp_path / "cut.json", text[:cut], gz=False))
    _check_cut(raw, text, cut)


# ---- the same through the real command line: exit 0, the warning on stderr, complete events analysed

CLI_CUTS = [("amd_mi250_minitoy_train.json.gz", "plain", 0.6),
            ("amd_mi250_minitoy_train.json.gz", "gzip", 0.7),
            ("backward_thread.json", "plain", 0.8),
            ("triton_example.json.gz", "gzip", 0.9)]


@pytest.fixture(scope="module")
def cli_cut_results(tmp_path_factory):
    """Write every cut file, then run the CLI on them two at a time (the suite runs on 2 cores)."""
    root = tmp_path_factory.mktemp("cuts")
    jobs = []
    for i, (name, form, frac) in enumerate(CLI_CUTS):
        if name not in hta_trace_names():
            continue
        text = raw_text(hta_path(name))
        if form == "gzip":
            gz = hta_path(name).read_bytes()
            data = gz[:int(len(gz) * frac)]
            prefix_len = len(gunzip_prefix(data))
            p = root / f"cut{i}.json.gz"
        else:
            prefix_len = int(len(text) * frac)
            data = text[:prefix_len]
            p = root / f"cut{i}.json"
        p.write_bytes(data)
        jobs.append(((name, form, frac), p, text, prefix_len, root / f"out{i}.json"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = list(pool.map(lambda j: run_cli_args(["analyze", j[1], "-q", "--json", j[4]]), jobs))
    return {j[0]: (j, proc) for j, proc in zip(jobs, procs)}


@pytest.mark.parametrize("case", CLI_CUTS, ids=[f"{n}-{f}-{x}" for n, f, x in CLI_CUTS])
def test_cli_on_cut_trace(cli_cut_results, case):
    if case not in cli_cut_results:
        pytest.skip("external trace absent")
    (name, form, frac), path, text, prefix_len, out = cli_cut_results[case][0]
    proc = cli_cut_results[case][1]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == 0, proc.stderr
    expected, end = complete_before(text, prefix_len)
    warn = [ln for ln in proc.stderr.splitlines() if ln.startswith("traceinsight: warning:") and "dropped" in ln]
    assert len(warn) == 1, proc.stderr
    assert str(path) in warn[0]
    assert f"{len(expected):,} complete events" in warn[0]
    _, closed = event_spans(text)
    if closed is None or prefix_len < closed:
        assert f"{prefix_len - end:,} bytes" in warn[0]
    if form == "gzip":
        assert any("gzip" in ln and f"{prefix_len:,} bytes" in ln for ln in proc.stderr.splitlines())
    doc = json.loads(out.read_text())
    assert doc["trace"]["events"] == len(expected)
    assert any("cut off" in w for w in doc["trace"]["warnings"])
    n_steps = len({e["name"] for e in expected if e.get("cat") == "user_annotation"
                   and re.match(r"^ProfilerStep#\d+$", e.get("name", ""))})
    assert doc["summary"]["steps"] == max(n_steps, 1)
    n_gpu = sum(1 for e in expected if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert doc["trace"]["gpu_activities"] == n_gpu
