"""A fresh clone runs every test with nothing beside it: no test, and no script that makes the committed
reports, reads a file outside the repository; the real traces they use are in tests/data/external with
their licences."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = ROOT / "tests" / "data" / "external"
# What reaches outside the checkout: the shared folder next to it, or the parent of the repository root.
OUTSIDE = re.compile(r"""["']shared["']|\.\./shared|parents\[\d\]\.parent|ROOT\.parent|REPO_ROOT\.parent""")


def _sources() -> list[Path]:
    return sorted(ROOT.glob("tests/**/*.py")) + [ROOT / "reports" / "make_reports.py"]


def test_no_test_reads_outside_the_repository():
    bad = []
    for p in _sources():
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line) and p.name != Path(__file__).name:
                bad.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "tests must use tests/data/external, not ../shared:\n" + "\n".join(bad)


def test_external_traces_are_in_the_repository_with_their_licences():
    for sub, holder in (("hta", "Meta Platforms, Inc. and affiliates"),
                        ("tracelens", "2024-2025 Advanced Micro Devices, Inc.")):
        lic = (EXTERNAL / sub / "LICENSE").read_text(encoding="utf-8")
        assert lic.startswith("MIT License") and f"Copyright (c) {holder}" in lic
        assert "Permission is hereby granted, free of charge" in lic
        traces = [p for p in (EXTERNAL / sub).iterdir() if p.name.endswith((".json", ".json.gz"))]
        assert traces, sub
    readme = (EXTERNAL / "README.md").read_text(encoding="utf-8")
    for p in EXTERNAL.glob("*/*.json*"):
        assert p.name in readme, f"{p.name} is not described in tests/data/external/README.md"


def test_reports_index_names_no_path_outside_the_repository():
    index = (ROOT / "reports" / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in index and "external_traces" not in index
