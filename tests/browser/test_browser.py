"""The HTML report in a real headless Chromium: it loads offline, draws the timeline, shows tooltips.

Needs Debian's chromium (`apt-get install -y chromium`, at /usr/bin/chromium) and Playwright from
PyPI (`pip install playwright`; no `playwright install`: we drive the system browser). Skips
cleanly when either is missing. Saves a screenshot to tests/artifacts/report.png.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TRACEINSIGHT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
SAMPLE = ROOT / "sample_traces" / "launch_tiny_conv__before.json.gz"
EXTERNAL = ROOT / "tests" / "data" / "external" / "hta" / "a100_rank0_of2_nccl.json.gz"

if importlib.util.find_spec("playwright") is None:
    pytest.skip("playwright is not installed (pip install playwright)", allow_module_level=True)
if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
    pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402

from traceinsight.report.analyze import analyze_file  # noqa
from traceinsight.report.document import build_report  # noqa: E402
from traceinsight.render import html as html_r  # noqa: E402


def _load_adversarial_writer():
    spec = importlib.util.spec_from_file_location("_ti_test_html_report", ROOT / "tests" / "test_html_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


class Watched:
    """A page that records console errors, page errors, dialogs and every non-file request."""

    def __init__(self, browser):
        self.ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
        self.page = self.ctx.new_page()
        self.console_errors, self.page_errors, self.dialogs, self.requests = [], [], [], []
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: not r.url.startswith("file://") and self.requests.append(r.url))

    def open(self, path: Path):
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector('.ti-timeline[data-ready="1"]', timeout=15000)
        return self.page

    def assert_clean(self):
        assert self.console_errors == []
        assert self.page_errors == []
        assert self.dialogs == []
        assert self.requests == [], "the report must load nothing from the network"

    def close(self):
        self.ctx.close()


def _hover_first_item(page, group: str):
    """Move the mouse over the longest item of the first row of `group`; returns (name, tooltip)."""
    page.locator(".ti-tl-canvas").first.scroll_into_view_if_needed()
    pt = page.evaluate("""(group) => {
        const tl = window.TraceInsightTimeline.instances[0];
        const ri = tl.data.rows.findIndex(r => r.group === group && r.items.length > 0);
        if (ri < 0) return null;
        // The longest item of the row, so the pointer lands on it and not on a neighbour.
        const items = tl.data.rows[ri].items;
        let best = 0;
        for (let i = 1; i < items.length; i++) if (items[i][1] > items[best][1]) best = i;
        return tl.pointFor(ri, best);
    }""", group)
    assert pt is not None, f"no {group} item to hover"
    page.mouse.move(pt["x"], pt["y"])
    tip = page.locator(".ti-tl-tip")
    tip.wait_for(state="visible", timeout=5000)
    return pt["name"], tip.inner_text()


def test_report_renders_in_chromium(browser, tmp_path):
    trace = SAMPLE if SAMPLE.exists() else EXTERNAL
    if not trace.exists():
        pytest.skip("no trace to render")
    out = tmp_path / "report.html"
    html_r.write([build_report(analyze_file(trace))], out)
    w = Watched(browser)
    try:
        page = w.open(out)
        tl = page.locator(".ti-timeline").first
        drawn = int(tl.get_attribute("data-items-drawn"))
        assert drawn > 0
        assert page.locator("[data-testid=verdict]").first.inner_text().strip()

        # Hover: the tooltip names the item under the pointer, with its start and duration.
        name, text = _hover_first_item(page, "gpu")
        assert name and name[:40] in text
        assert "start:" in text and "duration:" in text
        _hover_first_item(page, "idle")
        assert "GPU idle" in page.locator(".ti-tl-tip").inner_text()

        # Wheel zooms in around the pointer; the view narrows and fewer items fit.
        view0 = page.evaluate("window.TraceInsightTimeline.instances[0].getView()")
        page.locator(".ti-tl-canvas").first.scroll_into_view_if_needed()
        box = page.locator(".ti-tl-canvas").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
        for _ in range(5):
            page.mouse.wheel(0, -400)
        page.wait_for_timeout(200)
        view1 = page.evaluate("window.TraceInsightTimeline.instances[0].getView()")
        assert view1[1] - view1[0] < 0.5 * (view0[1] - view0[0])
        # Drag pans: same span, shifted.
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + 40, steps=5)
        page.mouse.up()
        page.wait_for_timeout(100)
        view2 = page.evaluate("window.TraceInsightTimeline.instances[0].getView()")
        assert view2[0] > view1[0] and abs((view2[1] - view2[0]) - (view1[1] - view1[0])) < 1e-6 * view1[1] + 1e-6
        # Double-click resets.
        page.mouse.dblclick(box["x"] + box["width"] * 0.5, box["y"] + 40)
        page.wait_for_timeout(100)
        assert page.evaluate("window.TraceInsightTimeline.instances[0].getView()") == view0

        # Screenshots to look at: the whole page, and the timeline in view with a tooltip showing.
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        _hover_first_item(page, "gpu")
        page.screenshot(path=str(ARTIFACTS / "timeline_hover.png"))
        assert page.locator(".ti-tl-tip").is_visible()
        w.assert_clean()
    finally:
        w.close()


def test_hostile_trace_runs_no_script(browser, tmp_path):
    mod = _load_adversarial_writer()
    trace = mod.write_adversarial_trace(tmp_path / "hostile.json.gz")
    out = tmp_path / "hostile.html"
    html_r.write([build_report(analyze_file(trace))], out)
    w = Watched(browser)
    try:
        page = w.open(out)
        assert int(page.locator(".ti-timeline").first.get_attribute("data-items-drawn")) > 0
        # The injected names are shown as text: in the page, in row labels and in the tooltip.
        assert mod.EVIL_SCRIPT in page.locator("body").inner_text()
        labels = page.evaluate("window.TraceInsightTimeline.instances[0].data.rows.map(r => r.label)")
        assert any(lab.startswith(mod.EVIL_SCRIPT) for lab in labels)
        name, text = _hover_first_item(page, "gpu")
        assert "<" in name and name[:20] in text
        assert page.evaluate("document.querySelectorAll('script').length") == 2
        assert page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
        w.assert_clean()
    finally:
        w.close()


def test_several_traces_and_linked_timelines(browser, tmp_path):
    """Two traces in one report draw two timelines; a shared group keeps their views in sync."""
    mod = _load_adversarial_writer()
    a = analyze_file(mod.write_adversarial_trace(tmp_path / "one.json.gz"))
    b = analyze_file(mod.write_adversarial_trace(tmp_path / "two.json.gz", kernels_per_step=6))
    out = tmp_path / "two.html"
    html_r.write([build_report(a), build_report(b)], out)
    w = Watched(browser)
    try:
        page = w.open(out)
        page.wait_for_function("document.querySelectorAll('.ti-timeline[data-ready=\"1\"]').length === 2")
        synced = page.evaluate("""() => {
            const T = window.TraceInsightTimeline, [x, y] = T.instances;
            const g = T.group(); g.add(x); g.add(y);
            x.setView(10, 90);
            return [x.getView(), y.getView()];
        }""")
        assert synced[0] == synced[1] == [10, 90]
        w.assert_clean()
    finally:
        w.close()
