"""What a first-time user met running record, job and diff on a CPU machine (a review, 2026-11-28), each
reproduced on a trace built here."""
from __future__ import annotations

from pathlib import Path

from synth import Trace

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import build_report, document
from traceinsight.render import markdown


def _cpu_loop(tmp_path: Path, steps_ms: list[float], loader_ms: float, name: str = "cpu.json") -> Path:
    """A CPU-only training loop: per step a DataLoader fetch of `loader_ms`, then a few ops."""
    t = Trace()
    t.devices = []
    ts = 0.0
    for n, ms in enumerate(steps_ms):
        us = ms * 1000
        t.step(n, ts, us)
        t.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ts + 5, loader_ms * 1000,
             cat="user_annotation")
        t.op("aten::stack", ts + 10, 50)
        t.op("aten::addmm", ts + loader_ms * 1000 + 20, 60)
        t.op("aten::mse_loss", ts + loader_ms * 1000 + 100, 40)
        ts += us + 10
    return t.write(tmp_path / name)


def test_a_cpu_only_loop_that_waits_on_its_dataloader_is_told_so(tmp_path):
    # 6.5 of 6.9 ms per step in the DataLoader's __next__ had read only "98% outside ops".
    r = build_report(analyze_file(_cpu_loop(tmp_path, [6.9] * 5, 6.5)))
    d = r.doc
    c = d["cpu_time"]
    assert 90 < c["loading_pct"] < 96 and abs(c["loading_ms"] - 6.5) < 0.01
    assert d["verdict"].startswith("CPU-only trace")
    assert "fetching batches from its DataLoader (num_workers=0" in d["verdict"]
    md = markdown.render([r])
    assert "Fetching batches from the DataLoader" in md
    # A CPU-only run's ops hold no wait for a GPU.
    assert "wait for the GPU" not in md.split("CPU time by op")[1]


def test_a_cpu_only_loop_with_little_loading_is_not_called_loader_bound(tmp_path):
    d = document(analyze_file(_cpu_loop(tmp_path, [6.9] * 5, 0.5)))
    assert "DataLoader" not in d["verdict"]
    assert d["cpu_time"]["loading_pct"] < 10


def test_uneven_cpu_only_steps_are_not_a_disturbed_gpu_host(tmp_path):
    # A 3-rank gloo job's steps of 5.5, 5.2, 10.3, 3.2 and 8.5 ms were said to "vary widely while the GPU's
    # work per step stays the same ... the estimates use the quiet steps (within 25% of the fastest: 5)":
    # no GPU, no estimates, and "5" was a step's number that read as a count.
    d = document(analyze_file(_cpu_loop(tmp_path, [5.46, 5.18, 10.33, 3.19, 8.45], 1.0)))
    assert not any("vary widely" in x for x in d["trace"]["limits"])


def test_a_cpu_only_diff_speaks_of_no_gpu(tmp_path):
    # A CPU-only before/after had read "GPU busy per step 0.000 -> 0.000 ms, idle 5.327 -> 0.225 ms", and its
    # JSON's GPU idle was the CPU step.
    import json

    from typer.testing import CliRunner

    from traceinsight.cli import app
    before = _cpu_loop(tmp_path, [6.9] * 5, 6.5, "before.json")
    after = _cpu_loop(tmp_path, [1.0] * 5, 0.5, "after.json")
    assert document(analyze_file(before))["summary"]["median_gpu_idle_ms"] is None
    r = CliRunner().invoke(app, ["diff", str(before), str(after), "--json", str(tmp_path / "d.json"),
                                 "-o", str(tmp_path / "d.html")])
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["cpu_only"] is True and d["step_time"]["direction"] == "faster"
    assert "GPU busy per step" not in r.output
    page = (tmp_path / "d.html").read_text()
    assert "GPU busy per step" not in page and "GPU time by kernel" not in page
    # Where its time went instead: the ops by self CPU time, side by side.
    rows = {row["key"]: row for row in d["cpu_ops"]["rows"]}
    assert rows["aten::addmm"]["before_ms_per_step"] is not None
    assert "CPU time by op" in r.output and "CPU time by op" in page
