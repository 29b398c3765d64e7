"""What session 74 found while reading its reports (2026-12-04), each checked where it was seen."""
from __future__ import annotations

from pathlib import Path

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces" / "matrix"


def test_host_bound_names_the_idle_of_the_complete_steps_the_median_reads():
    # BERT's with_stack trace on 44C: a 16.6 ms pause inside the model's forward in the first step, which is partial
    # (left out of the medians). It had been named as "most of" the host-bound idle of the four complete steps
    # after it, whose 1.4-2.0 ms each are mostly AdamW's step.
    d = document(analyze_file(MATRIX / "h200_clean44C" / "holdout40_hf_bert_token_mask_loss__before__stack.json.gz"))
    assert d["steps"][0]["partial"] and d["steps"][0]["idle_by_cause_ms"]["host_bound"] > 15
    f = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "host_bound")
    work = f["evidence"]["cpu_work_during_idle"]
    assert work[0]["name"].startswith("step(), def at torch/optim/adam.py") and "most of it inside step()" in f["title"]
    assert all(w["ms"] < 5 for w in work) and "the complete steps" in f["evidence"]["cpu_work_scope"]
