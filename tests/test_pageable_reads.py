"""pageable_memcpy's read share: how much of a copy to the host the host can have read (at 20 GB/s) between
the op that copied and its thread's next runtime call. Two cases a reviewer built from a real eval loop
(numpy argmax over 3.3 MB of probabilities, which reads all of it) that must not read as "little read"."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

from traceinsight.report.analyze import analyze_file

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "sample_traces/matrix/h100_clean3A/eval_to_numpy_large__before__default.json.gz"


def _pageable(path: Path):
    return next(f for f in analyze_file(path).findings if f.kind == "pageable_memcpy")


def _events(d: dict) -> list[dict]:
    return [e for e in d["traceEvents"] if e.get("ph") == "X"]


def test_a_copy_read_whole_is_not_called_read_little():
    f = _pageable(EVAL)
    assert "host_reads_at_most_pct_of_the_copy" not in f.evidence and f.fix.startswith("Copy into a pinned")


def test_a_read_after_the_step_marker_still_counts(tmp_path):
    # prof.step() right after the copy: each ProfilerStep ends 5 us after its copy op, the argmax runs at
    # the top of the next iteration, before its first launch.
    d = json.load(gzip.open(EVAL))
    x = _events(d)
    steps = [e for e in x if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep")]
    ops = [e for e in x if e.get("cat") == "cpu_op" and e["name"] == "aten::to" and e["dur"] > 100]
    for s in steps:
        o = [op for op in ops if s["ts"] <= op["ts"] < s["ts"] + s["dur"]]
        if o:
            s["dur"] = o[0]["ts"] + o[0]["dur"] + 5 - s["ts"]
    p = tmp_path / "clipped.json.gz"
    json.dump(d, gzip.open(p, "wt"))
    assert "host_reads_at_most_pct_of_the_copy" not in _pageable(p).evidence


def test_copies_read_together_carry_their_bytes_over(tmp_path):
    # a.cpu(); b.cpu(); use(a, b): each 3.3 MB copy split into two back-to-back halves, the host's reading
    # after the second unchanged; the first window is empty, and the second must cover both halves.
    d = json.load(gzip.open(EVAL))
    x = _events(d)
    new, corr = [], 10 ** 7
    for m in [e for e in x if e.get("cat") == "gpu_memcpy"]:
        r = next(e for e in x if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == m["args"]["correlation"])
        tree = [e for e in x if e.get("cat") == "cpu_op" and e["tid"] == r["tid"] and e["ts"] <= r["ts"]
                and e["ts"] + e["dur"] >= r["ts"] + r["dur"]]
        t1, mid, r1 = max(e["ts"] + e["dur"] for e in tree), r["ts"] + r["dur"] / 2, r["ts"] + r["dur"]
        for e in tree:
            e["dur"] = mid + 2 - e["ts"]
        r["dur"] = mid - r["ts"]
        for i, e in enumerate(sorted(tree, key=lambda e: e["ts"])):
            e2 = copy.deepcopy(e)
            e2["ts"], e2["dur"] = mid + 3 + i * 0.2, t1 - (mid + 3 + i * 0.2) - i * 0.2
            if "External id" in e2.get("args", {}):
                e2["args"]["External id"] += 10 ** 6
            new.append(e2)
        corr += 1
        r2 = copy.deepcopy(r)
        r2["ts"], r2["dur"] = mid + 4, r1 - (mid + 4)
        r2["args"]["correlation"] = corr
        m2 = copy.deepcopy(m)
        half = m["dur"] / 2
        m["dur"] = m2["dur"] = half
        m2["ts"] = m["ts"] + half
        m["args"]["bytes"] = m2["args"]["bytes"] = m["args"]["bytes"] // 2
        m2["args"]["correlation"] = corr
        new += [r2, m2,
                {"ph": "s", "id": corr, "pid": r["pid"], "tid": r["tid"], "ts": r2["ts"], "cat": "ac2g", "name": "ac2g"},
                {"ph": "f", "id": corr, "pid": m["pid"], "tid": m["tid"], "ts": m2["ts"], "cat": "ac2g",
                 "name": "ac2g", "bp": "e"}]
    d["traceEvents"].extend(new)
    p = tmp_path / "split.json.gz"
    json.dump(d, gzip.open(p, "wt"))
    f = _pageable(p)
    assert f.evidence["copies_per_step"] == 2.0
    assert "host_reads_at_most_pct_of_the_copy" not in f.evidence
