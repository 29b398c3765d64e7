"""The HTML report: content, escaping of hostile trace strings, no network references, size bound."""
from __future__ import annotations

import gzip
from markupsafe import escape as _escape
import json
import re
from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import build_report, document as to_dict
from traceinsight.render import html as html_r
from traceinsight.render.assets import dumps_for_script, static_asset
from traceinsight.render.format import fmt
from traceinsight.report.timeline import MAX_ITEMS, timeline_data

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = ROOT / "tests" / "data" / "external" / "hta"
SAMPLES = ROOT / "sample_traces"

def esc(s: str) -> str:
    """What jinja2's autoescape makes of a string."""
    return str(_escape(s))


EVIL_SCRIPT = "<script>alert(1)</script>"
EVIL_CLOSE = "</script>"
EVIL_IMG = "<img src=x onerror=alert(2)>"
EVIL_FILE = "evil<svg onload=alert(9)>.json.gz"  # no "/" in a file name
EVIL_LS = "op\u2028with\u2029separators & <b>bold</b>"


def write_adversarial_trace(path: Path, steps: int = 3, kernels_per_step: int = 12) -> Path:
    """A tiny Kineto trace whose op, kernel, thread and GPU names are HTML/JS injections.

    ProfilerStep#N annotations on the main thread; in each step an aten op that launches kernels
    through cudaLaunchKernel, linked to the GPU kernels by correlation id; the GPU idles between
    kernels (the CPU launches slower than the kernels run), so the analysis reports findings.
    """
    ev = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": EVIL_SCRIPT}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": EVIL_CLOSE}},
    ]
    corr = 1
    t = 1000.0
    step_us = 100.0 * kernels_per_step + 200.0
    for s in range(steps):
        t0 = t + s * step_us
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 1, "tid": 1,
                   "ts": t0, "dur": step_us - 10})
        ev.append({"ph": "X", "cat": "user_annotation", "name": EVIL_IMG, "pid": 1, "tid": 1,
                   "ts": t0 + 5, "dur": step_us - 30})
        for k in range(kernels_per_step):
            ts = t0 + 20 + k * 100.0
            op = [EVIL_SCRIPT, EVIL_CLOSE, EVIL_LS][k % 3]
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 90.0,
                       "args": {"External id": corr, "Input Dims": [[4, 4], [EVIL_CLOSE]]}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": ts + 70, "dur": 10.0, "args": {"correlation": corr, "External id": corr}})
            kname = [EVIL_CLOSE + "<script>alert(3)</script>", EVIL_SCRIPT, "\u2028kernel&amp;"][k % 3]
            ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": ts + 85, "dur": 8.0,
                       "args": {"correlation": corr, "device": 0, "stream": 7, "External id": corr}})
            corr += 1
    doc = {"schemaVersion": 1, "traceEvents": ev,
           "deviceProperties": [{"id": 0, "name": "GPU " + EVIL_SCRIPT, "computeMajor": 9, "computeMinor": 0}],
           "cuda_runtime_version": EVIL_CLOSE}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def script_blocks(page: str) -> list[tuple[str, str]]:
    """(opening tag, body) of every <script> element, the way an HTML parser splits them."""
    return re.findall(r"(<script\b[^>]*>)(.*?)</script\s*>", page, flags=re.S | re.I)


@pytest.fixture(scope="module")
def evil(tmp_path_factory):
    p = write_adversarial_trace(tmp_path_factory.mktemp("evil") / EVIL_FILE)
    a = analyze_file(p)
    return a, html_r.render([build_report(a)])


@pytest.fixture(scope="module")
def ext():
    # Small, fast, and two ranked findings plus a minor one.
    p = EXTERNAL / "a100_cuda_event_sync.json.gz"
    a = analyze_file(p)
    return a, html_r.render([build_report(a)])


def test_report_has_verdict_facts_and_findings(ext):
    a, page = ext
    d = to_dict(a)
    assert d["findings"], "this trace has ranked findings"
    assert esc(d["verdict"]) in page
    assert "NVIDIA A100" in page
    for f in d["findings"]:
        assert esc(f["title"]) in page
        assert esc(f["fix"]) in page
        assert f"{fmt(f['estimated_savings_ms'])} ms" in page
    assert "estimate, median per step" in page
    assert "measured cost per step" in page
    assert "Replay check" in page and "replay error" in page
    for f in d["minor_findings"]:
        assert esc(f["title"]) in page
    assert "Minor findings" in page
    # Every number is labelled: tables say per step / mean / total.
    assert "GPU ms per step (mean)" in page and "ms summed over every step" in page
    # Foldable sections and the per-step table: one row per step.
    assert page.count("<details") >= 4
    for s in d["steps"]:
        assert f'<td class="n">{s["step"]}</td>' in page
    # No directories of the input, only its name.
    assert str(EXTERNAL) not in page and "a100_cuda_event_sync.json.gz" in page


def test_timeline_embedded_and_round_trips(ext):
    a, page = ext
    m = re.search(r'<script type="application/json" id="tl-data-0">(.*?)</script>', page, flags=re.S)
    assert m, "timeline data block"
    data = json.loads(m.group(1))
    assert data == json.loads(json.dumps(timeline_data(a, max_items=MAX_ITEMS)))
    assert data["step"] == to_dict(a)["representative_step"]
    groups = {r["group"] for r in data["rows"]}
    assert {"cpu", "gpu", "idle"} <= groups
    n = sum(len(r["items"]) for r in data["rows"])
    assert n == data["items_kept"] > 0
    for r in data["rows"]:
        starts = [it[0] for it in r["items"]]
        assert starts == sorted(starts)
        for it in r["items"]:
            assert 0 <= it[2] < len(data["names"]) and 0 <= it[3] < len(data["classes"]) and it[4] >= 1
    # Idle items are the analysis' gaps of that step, colored by their largest cause.
    gaps = a.gaps[a.gaps["step"] == data["step"]]
    idle = [it for r in data["rows"] if r["group"] == "idle" for it in r["items"]]
    assert len(idle) == len(gaps)
    causes = ["launch_overhead", "host_bound", "sync_stall", "pageable_memcpy", "collective_wait",
              "dependency_wait", "unattributed"]
    g = gaps.sort_values("start").iloc[0]
    first = min(idle, key=lambda it: it[0])
    biggest = max(causes, key=lambda c: g[c])
    assert data["classes"][first[3]] == f"idle:{biggest}"
    assert "timeline.js" not in page or "TraceInsightTimeline" in page
    assert 'class="ti-timeline"' in page and "TraceInsightTimeline" in page


def test_adversarial_trace_stays_text(evil):
    a, page = evil
    d = to_dict(a)
    assert d["findings"], "the hostile trace is launch-bound: it must produce findings to render"
    low = page.lower()
    assert "<script>alert" not in low
    assert "<img src=x" not in low
    assert "<b>bold</b>" not in page and "<svg onload" not in low
    # Only our own script elements: one JSON block per timeline and the inlined timeline.js.
    blocks = script_blocks(page)
    assert [tag for tag, _ in blocks] == ['<script type="application/json" id="tl-data-0">', "<script>"]
    assert low.count("<script") == 2 and low.count("</script") == 2
    # U+2028/2029 never appear raw inside a script.
    for _, body in blocks:
        assert "\u2028" not in body and "\u2029" not in body
    # The hostile names survive as data: the embedded JSON decodes back to them.
    data = json.loads(blocks[0][1])
    names = set(data["names"])
    assert EVIL_SCRIPT in names and EVIL_CLOSE in names and EVIL_LS in names
    assert any(r["label"].startswith(EVIL_SCRIPT) for r in data["rows"])
    # ... and as escaped text in the HTML.
    assert esc(EVIL_SCRIPT) in page
    assert esc(EVIL_FILE) in page


def test_dumps_for_script_escapes():
    s = dumps_for_script({"a": "</script><script>alert(1)</script>", "b": "x\u2028y\u2029&z>"})
    for ch in ("<", ">", "&", "\u2028", "\u2029"):
        assert ch not in s
    assert json.loads(s) == {"a": "</script><script>alert(1)</script>", "b": "x\u2028y\u2029&z>"}


def test_no_network_references(ext, evil):
    for _, page in (ext, evil):
        low = page.lower()
        assert "http://" not in low and "https://" not in low
        assert "//cdn" not in low and "@import" not in low and "url(" not in low
        markup = re.sub(r"(<script\b[^>]*>).*?</script\s*>", r"\1</script>", low, flags=re.S)
        # Inside tags only: escaped text may read "&lt;img src=x" (a hostile op name shown as text, harmless).
        tags = " ".join(re.findall(r"<[^<>]*>", markup))
        assert not re.search(r"""[\s"'/](src|href|srcset|action|poster)\s*=\s*["']?(?!#)""", tags), \
            "no src/href attributes except #anchors"
        assert "<img" not in markup
        assert "<link" not in low and "<iframe" not in low
    js = static_asset("timeline.js")
    assert "innerHTML" not in js and "fetch(" not in js and "XMLHttpRequest" not in js
    assert ".src" not in js and "import(" not in js


def test_multiple_traces_one_section_each(ext, evil):
    a1, _ = ext
    a2, _ = evil
    page = html_r.render([build_report(a1), build_report(a2)])
    assert page.count('<section class="trace"') == 2
    assert 'id="tl-data-0"' in page and 'id="tl-data-1"' in page
    assert esc(to_dict(a1)["verdict"]) in page and esc(to_dict(a2)["verdict"]) in page
    assert "2 traces in this report" in page


def test_deterministic(ext):
    a, page = ext
    assert html_r.render([build_report(a)]) == page


def test_cpu_only_trace_renders():
    p = EXTERNAL / "cpu_only.pt.trace.json.gz"
    a = analyze_file(p)
    page = html_r.render([build_report(a)])
    assert esc(a.verdict) in page and "CPU-only trace" in page
    assert "<script>alert" not in page


def _biggest_trace() -> Path | None:
    cands = sorted(SAMPLES.glob("*.json.gz")) + sorted(EXTERNAL.glob("*.json*"))
    cands = [c for c in cands if c.is_file()]
    return max(cands, key=lambda c: c.stat().st_size) if cands else None


@pytest.fixture(scope="module")
def biggest():
    p = _biggest_trace()
    if p is None:
        pytest.skip("no traces available")
    return p, analyze_file(p)


def test_timeline_cap_merges_short_items(biggest):
    _, a = biggest
    full = timeline_data(a)
    capped = timeline_data(a, max_items=800)
    assert full["items_kept"] == full["items_total"] > 800 and full["merge_resolution_us"] == 0
    assert capped["items_total"] == full["items_total"]
    kept = sum(len(r["items"]) for r in capped["rows"])
    assert kept == capped["items_kept"] <= 800
    assert capped["merge_resolution_us"] > 0
    merged = [it for r in capped["rows"] for it in r["items"] if it[4] > 1]
    assert merged and all("events merged" in capped["names"][it[2]] for it in merged)
    # Every original event is still accounted for (merged ones count their members).
    assert sum(it[4] for r in capped["rows"] for it in r["items"]) + capped["dropped"] == full["items_total"]
    # Same rows either way.
    assert [r["id"] for r in capped["rows"]] == [r["id"] for r in full["rows"]]


def test_size_bound_on_biggest_trace(biggest, tmp_path):
    p, a = biggest
    out = tmp_path / "report.html"
    html_r.write([build_report(a)], out)
    size = out.stat().st_size
    assert size < 5 * 2**20, f"{p.name}: report is {size} bytes"
    page = out.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="tl-data-0">(.*?)</script>', page, flags=re.S)
    if m:
        assert json.loads(m.group(1))["items_kept"] <= MAX_ITEMS


def _fake_steps(n: int) -> list[dict]:
    causes = ["launch_overhead", "host_bound", "sync_stall", "pageable_memcpy", "collective_wait",
              "dependency_wait", "unattributed"]
    return [{"step": i, "start_ms": float(i), "duration_ms": 2.0 + (i % 3), "partial": i == n - 1,
             "gpu_busy_ms": 1.0, "gpu_idle_ms": 1.0 + (i % 3),
             "idle_by_cause_ms": {c: (1.0 + (i % 3) if c == "host_bound" else 0.0) for c in causes}}
            for i in range(n)]


def test_breakdown_chart_bars_add_up_and_bin_long_traces():
    short = html_r.breakdown_chart({"steps": _fake_steps(5)})
    assert len(short["bars"]) == 5 and short["per_bar"] == 1
    # Each bar's segments stack to the step's duration (busy + idle = step).
    b = short["bars"][1]   # step 1: 3 ms = 1 busy + 2 host_bound
    assert [s["color"] for s in b["segs"]] == [html_r.BUSY_COLOR, html_r.CAUSE_COLORS["host_bound"]]
    assert abs(sum(s["h"] for s in b["segs"]) - b["outline_h"]) < 0.05
    assert short["bars"][-1]["partial"] and not short["bars"][0]["partial"]
    long = html_r.breakdown_chart({"steps": _fake_steps(1000)})
    assert len(long["bars"]) <= html_r.MAX_BARS and long["per_bar"] == 5
    assert "mean of 5" in long["bars"][0]["title"]
    # The mean of steps 0..4 is (2+3+4+2+3)/5 = 2.8 ms.
    assert "2.8 ms" in long["bars"][0]["title"]


def test_evidence_blocks_render_tables_for_lists_of_dicts():
    ev = {"idle_ms_per_step": 1.23456, "sync_sites": [{"op": "aten::item", "ms": 0.5}, {"op": EVIL_SCRIPT, "calls": 3}],
          "top_kernels_by_count": {"k1": 10, "k2": 5}, "options": ["a", "b"], "nested": {"x": [1, {"y": 2}]}}
    blocks = html_r.evidence_blocks(ev)
    kinds = [b["type"] for b in blocks]
    assert kinds == ["facts", "table", "table", "list", "text"]
    assert blocks[0]["rows"] == [("idle ms per step", "1.235")]
    assert blocks[1]["columns"] == ["op", "ms", "calls"]
    assert blocks[1]["rows"][1][0] == EVIL_SCRIPT and blocks[1]["rows"][0][2] == "n/a"
    assert blocks[2]["columns"] == ["name", "count"]


def test_step_table_is_capped(evil, monkeypatch):
    a, _ = evil
    monkeypatch.setattr(html_r, "MAX_STEP_ROWS", 2)
    page = html_r.render([build_report(a)])
    n = len(to_dict(a)["steps"])
    assert n > 2
    assert f"The first 2 of {n} steps" in page


def test_static_js_cannot_close_its_script_element():
    js = static_asset("timeline.js")
    assert "</" not in js and "<!--" not in js
    css = static_asset("report.css")
    assert "</" not in css and "url(" not in css and "@import" not in css


SMALL_EXTERNAL = sorted(p.name for p in EXTERNAL.glob("*.json*") if p.is_file() and p.stat().st_size < 200_000) \
    if EXTERNAL.is_dir() else []


@pytest.mark.parametrize("name", SMALL_EXTERNAL)
def test_every_small_external_trace_renders(name):
    a = analyze_file(EXTERNAL / name)
    page = html_r.render([build_report(a)])
    d = to_dict(a)
    assert esc(d["verdict"]) in page
    assert page.count('<section class="trace"') == 1
    for f in d["findings"] + d["minor_findings"]:
        assert esc(f["title"]) in page
    blocks = script_blocks(page)
    if len(a.model.steps):
        data = json.loads(blocks[0][1])
        assert data["items_kept"] == sum(len(r["items"]) for r in data["rows"])
