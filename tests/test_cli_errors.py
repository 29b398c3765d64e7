"""The bad-input corpus, through the real command line in a subprocess.

Bad input: exit code 2, stderr is ONE line "traceinsight: error: ..." naming the file and the problem,
no traceback anywhere, nothing on stdout. Recoverable input: exit 0, a warning on stderr.
All cases are built first and run two or three at a time (each run is mostly Python start-up).
"""
from __future__ import annotations

import gzip
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from conftest import HTA_DIR, X, run_cli_args, tiny_gpu_trace

GOOD = tiny_gpu_trace()


def _good_bytes() -> bytes:
    return json.dumps(GOOD, indent=1).encode()


@dataclass
class Case:
    args: list                        # after "analyze"
    expect: str                       # "error" (exit 2, one line), "ok" (exit 0), "either"
    names: Optional[Path] = None      # the path the error line must name (default: first arg)
    problem: str = ""                 # regex the error line must match (case-insensitive)
    warn: str = ""                    # "ok": regex a "traceinsight: warning:" line must match
    unchanged: dict = field(default_factory=dict)   # path -> bytes it must still hold afterwards
    check: Optional[Callable] = None  # more checks on the finished process


def _w(root: Path, name: str, data) -> Path:
    p = root / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


NOT_JSON = r"not JSON|not valid JSON|not a Kineto trace"
NOT_TRACE = r"not a Kineto trace|no traceEvents|no .*events"


def c_missing(root):
    return Case([root / "nope.json"], "error", problem=r"no such file|not found|does not exist")


def c_missing_parent(root):
    return Case([root / "no_dir" / "t.json.gz"], "error", problem=r"no such file|not found|does not exist")


def c_dir_without_traces(root):
    d = root / "empty_run"
    d.mkdir()
    (d / "notes.txt").write_text("hello")
    (d / "sub").mkdir()
    return Case([d], "error", problem=r"no .*trace|no \.json")


def c_dir_with_a_bad_trace(root):
    d = root / "run_bad"
    d.mkdir()
    _w(d, "rank0.json", _good_bytes())
    bad = _w(d, "rank1.json", b"")
    return Case([d], "error", names=bad, problem="empty")


def c_empty(root):
    return Case([_w(root, "empty.json", b"")], "error", problem="empty")


def c_whitespace(root):
    return Case([_w(root, "ws.json", b"  \n\t\r\n   ")], "error", problem="empty")


def c_text(root):
    return Case([_w(root, "text.json", "this is not a trace\nat all\n")], "error", problem=NOT_JSON)


def c_binary(root):
    return Case([_w(root, "bin.json", bytes(range(256)) * 8)], "error", problem=NOT_JSON)


def c_binary_brace(root):
    return Case([_w(root, "binbrace.json", b"{" + bytes(range(256)) * 8)], "error", problem=NOT_JSON)


def c_number(root):
    return Case([_w(root, "num.json", "42")], "error", problem=NOT_JSON)


def c_string(root):
    return Case([_w(root, "str.json", '"a trace"')], "error", problem=NOT_JSON)


def c_foo(root):
    return Case([_w(root, "foo.json", '{"foo": 1}')], "error", problem=NOT_TRACE)


def c_events_number(root):
    return Case([_w(root, "ev5.json", '{"traceEvents": 5}')], "error", problem=NOT_TRACE)


def c_events_empty(root):
    return Case([_w(root, "ev0.json", '{"traceEvents": []}')], "error", problem=NOT_TRACE)


def c_empty_array(root):
    return Case([_w(root, "arr0.json", "[]")], "error", problem=NOT_TRACE)


def c_events_not_objects(root):
    return Case([_w(root, "evnum.json", '{"traceEvents": [1, 2, "x", null, [3]]}')], "error", problem=NOT_TRACE)


def c_only_metadata(root):
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
          {"ph": "i", "name": "Record Window End", "pid": "", "tid": "", "ts": 5, "s": "g"}]
    return Case([_w(root, "meta.json", json.dumps({"traceEvents": ev}))], "error", problem=NOT_TRACE)


def c_unknown_categories(root):
    ev = [X("thing", "my_tool", 0, 10), X("other", "Trace", 5, 10)]
    return Case([_w(root, "unk.json", json.dumps({"traceEvents": ev}))], "error", problem=NOT_TRACE)


def c_nan_inside(root):
    # Kineto itself writes inf / NaN (pytorch/kineto#105): that value is read as missing, not the trace lost.
    text = _good_bytes().replace(b'"dur": 80', b'"dur": NaN', 1)
    return Case([_w(root, "nan.json", text)], "ok", warn="not finite JSON numbers")


def c_gzip_bad_header(root):
    return Case([_w(root, "badhdr.json.gz", b"\x1f\x8b" + b"\xff" * 64)], "error", problem="gzip")


def c_gzip_header_only(root):
    return Case([_w(root, "hdr.json.gz", gzip.compress(_good_bytes())[:10])], "error", problem="gzip|truncat|empty")


def c_gzip_bad_crc(root):
    g = bytearray(gzip.compress(_good_bytes()))
    g[-6] ^= 0xFF                                  # CRC32 of the trailer
    return Case([_w(root, "crc.json.gz", bytes(g))], "either", problem="gzip|corrupt", warn="gzip|corrupt|check")


def c_gzip_of_text(root):
    return Case([_w(root, "gztext.json.gz", gzip.compress(b"hello, world"))], "error", problem=NOT_JSON)


def c_gzip_of_nothing(root):
    return Case([_w(root, "gz0.json.gz", gzip.compress(b""))], "error", problem="empty")


def c_deep_arrays(root):
    return Case([_w(root, "deep.json", b"[" * 100000)], "error", problem=r"nest|deep|" + NOT_JSON)


def c_deep_objects(root):
    text = b'{"traceEvents": [' + b'{"a": ' * 100000 + b"1" + b"}" * 100000 + b"]}"
    return Case([_w(root, "deepobj.json", text)], "error", problem=r"nest|deep|" + NOT_JSON)


def c_deep_inside_a_trace(root):
    """Deep nesting beyond the first and last 64 KiB of an otherwise fine trace."""
    filler = [X("aten::add", "cpu_op", 5000 + i, 0.5, pid=10, tid=10) for i in range(2500)]
    head = json.dumps({"traceEvents": GOOD["traceEvents"] + filler})[:-2]
    text = (head + ", " + "[" * 50000 + "]" * 50000 + ", " + json.dumps(filler)[1:-1] + "]}").encode()
    return Case([_w(root, "deepmid.json", text)], "either", problem=r"nest|deep|" + NOT_JSON, warn=".")


def c_huge_integer(root):
    doc = json.loads(json.dumps(GOOD))
    doc["traceEvents"][3]["args"]["correlation"] = 123456789012345678901234567890
    return Case([_w(root, "bigint.json", json.dumps(doc))], "ok")


def c_trailing_garbage(root):
    p = _w(root, "trailing.json", _good_bytes() + b"\n# end of trace\n")
    n = len(GOOD["traceEvents"])
    return Case([p], "ok", warn=r"trailing|after the end|ignored",
                check=lambda proc, out: _events_in_json(out) == n)


def c_written_twice(root):
    p = _w(root, "twice.json", _good_bytes() + _good_bytes())
    return Case([p], "ok", warn=r"trailing|after the end|ignored|twice",
                check=lambda proc, out: _events_in_json(out) == len(GOOD["traceEvents"]))


def c_utf8_bom(root):
    p = _w(root, "bom.json", b"\xef\xbb\xbf" + _good_bytes())
    return Case([p], "ok", check=lambda proc, out: _events_in_json(out) == len(GOOD["traceEvents"]))


def c_no_profiler_steps(root):
    ev = [e for e in GOOD["traceEvents"] if not e["name"].startswith("ProfilerStep#")]
    p = _w(root, "nosteps.json", json.dumps({"traceEvents": ev}))
    return Case([p], "ok", warn="ProfilerStep")


def c_good(root):
    """The control: a fine trace passes with no warning at all."""
    return Case([_w(root, "good.json", _good_bytes())], "ok",
                check=lambda proc, out: "warning" not in proc.stderr and _events_in_json(out) == len(GOOD["traceEvents"]))


def c_one_bad_of_two(root):
    good = _w(root, "good2.json", _good_bytes())
    bad = _w(root, "bad2.json", "{]")
    return Case([good, bad], "error", names=bad, problem=NOT_JSON)


# ---- output paths

def c_output_is_the_input(root):
    t = _w(root, "in1.json", _good_bytes())
    return Case([t, "-o", t], "error", names=t, problem="input", unchanged={t: t.read_bytes()})


def c_json_is_the_input_other_spelling(root):
    t = _w(root, "in2.json", _good_bytes())
    (root / "sub2").mkdir()
    other = root / "sub2" / ".." / "in2.json"
    return Case([t, "--json", other, "--force"], "error", names=other, problem="input",
                unchanged={t: t.read_bytes()})


def c_output_exists(root):
    t = _w(root, "in3.json", _good_bytes())
    out = _w(root, "report3.html", b"<p>keep me</p>")
    return Case([t, "-o", out], "error", names=out, problem="exists|--force", unchanged={out: out.read_bytes()})


def c_json_exists(root):
    t = _w(root, "in4.json", _good_bytes())
    out = _w(root, "out4.json", b'{"keep": true}')
    return Case([t, "--json", out], "error", names=out, problem="exists|--force", unchanged={out: out.read_bytes()})


def c_output_exists_force(root):
    t = _w(root, "in5.json", _good_bytes())
    out = _w(root, "report5.html", b"<p>old</p>")
    return Case([t, "-o", out, "--force"], "ok",
                check=lambda proc, o: out.read_bytes() != b"<p>old</p>" and b"<html" in out.read_bytes()[:2000].lower())


def c_output_dir_missing(root):
    t = _w(root, "in6.json", _good_bytes())
    out = root / "no_such_dir" / "report.html"
    return Case([t, "-o", out], "error", names=out, problem="director|does not exist",
                check=lambda proc, o: not out.parent.exists())


def c_output_is_a_directory(root):
    t = _w(root, "in8.json", _good_bytes())
    d = root / "outdir8"
    d.mkdir()
    return Case([t, "-o", d, "--force"], "error", names=d, problem="director")


CASES = {f.__name__[2:]: f for f in [
    c_missing, c_missing_parent, c_dir_without_traces, c_dir_with_a_bad_trace, c_empty, c_whitespace,
    c_text, c_binary, c_binary_brace, c_number, c_string, c_foo, c_events_number,
    c_events_empty, c_empty_array, c_events_not_objects,
    c_only_metadata, c_unknown_categories, c_nan_inside, c_gzip_bad_header, c_gzip_header_only,
    c_gzip_bad_crc, c_gzip_of_text, c_gzip_of_nothing, c_deep_arrays,
    c_deep_objects, c_deep_inside_a_trace, c_huge_integer, c_trailing_garbage,
    c_written_twice, c_utf8_bom, c_no_profiler_steps, c_good, c_one_bad_of_two,
    c_output_is_the_input, c_json_is_the_input_other_spelling, c_output_exists, c_json_exists,
    c_output_exists_force, c_output_dir_missing, c_output_is_a_directory]}


def _events_in_json(out: Path) -> int:
    doc = json.loads(out.read_text())
    return doc["trace"]["events"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    jobs = {}
    for name, build in CASES.items():
        case = build(root)
        argv = ["analyze", *case.args]
        out = None
        if case.expect != "error" and "--json" not in map(str, case.args):
            out = root / f"{name}.out.json"
            argv += ["--json", out]
        if "-q" not in argv:
            argv.append("-q")
        jobs[name] = (case, argv, out)
    with ThreadPoolExecutor(max_workers=3) as pool:
        procs = dict(zip(jobs, pool.map(lambda j: run_cli_args(j[1]), jobs.values())))
    return {name: (jobs[name][0], procs[name], jobs[name][2]) for name in jobs}


def _check_error_line(case: Case, proc):
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, f"stderr must be one line, got:\n{proc.stderr}"
    line = lines[0]
    assert line.startswith("traceinsight: error: "), line
    named = case.names if case.names is not None else case.args[0]
    assert str(named) in line, f"the error must name {named}: {line}"
    if case.problem:
        assert re.search(case.problem, line, re.I), f"the error must say what is wrong ({case.problem}): {line}"
    assert proc.stdout == ""


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(results, name):
    case, proc, out = results[name]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    for p, data in case.unchanged.items():
        assert p.read_bytes() == data, f"{p} was modified"
    if case.expect == "error":
        assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stderr}"
        _check_error_line(case, proc)
    elif case.expect == "ok":
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr}"
        if case.warn:
            warns = [ln for ln in proc.stderr.splitlines() if ln.startswith("traceinsight: warning:")]
            assert any(re.search(case.warn, ln, re.I) for ln in warns), proc.stderr
            assert all(str(case.args[0]) in ln for ln in warns)
    else:
        assert proc.returncode in (0, 2), f"exit {proc.returncode}\n{proc.stderr}"
        if proc.returncode == 2:
            _check_error_line(case, proc)
        else:
            assert re.search(case.warn or ".", proc.stderr), "recovered input must come with a warning"
    if case.check is not None:
        assert case.check(proc, out), proc.stderr


def test_missing_trace_argument_is_a_usage_error():
    proc = run_cli_args(["analyze"])
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout


def test_real_traces_directory_is_refused_cleanly_when_one_is_bad(tmp_path):
    """A directory of real traces plus one broken file: the broken one is named, nothing else printed."""
    d = tmp_path / "ranks"
    d.mkdir()
    (d / "a.json.gz").write_bytes((HTA_DIR / "triton_example.json.gz").read_bytes())
    (d / "b.json.gz").write_bytes((HTA_DIR / "triton_example.json.gz").read_bytes()[:8])
    proc = run_cli_args(["analyze", d, "-q"])
    assert proc.returncode == 2
    _check_error_line(Case([d / "b.json.gz"], "error", problem="gzip|truncat"), proc)
