"""Typed fixes: bad ones fail when made, unknown ones fail in the replay, and fixes compose in order."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from traceinsight.analyses import KINDS, fixes
from traceinsight.estimate import replay
from traceinsight.estimate.graph import build_graph, step_window
from traceinsight.trace.host import HostActivity
from traceinsight.trace.load import load_trace
from traceinsight.trace.model import build_model

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


@pytest.mark.parametrize("make", [
    lambda: fixes.ScaleKernels("gemm", 0.0),
    lambda: fixes.ScaleKernels("gemm", 0.5, bounds=(0.2, -1.0)),
    lambda: fixes.ScaleKernels("", 0.5),
    lambda: fixes.DropKernels("(unclosed"),
    lambda: fixes.Unblock(()),
    lambda: fixes.DropCalls(()),
    lambda: fixes.FusedOptimizer(((0.0, 1.0, "t"),), 1.5),
    lambda: fixes.FuseChains(((1,),)),
    lambda: fixes.FuseChains(((1, 2),), cost=0.0),
    lambda: fixes.RemoveHostWork(loading_us=-1.0),
    lambda: fixes.RemoveHostWork(loading_us=1000.0, batch_mb=1.0, bounds=(1.1, -0.2)),
])
def test_nonsense_fixes_fail_when_made(make):
    with pytest.raises((ValueError, Exception)):
        make()


@pytest.fixture(scope="module")
def compiled():
    m = build_model(load_trace(SAMPLES / "host_preprocess__before.json.gz"))
    return replay.Compiled(build_graph(m, HostActivity(m), step_window(m)))


def test_unknown_fix_is_refused_by_the_replay(compiled):
    @dataclass(frozen=True)
    class Teleport:
        pass
    with pytest.raises(TypeError, match="Teleport"):
        replay.apply(compiled, (Teleport(),))


def test_fixes_compose_in_either_order(compiled):
    base = replay.simulate(replay.apply(compiled)).median_us
    a = replay.simulate(replay.apply(compiled, (fixes.RemoveHostWork(), fixes.CudaGraph()))).median_us
    b = replay.simulate(replay.apply(compiled, (fixes.CudaGraph(), fixes.RemoveHostWork()))).median_us
    host_only = replay.simulate(replay.apply(compiled, (fixes.RemoveHostWork(),))).median_us
    assert a == pytest.approx(b)
    # Both together save at least what either saves alone, and leave a step above zero.
    assert 0 < a <= host_only < base


def test_dropped_calls_take_their_own_time_and_no_more(compiled):
    # The calls go; the CPU work between them stays: the step gets shorter by at most what the calls took.
    import numpy as np
    cpu = compiled.nodes
    calls = [int(r) for kind, r in cpu if kind == "cpu"][:50]
    state = replay.apply(compiled, (fixes.DropCalls(tuple(calls)),))
    idx = np.array([compiled.cpu_pos[r] for r in calls])
    assert (state.dur[idx] == 0).all()
    base = replay.simulate(replay.apply(compiled)).median_us
    after = replay.simulate(state).median_us
    assert after <= base


def test_combine_keeps_order_and_drops_repeats():
    g, h = fixes.CudaGraph(), fixes.RemoveHostWork()
    assert fixes.combine([(g,), (h, g)]) == (g, h)


def test_every_idle_cause_has_a_colour_and_every_kind_a_label():
    for k, s in KINDS.items():
        assert s.kind == k and s.label
        if s.idle_cause:
            assert s.color and s.color.startswith("#")


def test_a_ranged_fix_keeps_what_it_acts_on_at_either_end():
    u = fixes.Unblock((3,), (7, 8), share=0.5, bounds=(0.0, 1.0), calls=(4, 5))
    for end in (0.0, 1.0):
        v = u.at(end)
        assert (v.rows, v.kernels, v.calls, v.share, v.bounds) == ((3,), (7, 8), (4, 5), end, None)
    g = fixes.CudaGraph(wrapper_us=50.0, compiled_only=True, python_share=0.6, bounds=(0.45, 0.75))
    assert (g.at(0.45).wrapper_us, g.at(0.45).compiled_only, g.at(0.45).python_share) == (50.0, True, 0.45)
    p = fixes.PinCopies(1.0, ((1.0, 0.0), (1.5, 0.9)))
    top = p.at(p.bounds[1])
    assert (top.dispatch_speedup, top.kept, top.bounds) == (1.5, 0.9, None) and p.kept == 0.0
    assert "read within the step" in p.RANGE_NOTE and "dispatch" in p.RANGE_NOTE
    with pytest.raises(ValueError):
        fixes.PinCopies(0.5)
    with pytest.raises(ValueError):
        fixes.PinCopies(1.0, ((1.0, 0.0), (1.5, 1.2)))
    with pytest.raises(ValueError):
        fixes.CudaGraph(python_share=0.0)


def test_workers_pace_a_loop_by_their_share_of_the_loading_and_each_batch_hand_off():
    # 8 ms of loading per batch, 5 MB batches: N workers give 8/N ms, plus 2 ms of hand-off at 0.4 ms per MB.
    assert fixes.loader_pace(8000.0, 5.0, 4) == pytest.approx(2000.0 + 2000.0)
    assert fixes.loader_pace(8000.0, 5.0) == pytest.approx(2000.0)       # as many as it takes: the hand-off
    paces = [fixes.loader_pace(8000.0, 5.0, n) for n in (1, 2, 4, 8, 16)]
    assert paces == sorted(paces, reverse=True)
    # The fewest that keep up with a 3 ms step: 8/N + 2 <= 3 -> 8; none keep up with a 2 ms step.
    assert fixes.workers_to_keep_up(8000.0, 5.0, 3000.0) == 8
    assert fixes.workers_to_keep_up(8000.0, 5.0, 2000.0) is None
    assert fixes.workers_to_keep_up(1000.0, 0.0, 3000.0) == 1
    # A fix's pace, at either end of its range, and none for host work that is not loading.
    fx = fixes.RemoveHostWork(loading_us=8000.0, batch_mb=5.0, workers=4, bounds=fixes.LOADER_MS_PER_MB_RANGE)
    assert fx.at(fx.bounds[0]).pace_us() > fx.pace_us() > fx.at(fx.bounds[1]).pace_us()
    assert fixes.RemoveHostWork().pace_us() == 0.0


def test_a_helper_thread_is_woken_only_by_a_loop_call_after_its_own_last_one():
    # A compiled training step (the thirty-second held-out set's padding-mask branch, h200_clean36A): the loop thread
    # sits in loss.backward() while autograd's thread runs its nodes, with over 100 us between two of its calls spent
    # in the engine outside any op. Hung off the loop's last call (before backward began), the stretch had carried
    # the helper's whole backward (5.9 ms) as a fixed feed no fix could shorten: the graph-broken step's merge and
    # CUDA graph read 2.06x where 2.91x was measured; hung off the helper's own last call, 3.0x.
    path = SAMPLES / "matrix" / "h200_clean36A" / "holdout32_compiled_mask_any__before__default.json.gz"
    m = build_model(load_trace(path))
    G = build_graph(m, HostActivity(m), step_window(m))
    wakes = [(a, b) for a, b, d in G.edges(data=True) if d.get("wake") and not d.get("join")]
    assert wakes
    by_thread: dict = {}
    for n, d in G.nodes(data=True):
        if n[0] == "cpu":
            by_thread.setdefault(d["thread"], []).append((d["ts"], d["end"]))
    for a, b in wakes:
        woken = G.nodes[b]
        before = [end for ts, end in by_thread[woken["thread"]] if ts < woken["ts"]]
        # The waking call ended after the helper's previous call (or the helper had none in the window).
        assert not before or G.nodes[a]["end"] > max(before)
        assert G.edges[a, b]["feed_us"] < 2000.0
