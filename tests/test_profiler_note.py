"""The profiler-cost note says what to turn off only where it was on, and counts what each step recorded.
(An expert review of the sixteenth held-out set's reports, 2026-11-27, found a default trace told to record
with with_stack=False, and the frames per step counted with those recorded outside every step.)"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from traceinsight.report.analyze import analyze_file
from traceinsight.report.facts import profiler_note
from traceinsight.report.document import document

RUN = Path(__file__).resolve().parents[1] / "sample_traces/matrix/h100_clean11A"
TRACE = "holdout16_pageable_feature_cache__before__{}.json.gz"


def _note(setting: str) -> dict:
    d = document(analyze_file(RUN / TRACE.format(setting)))
    return next(n for n in d["notes"] if n["kind"] == "profiler_overhead")


def test_a_default_trace_is_not_told_to_turn_off_what_was_off():
    fix = _note("default")["fix"]
    assert "=False" not in fix and "outside the profiler's window" in fix


def test_a_stack_trace_is_told_which_options_to_turn_off():
    fix = _note("stack")["fix"]
    assert "with_stack=False, record_shapes=False (traceinsight record's defaults)" in fix
    assert "profile_memory" not in fix


def test_python_frames_per_step_count_only_those_inside_the_steps():
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    path = RUN / TRACE.format("stack")
    raw = json.load(gzip.open(path))["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in raw
             if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    inside = sum(1 for e in raw if e.get("cat") == "python_function" and any(a <= e["ts"] < b for a, b in steps))
    builtin = sum(1 for e in raw if e.get("cat") == "python_function" and any(a <= e["ts"] < b for a, b in steps)
                  and str(e.get("name", "")).startswith("<built-in "))
    total = sum(1 for e in raw if e.get("cat") == "python_function")
    assert total > inside > builtin > 0
    note = profiler_note(build_model(load_trace(path)))
    assert (f"({inside / len(steps):.0f} Python calls recorded per step on average, {builtin / len(steps):.0f} of "
            "them calls of C built-ins)") in note, (note, inside, builtin, total)
