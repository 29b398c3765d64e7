"""The matrix's graph variants (sample_traces/matrix/workloads) share one replay step; CUDA graphs need a
GPU, so the step is checked here with a stand-in graph on CPU tensors."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_traces"))


def test_replay_step_feeds_the_next_batch_then_replays():
    from matrix.workloads._util import replay_step

    seen = []

    class Graph:
        def replay(self):
            seen.append((float(sx[0]), int(sy[0])))

    sx, sy = torch.zeros(1), torch.zeros(1, dtype=torch.long)
    xs = [torch.full((1,), float(k)) for k in range(3)]
    ys = [torch.full((1,), 10 + k, dtype=torch.long) for k in range(3)]
    after = []
    step = replay_step(Graph(), [(sx, xs), (sy, ys)], after=after.append)
    for _ in range(4):
        step()
    # Step i copies batch i % 3 into the static inputs before the replay, then calls after(i).
    assert seen == [(1.0, 11), (2.0, 12), (0.0, 10), (1.0, 11)]
    assert after == [1, 2, 3, 4]
