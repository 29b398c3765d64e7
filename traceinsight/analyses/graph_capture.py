"""graph_capture: the trace records a CUDA/HIP graph being captured (a one-time warm-up), not a
steady-state step. Launches made during a capture run no kernels, so the GPU looks idle and the step
looks launch-bound; the right advice is to record again after the capture, not to "use CUDA graphs".
"""
from __future__ import annotations

from ..trace.facts import graph_launched, program_facts, program_kind
from ..trace.steps import merged_intervals
from .base import Context, Finding, KindSpec

# Also an idle cause: GPU idle while the graph is recorded is the capture's (attribution), not the launches'
# (they run nothing then), and no steady-state fix recovers it (estimate/rank.py caps the fixes without it).
SPEC = KindSpec("graph_capture", "a CUDA-graph capture, not a steady-state step", estimate="measured",
                note=True, note_share=0.0, headline=True, idle_cause=True, color="#8a5a9e")


def analyze(ctx: Context) -> list[Finding]:
    p = program_facts(ctx.model)
    if program_kind(p) != "capture":
        return []
    ev = {"capture_calls": p["capture_calls"], "capture_ranges": p["capture_ranges"],
          "launch_calls": p["launch_calls"], "launches_that_ran_nothing": p["launches_that_ran_nothing"],
          "kernels_that_ran": p["kernels"], "graph_launches": p["graph_launches"],
          "kernels_from_graph_replays": p["graph_kernels"],
          # (the window's GPU idle while the graph was recorded: attribution's graph_capture cause)
          "idle_ms_per_step_while_capturing": round(ctx.per_step_median(ctx.per_step[SPEC.kind]) / 1000, 3)}
    # (The counts say what ran: launches captured into the graph run nothing; its replays run kernels
    # that no launch call of their own made.)
    replay = ""
    if p["graph_launches"]:
        # What the replays ran is the steady state's one measurement here (xDiT's: 993 kernels, ~100% busy).
        busy, span = _replayed(ctx)
        ev["replay_gpu_busy_ms"], ev["replay_span_ms"] = round(busy / 1000, 3), round(span / 1000, 3)
        ran = (f", {busy / 1000:.2f} ms of GPU work over the {span / 1000:.2f} ms from the first to the last "
               f"({busy / span:.0%} busy): the window's one look at the steady state" if span > 0 else "")
        times = "once" if p["graph_launches"] == 1 else f"{p['graph_launches']} times"
        replay = (f" It also replays a graph {times}: {p['graph_kernels']} kernels{ran}; the window is dominated by "
                  "the capture.")
    silent = (f": {p['launches_that_ran_nothing']} of its {p['launch_calls']} launch calls ran nothing (captured)"
              if p["launches_that_ran_nothing"] else f": {p['launch_calls']} launch calls, {p['kernels']} kernels ran")
    return [Finding(
        kind=SPEC.kind,
        title=f"This trace records a graph capture (one-time warm-up){silent}.{replay}",
        lost_per_step_us=0.0, lost_total_us=0.0,
        fix=("Record again after the graphs are captured: start the profiler after the warm-up iterations "
             "(torch.profiler.schedule(wait=..., warmup=...) past the capture, or `traceinsight record "
             "--skip N`), so the trace shows the graph replays of a steady-state step. Launch overhead "
             "seen during a capture says nothing about the replayed program."),
        confidence="high", evidence=ev)]


def _replayed(ctx: Context) -> tuple[float, float]:
    """GPU busy time (us) of the kernels the graph launches ran, and their span from first start to last end."""
    g = ctx.model.gpu[graph_launched(ctx.model)]
    if g.empty:
        return 0.0, 0.0
    s, e = merged_intervals(g["ts"].to_numpy(), g["end"].to_numpy())
    return float((e - s).sum()), float(e.max() - s.min())
