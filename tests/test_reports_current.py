"""The committed example reports (reports/) match what the current code generates, byte for byte."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"


def _load():
    # A plain import (not from a file spec): make_reports runs a process pool, whose workers must
    # be able to import the module by name; multiprocessing hands them our sys.path.
    if str(REPORTS) not in sys.path:
        sys.path.insert(0, str(REPORTS))
    return importlib.import_module("make_reports")


def test_reports_are_current(tmp_path):
    committed = sorted(REPORTS.glob("*.html"))
    if not committed:
        pytest.skip("reports/ has no html yet (run python reports/make_reports.py)")
    mk = _load()
    srcs = mk.sources()
    # Every source is in the repository (sample traces, job folders, tests/data/external): each has its report.
    assert all((s.is_file() or s.is_dir()) and ROOT in s.resolve().parents for s in srcs), srcs
    missing = [s.name for s in srcs if not (REPORTS / f"{mk.stem(s)}.html").exists()]
    assert not missing, f"no committed report for {missing}: run python reports/make_reports.py"
    have = srcs
    mk.make(tmp_path, traces=have)
    stale = []
    for src in have:
        for ext in ("html", "md", "png"):
            name = f"{mk.stem(src)}.{ext}"
            if ext == "png" and not (tmp_path / name).exists() and not (REPORTS / name).exists():
                continue   # no timeline, no picture
            new = (tmp_path / name).read_bytes() if (tmp_path / name).exists() else b""
            old = (REPORTS / name).read_bytes() if (REPORTS / name).exists() else b""
            if new != old:
                stale.append(name)
    assert not stale, f"out of date (run python reports/make_reports.py): {stale}"
    for src in have:
        page = (tmp_path / f"{mk.stem(src)}.html").read_text(encoding="utf-8")
        assert str(ROOT) not in page and str(ROOT.resolve().parent) not in page, "no absolute paths in reports"
    assert (tmp_path / "README.md").read_bytes() == (REPORTS / "README.md").read_bytes()
