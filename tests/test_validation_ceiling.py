"""Issue 12: how far host-to-host noise alone keeps the matrix from its acceptance (validate_matrix.ceiling).

The same fix, on the same GPU model, measures different speed-ups on different hosts. The median of the
other hosts' measurements is the best a predictor that does not read this host's trace can say; how often
it lands within 25% of this host's measurement bounds what the matrix can show of any estimate.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sample_traces"))

from validate_matrix import ceiling  # noqa: E402


def _row(run, wl, meas, err, gpu="h100", variant="after", kind="sync_stall"):
    return {"run": run, "gpu": gpu, "workload": wl, "variant": variant, "kind": kind,
            "meas_speedup": meas, "err_pct": err}


def _counts(text: str) -> tuple[int, int, int, int]:
    w25, n = map(int, re.search(r"within 25% of this host's in (\d+)/(\d+)", text).groups())
    w50 = int(re.search(r"within 50% in (\d+)/", text).group(1))
    tool = int(re.search(r"within 25% in (\d+)/\d+ \(\d+%\)\.$", text).group(1))
    return n, w25, w50, tool


def test_each_host_is_scored_against_the_other_hosts_of_its_gpu():
    rows = [_row("h100_cleanA", "w", 2.0, 0.0), _row("h100_clean2A", "w", 2.2, 30.0),
            _row("h100_clean3A", "w", 4.0, -10.0),
            # Another GPU's host of the same fix is not one of the others; alone on its GPU, it is not scored.
            _row("h200_cleanA", "w", 9.0, 0.0, gpu="h200"),
            # Runs before the clean ones, and healthy rows, are left out.
            _row("h100", "w", 1.0, 0.0), dict(_row("h100_cleanB", "w", 1.0, None), kind="healthy")]
    n, w25, w50, tool = _counts(ceiling(rows))
    # 2.0 against median(2.2, 4.0) = 3.1: 55% off; 2.2 against 3.0: 36%; 4.0 against 2.1: 48%.
    assert (n, w25, w50, tool) == (3, 0, 2, 2)


def test_the_matrix_measures_the_same_fix_within_25_percent_host_to_host_on_fewer_than_90_percent_of_rows():
    rows = json.loads((ROOT / "sample_traces" / "matrix" / "validation.json").read_text())
    n, w25, w50, tool = _counts(ceiling(rows))
    assert n >= 1300
    # 1140 of 1326 (86%) on the committed runs: the acceptance's 90% within 25% is above what the hosts
    # reproduce of each other; the tool, reading each host's own trace, 1,004 (76%).
    assert 0.8 <= w25 / n < 0.9, (w25, n)
    assert tool < w25
