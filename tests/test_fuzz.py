"""Fuzzing: real traces, mutated, through `traceinsight analyze` in-process.

Mutations: cuts anywhere in the text, fields of the wrong type, missing keys, duplicated /
reordered / hostile events (names with <script>, U+2028, 100 KB strings), huge numbers, NaN and
infinity (as JSON's refused literals and as 1e400), odd pids and tids, odd top-level metadata, BOM,
junk. Whatever the input, the command must end with a report (exit 0) or ONE clear error line
(exit 2) that is not an internal error, never a traceback, never hang; hostile names are escaped
in the HTML.

CI runs a fixed seed and a small budget (derandomize, FUZZ_EXAMPLES examples). A long run by hand:
    TRACEINSIGHT_FUZZ_EXAMPLES=2000 TRACEINSIGHT_FUZZ_RANDOM=1 pytest tests/test_fuzz.py -x
"""
from __future__ import annotations

import copy
import gzip
import json
import os
import signal
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO_ROOT
from traceinsight.cli import app

EXAMPLES = int(os.environ.get("TRACEINSIGHT_FUZZ_EXAMPLES", "30"))
RANDOM = bool(os.environ.get("TRACEINSIGHT_FUZZ_RANDOM"))
DEADLINE_S = 30                     # one analysis of a few thousand events takes well under a second
MAX_EVENTS = 2500
SEEDS = ["sample_traces/launch_small_mlp__before.json.gz", "sample_traces/launch_tiny_conv__after.json.gz",
         "sample_traces/fp32_matmul__before.json.gz", "sample_traces/pageable_h2d__before.json.gz",
         "benchmarks/seed/small_conv_with_stack.json.gz"]
SCRIPT = "<script>alert(1)</script>"
BIG = "@@1e400@@"                   # replaced by the literal 1e400 (out of float range) in the text


@lru_cache(maxsize=None)
def seed_doc(rel: str) -> dict:
    doc = json.loads(gzip.decompress((REPO_ROOT / rel).read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][:MAX_EVENTS]
    return doc


HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True), st.just(BIG),
    st.sampled_from([SCRIPT, "\u2028\u2029", "", "12", "-1", "nan", "inf", "1e400", "stream 7", "0x10",
                     "x" * 100_000, "ProfilerStep#", "ProfilerStep#99999999999999999999"]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
EVENT_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"]
ARG_KEYS = ["correlation", "External id", "stream", "device", "bytes", "Input Dims", "name",
            "memory bandwidth (GB/s)"]


def _pick(draw, events):
    return draw(st.integers(0, max(0, len(events) - 1)))


def op_wrong_type(draw, doc):
    ev = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 20))):
        if not ev:
            return
        e = ev[_pick(draw, ev)]
        if not isinstance(e, dict):
            continue
        if draw(st.booleans()) and isinstance(e.get("args"), dict):
            e["args"][draw(st.sampled_from(ARG_KEYS))] = draw(HOSTILE)
        else:
            e[draw(st.sampled_from(EVENT_KEYS))] = draw(HOSTILE)


def op_missing_key(draw, doc):
    ev = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 30))):
        e = ev[_pick(draw, ev)] if ev else None
        if isinstance(e, dict) and e:
            e.pop(draw(st.sampled_from(sorted(e))), None)


def op_duplicate(draw, doc):
    ev = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 50))):
        if ev:
            e = copy.deepcopy(ev[_pick(draw, ev)])
            if isinstance(e, dict) and draw(st.booleans()) and isinstance(e.get("ts"), (int, float)):
                e["ts"] += draw(st.floats(-1000, 1000))
            ev.insert(_pick(draw, ev), e)


def op_reorder(draw, doc):
    ev = doc["traceEvents"]
    i, j = sorted([_pick(draw, ev), _pick(draw, ev)])
    part = ev[i:j]
    draw(st.randoms(use_true_random=False)).shuffle(part)
    ev[i:j] = part


def op_hostile_names(draw, doc):
    ev = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 30))):
        e = ev[_pick(draw, ev)] if ev else None
        if isinstance(e, dict):
            e["name"] = draw(st.sampled_from([SCRIPT, f"aten::mm{SCRIPT}", "\u2028</script>\u2029", "x" * 100_000,
                                              "a\u0000b", "\ud7ff\ue000", "ProfilerStep#1" + SCRIPT]))


def op_numbers(draw, doc):
    ev = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 10))):
        e = ev[_pick(draw, ev)] if ev else None
        if isinstance(e, dict):
            e[draw(st.sampled_from(["ts", "dur"]))] = draw(st.sampled_from(
                [1e300, -1e300, 1e308, 2**64, -(2**63), BIG, 0, -5, 1e-300, 4e15, float("nan"), float("inf")]))


def op_odd_ids(draw, doc):
    ev = doc["traceEvents"]
    choice = draw(st.sampled_from(["string", "negative", "huge", "float", "mixed", "none"]))
    for e in ev:
        if not isinstance(e, dict) or draw(st.integers(0, 3)):
            continue
        for k in ("pid", "tid"):
            v = e.get(k)
            e[k] = {"string": str(v), "negative": -7, "huge": 2**66, "float": 1.5,
                    "mixed": draw(st.sampled_from([str(v), v, None, [v]])), "none": None}[choice]


def op_top_level(draw, doc):
    key = draw(st.sampled_from(["deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceName",
                                "schemaVersion", "traceEvents"]))
    if key == "traceEvents":
        doc["traceEvents"] = doc["traceEvents"] + [draw(HOSTILE) for _ in range(draw(st.integers(1, 5)))]
    else:
        doc[key] = draw(HOSTILE)


def op_drop_kinds(draw, doc):
    cat = draw(st.sampled_from(["kernel", "cuda_runtime", "user_annotation", "cpu_op", "python_function", "gpu_memcpy"]))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (isinstance(e, dict) and e.get("cat") == cat)]


OPS = [op_wrong_type, op_missing_key, op_duplicate, op_reorder, op_hostile_names, op_numbers, op_odd_ids,
       op_top_level, op_drop_kinds]


@st.composite
def mutated_trace(draw):
    rel = draw(st.sampled_from(SEEDS))
    doc = copy.deepcopy(seed_doc(rel))
    ops = draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=4))
    for op in ops:
        op(draw, doc)
    form = draw(st.sampled_from(["object", "object", "array"]))
    text = json.dumps(doc if form == "object" else doc["traceEvents"], indent=draw(st.sampled_from([None, 1])))
    text = text.replace(json.dumps(BIG), "1e400").encode("utf-8", "surrogatepass")
    byte_op = draw(st.sampled_from(["none", "none", "cut", "junk", "bom", "flip"]))
    if byte_op == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif byte_op == "junk":
        text += draw(st.binary(min_size=1, max_size=64))
    elif byte_op == "bom":
        text = b"\xef\xbb\xbf" + text
    elif byte_op == "flip" and text:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + bytes([draw(st.integers(0, 255))]) + text[i + 1:]
    gz = draw(st.booleans())
    return Case(rel, [op.__name__ for op in ops] + [byte_op], gzip.compress(text, 1) if gz else text, gz)


class Case:
    """A mutated trace; its repr stays short (the bytes go to tests/artifacts/ when a case fails)."""

    def __init__(self, seed, ops, data, gz):
        self.seed, self.ops, self.data, self.gz = seed, ops, data, gz

    def __repr__(self):
        return f"Case({self.seed!r}, {self.ops}, {len(self.data)} bytes, gz={self.gz})"


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so the command's own error handling cannot swallow it."""


def _alarm(signum, frame):
    raise Hang()


def run_analyze(path: Path, out: Path):
    from typer.testing import CliRunner
    html, js = out / "r.html", out / "r.json"
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(DEADLINE_S)
    try:
        res = CliRunner().invoke(app, ["analyze", str(path), "-o", str(html), "--json", str(js), "--force", "-q"],
                                 catch_exceptions=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return res, html, js


def check_outcome(res, path: Path, html: Path, js: Path, what) -> None:
    if isinstance(res.exception, Hang):
        pytest.fail(f"hang (over {DEADLINE_S} s) on {what}")
    out = res.stdout + res.stderr
    assert "Traceback" not in out, what
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{what}: uncaught {type(res.exception).__name__}: {res.exception}")
    assert res.exit_code in (0, 2), (what, res.exit_code, out[-2000:])
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("traceinsight: error: "), (what, res.stderr[-2000:])
        assert str(path) in lines[0], (what, lines[0])
        assert "please report it" not in lines[0], f"internal error on {what}: {lines[0]}"
        return
    page = html.read_text(encoding="utf-8")
    assert SCRIPT not in page and "</script>\u2029" not in page, f"unescaped name in the HTML ({what})"
    doc = json.loads(js.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    assert doc, what


def _refuse_constant(name):
    raise AssertionError(f"{name} in the JSON output: not JSON")


@settings(max_examples=EXAMPLES, derandomize=not RANDOM, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=mutated_trace())
def test_mutated_real_traces(tmp_path_factory, case):
    d = tmp_path_factory.mktemp("fuzz")
    path = d / ("t.json.gz" if case.gz else "t.json")
    path.write_bytes(case.data)
    res, html, js = run_analyze(path, d)
    try:
        check_outcome(res, path, html, js, repr(case))
    except BaseException:
        keep = REPO_ROOT / "tests" / "artifacts" / "fuzz"
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"failing_{abs(hash(case.data)) % 10**8}{path.suffix}").write_bytes(case.data)
        raise


def test_every_seed_analyzes_cleanly(tmp_path):
    for rel in SEEDS:
        path = tmp_path / "seed.json"
        path.write_text(json.dumps(seed_doc(rel)))
        res, html, js = run_analyze(path, tmp_path)
        assert res.exit_code == 0, (rel, res.stderr)
        check_outcome(res, path, html, js, rel)
