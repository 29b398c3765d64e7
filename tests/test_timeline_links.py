"""The timeline data ties each launch call to the GPU work it launched (the sixth element of an item),
so the page can draw launch -> kernel on hover."""
from __future__ import annotations

from conftest import REPO_ROOT
from traceinsight.report.analyze import analyze_file
from traceinsight.report.timeline import timeline_data


def test_launch_calls_and_their_kernels_share_a_link():
    a = analyze_file(REPO_ROOT / "sample_traces" / "launch_tiny_conv__before.json.gz")
    tl = timeline_data(a)
    by_link: dict[int, set[str]] = {}
    for row in tl["rows"]:
        for it in row["items"]:
            assert len(it) in (5, 6)
            if len(it) == 6:
                assert it[4] == 1, "a merged item has no single partner"
                by_link.setdefault(it[5], set()).add(row["group"])
    pairs = [g for g in by_link.values() if g == {"cpu", "gpu"}]
    assert len(pairs) >= 10
    # A link names the launching call: the model's launcher of each kernel.
    kernels = a.model.gpu
    launched = set(kernels["launcher"][kernels["launcher"] >= 0].tolist())
    assert {k for k, g in by_link.items() if "gpu" in g} <= launched
