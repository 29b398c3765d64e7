"""graph_capture: the trace records a CUDA/HIP graph being captured (a one-time warm-up), not a
steady-state step. Launches made during a capture run no kernels, so the GPU looks idle and the step
looks launch-bound; the right advice is to record again after the capture, not to "use CUDA graphs".
"""
from __future__ import annotations

from ..trace.facts import program_facts, program_kind
from .base import Context, Finding, KindSpec

SPEC = KindSpec("graph_capture", "a CUDA-graph capture, not a steady-state step", estimate="measured",
                note=True, note_share=0.0, headline=True)


def analyze(ctx: Context) -> list[Finding]:
    p = program_facts(ctx.model)
    if program_kind(p) != "capture":
        return []
    ev = {"capture_calls": p["capture_calls"], "capture_ranges": p["capture_ranges"],
          "launch_calls": p["launch_calls"], "launches_that_ran_nothing": p["launches_that_ran_nothing"],
          "kernels_that_ran": p["kernels"], "graph_launches": p["graph_launches"],
          "kernels_from_graph_replays": p["graph_kernels"]}
    # (The counts say what ran: launches captured into the graph run nothing; its replays run kernels
    # that no launch call of their own made.)
    replay = (f" It also replays a graph ({p['graph_kernels']} of the kernels came from its replays), but "
              "the window is dominated by the capture." if p["graph_launches"] else "")
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
