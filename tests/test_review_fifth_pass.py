"""What session 70 found left over from the reviews of 2026-12-02, each checked where it was seen."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "sample_traces" / "matrix" / "h200_clean2A"


@pytest.mark.parametrize("path, flagged", [
    # 9 activities from before the window ran before step 3 began (0.2 ms): the note had said they ran into step
    # 3 while the document flagged no step. Work that lengthens no step is not counted now.
    (MATRIX / "fusion_elementwise__before__default.json.gz", set()),
    (ROOT / "sample_traces" / "fp32_matmul__before.json.gz", {3}),
])
def test_the_prewindow_note_and_the_documents_flag_follow_one_rule(path, flagged):
    d = document(analyze_file(path))
    marked = {s["step"] for s in d["steps"] if s.get("holds_prewindow_work")}
    named = {int(x) for lim in d["trace"]["limits"] if "no launch call" in lim
             for x in re.findall(r"run into step (\d+)", lim)}
    assert marked == named == flagged, (marked, named)


def test_a_diff_of_analyze_json_outputs_counts_op_calls_as_a_diff_of_the_traces(tmp_path):
    """The op table's counts are calls per step in the analyze document itself (top_ops[].calls_per_step), so a
    diff of two analyze --json outputs shows them as a diff of the traces does (they had read null)."""
    import json

    from traceinsight.report.diff import compare
    from traceinsight.report.diff_inputs import load_side

    sides = []
    for v in ("before", "after"):
        path = ROOT / "sample_traces" / f"fp32_matmul__{v}.json.gz"
        out = tmp_path / f"{v}.json"
        out.write_text(json.dumps(document(analyze_file(path))))
        sides.append((load_side(path), load_side(out)))
    from_traces = compare(sides[0][0], sides[1][0])["ops"]["rows"]
    from_json = compare(sides[0][1], sides[1][1])["ops"]["rows"]
    counts = lambda rows: {(r["op"], r["input_dims"]): (r["before_count_per_step"], r["after_count_per_step"])  # noqa: E731
                           for r in rows}
    lin = [k for k in counts(from_traces) if k[0] == "aten::linear"]
    assert lin and all(None not in counts(from_traces)[k] for k in lin)
    # (the JSON sides hold the top 50 rows; every row they hold has the traces' counts)
    assert all(counts(from_traces)[k] == c for k, c in counts(from_json).items() if None not in c)
    assert all(counts(from_json)[k] == counts(from_traces)[k] for k in lin)
