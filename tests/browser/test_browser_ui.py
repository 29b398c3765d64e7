"""What a person sees in the report, in a real headless Chromium: a healthy trace shows no fix card; a
CPU-only record shows no alarm; the timeline has rows a person can read, short axis labels, full names
on hover, and the launch -> kernel link. Skips without chromium (see test_browser.py)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_browser import ARGS, CHROMIUM, ROOT, Watched  # noqa: F401  (skips the module without chromium)

from conftest import TRACELENS_DIR, cli_env
from traceinsight.cli.common import analyze_and_write

SAMPLE = ROOT / "sample_traces" / "sync_mask_loss__before.json.gz"
ALARM_RED = "rgb(201, 68, 60)"   # the left border of an alarm verdict (#c9443c)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def _page(browser, path: Path, wait_timeline: bool = True):
    w = Watched(browser)
    if wait_timeline:
        return w, w.open(path)
    w.page.goto(path.resolve().as_uri())
    return w, w.page


def _verdict_border(page) -> str:
    return page.evaluate("getComputedStyle(document.querySelector('[data-testid=verdict]')).borderLeftColor")


def test_a_healthy_trace_shows_no_fix_card(browser, tmp_path):
    out = tmp_path / "healthy.html"
    analyze_and_write([TRACELENS_DIR / "mi210_gpu_only_trace_gpu_only_trace.json.gz"], html=out)
    w, page = _page(browser, out)
    try:
        assert page.locator("[data-testid=verdict]").inner_text().startswith("Healthy")
        assert page.locator("article.finding .rank").count() == 0          # no "#1 fix" card
        assert page.locator("[data-testid=notes]").is_visible()            # the profiler note, neutral
        assert _verdict_border(page) != ALARM_RED
        w.assert_clean()
    finally:
        w.close()


def test_a_cpu_only_record_shows_no_alarm(browser, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "rec"
    p = subprocess.run([sys.executable, "-m", "traceinsight", "record", "-o", str(out),
                        str(ROOT / "tests" / "record_scripts" / "train.py"), "--iters", "6"],
                       capture_output=True, text=True, env=cli_env(), timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    w, page = _page(browser, out / "report.html")
    try:
        text = page.locator("body").inner_text()
        if "CPU-only" not in page.locator("[data-testid=verdict]").inner_text():
            pytest.skip("a GPU was recorded")
        assert _verdict_border(page) != ALARM_RED
        assert page.locator("[data-testid=cpu-only]").is_visible()
        assert page.locator("[data-testid=cpu-time] table tbody tr").count() > 0
        assert "GPU idle 100" not in text and "None%" not in text
        assert page.locator("svg.chart").count() == 0 and page.locator("svg.bar100").count() == 0
        w.assert_clean()
    finally:
        w.close()


def test_the_timeline_is_readable(browser, tmp_path):
    out = tmp_path / "report.html"
    analyze_and_write([SAMPLE], html=out)
    w, page = _page(browser, out)
    try:
        tl = page.locator(".ti-timeline").first
        tl.scroll_into_view_if_needed()
        assert page.evaluate("window.TraceInsightTimeline.instances[0].rowHeight") >= 20
        ticks = tl.get_attribute("data-ticks").split("|")
        assert len(ticks) >= 3
        for t in ticks:   # "5 ms", "2.5 ms", "500 us": never "5.000 ms"
            assert re.fullmatch(r"0|-?\d+(\.\d{1,3})? (s|ms|us)", t) and not re.search(r"\.\d*0 ", t), t

        # Hover a launch call: its kernel is outlined and linked, the tooltip names it.
        pt = page.evaluate("""() => {
            const T = window.TraceInsightTimeline.instances[0];
            for (let r = 0; r < T.rows.length; r++) {
              if (!T.rows[r].row.id.endsWith(':runtime')) continue;
              const items = T.rows[r].items;
              for (let i = 0; i < items.length; i++)
                if (T.linked(r, i).length) { T.setView(items[i][0] - 50, items[i][0] + 150); return [r, i]; }
            }
            return null; }""")
        assert pt is not None, "no launch call linked to GPU work"
        page.wait_for_timeout(150)
        xy = page.evaluate("([r, i]) => window.TraceInsightTimeline.instances[0].pointFor(r, i)", pt)
        page.mouse.move(xy["x"], xy["y"])
        page.wait_for_timeout(150)
        assert int(tl.get_attribute("data-linked")) >= 1
        assert "launches " in page.locator(".ti-tl-tip").inner_text()

        # A kernel's whole name is readable: in the tooltip, and as the title of its table cell.
        longest = page.evaluate("""() => {
            const T = window.TraceInsightTimeline.instances[0];
            let best = null;
            T.rows.forEach((R, r) => { if (R.row.group !== 'gpu') return;
              R.items.forEach((it, i) => { const n = T.data.names[it[2]];
                if (!best || n.length > best.n.length) best = {r, i, n}; }); });
            T.setView(T.rows[best.r].items[best.i][0] - 20, T.rows[best.r].items[best.i][0] + T.rows[best.r].items[best.i][1] + 20);
            return best; }""")
        page.wait_for_timeout(150)
        xy = page.evaluate("([r, i]) => window.TraceInsightTimeline.instances[0].pointFor(r, i)",
                           [longest["r"], longest["i"]])
        page.mouse.move(xy["x"], xy["y"])
        page.wait_for_timeout(150)
        assert longest["n"] in page.locator(".ti-tl-tip").inner_text()
        titles = page.evaluate("[...document.querySelectorAll('td.name[title]')].map(e => e.title)")
        assert any(len(t) > 80 for t in titles)
        w.assert_clean()
    finally:
        w.close()
