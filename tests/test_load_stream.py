"""The streaming loader cuts the events array into pieces: whatever the piece size, the same events.

Real traces are loaded with tiny pieces (a few KB: every cut falls somewhere odd) and compared with
the standard json module; synthetic texts put '},' where a naive splitter would cut (inside
strings, inside args), events larger than a piece, metadata before and after traceEvents.
"""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from conftest import REPO_ROOT, X, hta_path, raw_events, raw_json, raw_text, tiny_gpu_trace, write_trace
from test_load import _check_cut, event_key, event_spans, loaded_key
from traceinsight.errors import TraceError
from traceinsight.trace import reader, splitter
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model


@pytest.fixture(params=[700, 4096, 65536], ids=lambda n: f"piece{n}")
def small_pieces(request, monkeypatch):
    """Pieces (and gunzip blocks) of a few bytes to a few KB, so every trace is cut many times."""
    monkeypatch.setattr(splitter, "PIECE", request.param)
    monkeypatch.setattr(reader, "BLOCK", max(1000, request.param // 3))
    return request.param


REAL = ["amd_mi250_minitoy_train.json.gz", "backward_thread.json", "triton_example.json.gz",
        "a100_cuda_event_sync.json.gz"]


@pytest.mark.parametrize("name", REAL)
def test_real_trace_in_small_pieces(small_pieces, name):
    path = hta_path(name)
    events = raw_events(raw_json(path))
    raw = load_trace(path)
    assert raw.warnings == []
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in events]


@pytest.mark.parametrize("name", ["amd_mi250_minitoy_train.json.gz", "triton_example.json.gz"])
def test_same_model_whatever_the_piece_size(small_pieces, name, monkeypatch):
    small = build_model(load_trace(hta_path(name)))
    monkeypatch.setattr(splitter, "PIECE", 512 << 10)
    big = build_model(load_trace(hta_path(name)))
    for part in ("cpu", "gpu", "steps", "gaps"):
        a, b = getattr(small, part), getattr(big, part)
        assert a.equals(b), part


@pytest.mark.parametrize("frac", [0.2, 0.5, 0.93])
def test_cut_trace_in_small_pieces(small_pieces, tmp_path, frac):
    text = raw_text(hta_path("amd_mi250_minitoy_train.json.gz"))
    spans, _ = event_spans(text)
    cut = int(len(text) * frac)
    p = write_trace(tmp_path / "cut.json", text[:cut], gz=False)
    _check_cut(load_trace(p), text, cut)


def _doc_text(events, before=None, after=None, sep=", ") -> bytes:
    head = "".join(f"{json.dumps(k)}: {json.dumps(v)}, " for k, v in (before or {}).items())
    tail = "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in (after or {}).items())
    return ("{" + head + '"traceEvents": [' + sep.join(json.dumps(e) for e in events) + "]" + tail
            + "}").encode()


def _hostile_events(n=60):
    ev = tiny_gpu_trace(steps=2)["traceEvents"]
    out = []
    for i in range(n):
        e = dict(ev[i % len(ev)])
        e["ts"] = e["ts"] + 1000 * (i // len(ev))
        if i % 7 == 0:
            e["name"] = 'x"}, {"ph": "X", "name": "fake"}, ]' + "\\" * (i % 3)
        if i % 5 == 0:
            e["args"] = dict(e.get("args", {}), nested={"a": {"b": [1, {"c": 2}]}, "d": "}, {"}, **{"Input Dims": [[1, 2], []]})
        if i % 11 == 0:
            e["args"] = dict(e.get("args", {}), big="}," * 3000)     # one event longer than a piece
        out.append(e)
    return out


@pytest.mark.parametrize("sep", [", ", ",\n  ", ",", " ,\n\n"])
def test_braces_inside_strings_and_args_are_not_cuts(small_pieces, tmp_path, sep):
    events = _hostile_events()
    meta = {"schemaVersion": 1, "note": '"traceEvents": [{"ph": "X"}]'}
    text = _doc_text(events, before=meta, after={"traceName": "t}, {", "baseTimeNanoseconds": 5}, sep=sep)
    raw = load_trace(write_trace(tmp_path / "t.json", text, gz=False))
    assert raw.warnings == []
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in events]
    assert raw.meta["traceName"] == "t}, {" and raw.meta["baseTimeNanoseconds"] == 5
    gz = load_trace(write_trace(tmp_path / "t.json.gz", text))
    assert [loaded_key(e) for e in gz.events] == [event_key(e) for e in events]


def test_bare_array_bom_and_trailing_junk_in_small_pieces(small_pieces, tmp_path):
    events = _hostile_events()
    text = b"\xef\xbb\xbf\n" + json.dumps(events, indent=1).encode() + b"\n# written twice\n" + b"x" * 5000
    raw = load_trace(write_trace(tmp_path / "t.json", text, gz=False))
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in events]
    junk = [w for w in raw.warnings if "trailing" in w]
    assert len(junk) == 1 and f"{len(b'# written twice') + 1 + 5000:,} bytes" in junk[0]


def test_written_twice_keeps_the_first_document(small_pieces, tmp_path):
    doc = tiny_gpu_trace()
    text = json.dumps(doc).encode()
    raw = load_trace(write_trace(tmp_path / "t.json", text + b"\n" + text, gz=False))
    assert len(raw.events) == len(doc["traceEvents"])
    assert any(f"{len(text):,} bytes of trailing data" in w for w in raw.warnings)


def test_escaped_key_and_no_array_go_through_the_whole_document(tmp_path):
    ev = tiny_gpu_trace()["traceEvents"]
    text = b'{"trace\\u0045vents": ' + json.dumps(ev).encode() + b"}"
    raw = load_trace(write_trace(tmp_path / "t.json", text, gz=False))
    assert len(raw.events) == len(ev)
    for bad, msg in [(b'{"traceEvents": {"a": 1}}', "traceEvents array"), (b'{"traceEvents": null}', "traceEvents array"),
                     (b'{"a": [1, 2]}', "no traceEvents"), (b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "not valid JSON")]:
        with pytest.raises(TraceError, match=msg):
            load_trace(write_trace(tmp_path / "bad.json", bad, gz=False))


def test_error_in_the_middle_of_a_big_trace_names_its_byte(small_pieces, tmp_path):
    events = _hostile_events(200)
    text = _doc_text(events)
    at = len(text) // 2
    at = text.index(b'"ph"', at)
    bad = text[:at] + b"@" + text[at + 1:]
    with pytest.raises(TraceError, match=rf"not valid JSON .*byte {at}\)"):
        load_trace(write_trace(tmp_path / "t.json", bad, gz=False))


def test_gzip_cut_in_small_blocks(small_pieces, tmp_path):
    text = raw_text(hta_path("triton_example.json.gz"))
    gz = gzip.compress(text)
    cut = gz[:int(len(gz) * 0.6)]
    raw = load_trace(write_trace(tmp_path / "c.json.gz", cut, gz=False))
    assert any("gzip stream ends early" in w for w in raw.warnings)
    assert any("cut off" in w for w in raw.warnings)


def test_columns_are_typed_and_interned():
    raw = load_trace(REPO_ROOT / "benchmarks" / "seed" / "small_conv_with_stack.json.gz")
    c = raw.columns
    assert c["ts"].dtype == np.float64 and c["name"].dtype == np.int32
    assert len(c.values("name")) < c.n / 10          # a name is stored once, events hold codes
    assert all(isinstance(v, bytes) for v in c.values("dims"))


def test_names_equal_as_keys_keep_their_type(small_pieces, tmp_path):
    """1, 1.0 and "1" are one dict key but three names (and pid 1 is not pid "1"): the loader looks
    (ph, cat, name, pid, tid) up as one key only while every name is text, then field by field."""
    ev = [X(f"op{i % 7}", "cpu_op", 10.0 * i, 5, pid=1 if i % 2 else "1") for i in range(300)]
    ev += [X(v, "cpu_op", 5000.0 + i, 1, pid=p) for i, (v, p) in
           enumerate([(1, 1), (1.0, 1), ("1", "1"), (2.5, 1), ("op1", 1), (1, "1"), ("op2", "1")])]
    ev += [X(f"op{i % 3}", "cpu_op", 6000.0 + i, 1, pid="1" if i % 2 else 1) for i in range(300)]
    raw = load_trace(write_trace(tmp_path / "t.json", {"traceEvents": ev}))
    assert [(type(e.name), e.name, type(e.pid), e.pid) for e in raw.events] == \
        [(type(e["name"]), e["name"], type(e["pid"]), e["pid"]) for e in ev]


@pytest.mark.parametrize("value, expect, linked", [(1e308 * 10, None, False), ("12", "12", False), ("x", "x", False),
                                                   (2**64, None, False), (-(2**63), None, False), (7.0, 7, False),
                                                   ("1", "1", True), (1.0, 1, True)])
def test_odd_correlation_values(make_trace, value, expect, linked):
    """The raw view keeps an id as written (a string stays a string); the model reads it as a number."""
    ev = [X("cudaLaunchKernel", "cuda_runtime", 10, 5, correlation=1),
          X("k", "kernel", 20, 5, pid=0, tid=7, correlation=1, device=0, stream=7)]
    ev[1]["args"]["correlation"] = value
    text = json.dumps({"traceEvents": ev}).replace("Infinity", "1e400")
    raw = load_trace(make_trace(text))
    assert raw.events[1].args.correlation == expect
    m = build_model(raw)
    assert m.gpu["launcher"].tolist() == [0 if linked else -1]


def test_progress_reports_bytes_and_events(small_pieces):
    from traceinsight.trace.progress import reporting
    path = hta_path("triton_example.json.gz")
    size = path.stat().st_size
    calls = []
    with reporting(lambda *a: calls.append(a)):
        raw = load_trace(path)
    assert len(calls) >= 2 and calls[-1] == (size, size, raw.n_events, True)
    assert not any(c[3:] for c in calls[:-1])
    for k in (0, 2):
        assert [c[k] for c in calls] == sorted(c[k] for c in calls)
    assert all(c[1] == size for c in calls)
    explicit = []
    load_trace(path, progress=lambda *a: explicit.append(a))
    assert explicit[-1] == calls[-1]


def test_absurd_times_are_dropped_not_summed(make_trace):
    """Found by the fuzzer: a kernel of 1e308 us made the report's sums infinite (and its JSON invalid)."""
    ev = tiny_gpu_trace()["traceEvents"]
    ev[3]["dur"] = 1e308                      # a kernel
    ev[1]["ts"] = -1e300                      # an op
    m = build_model(load_trace(make_trace({"traceEvents": ev})))
    assert np.isfinite(m.gpu["end"]).all() and np.isfinite(m.cpu["end"]).all()
    assert len(m.gpu) == sum(1 for e in ev if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")) - 1
    assert any("1 events with no usable timestamp" in w for w in m.warnings)
    assert any("1 events lasting more than 11.6 days" in w for w in m.warnings)


def test_invalid_utf8_costs_the_text_not_the_trace(make_trace):
    """Found by the fuzzer: one byte 0x80 in a name was an internal error (UnicodeDecodeError)."""
    text = json.dumps(tiny_gpu_trace()).encode().replace(b'"aten::mm"', b'"aten::\x80mm"', 1)
    text = text.replace(b'"schemaVersion"', b'"\xffschemaVersion"')
    raw = load_trace(make_trace(text))
    assert any("invalid UTF-8" in w for w in raw.warnings)
    m = build_model(raw)
    assert "aten::\ufffdmm" in set(m.cpu["name"])


def test_every_event_full_of_braces(small_pieces, tmp_path):
    """Each event's strings hold hundreds of '},' (more than the quick cuts try): the exact scan cuts."""
    events = [X(f'op}}, {{"n": {i}}},' * 50, "cpu_op", 10 * i, 5, args_={"s": "\\\\},\\\"}," * 40}) for i in range(300)]
    raw = load_trace(write_trace(tmp_path / "t.json", json.dumps({"traceEvents": events}).encode(), gz=False))
    assert raw.warnings == []
    assert [loaded_key(e) for e in raw.events] == [event_key(e) for e in events]


@pytest.mark.parametrize("name", ["amd_mi250_minitoy_train.json.gz", "a100_rank0_of2_nccl.json.gz"])
def test_args_of_every_event_as_written(name):
    """Runtime calls and ops carry stream / bytes too in some traces (the HTA oracle reads them).
    Ids written as text ("0x1f") come back read as numbers the way the model reads them."""
    events = raw_events(raw_json(hta_path(name)))
    raw = load_trace(hta_path(name))
    keys = {"correlation": "correlation", "External id": "external_id", "stream": "stream", "device": "device",
            "bytes": "bytes", "memory bandwidth (GB/s)": "bandwidth"}
    seen = 0
    for e, got in zip(events, raw.events):
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        for k, attr in keys.items():
            v = a.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                assert getattr(got.args, attr) == v, (e, k)
                seen += 1
            elif v is None:
                assert getattr(got.args, attr) is None, (e, k)
    assert seen > 100
