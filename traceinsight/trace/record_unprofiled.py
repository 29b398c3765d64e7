"""The un-profiled step time that ``traceinsight record`` measured, stated for the trace's
``traceinsight_record`` block (parent side; no torch).

The child (record_profiler.Recorder, record_laps.Laps) times the window's steps (optimizer steps of the
primary optimizer, or a model's outermost forward calls where no optimizer steps) after the
profiler's step window has ended and the profiler was stopped: the first step after
the window settles (the export ran just before it), then up to ``--unprofiled-steps`` laps
are taken with ``time.perf_counter`` between consecutive ``optimizer.step()`` post-hooks (or the
model's forward hooks),
CUDA synchronized only at the block's start and end. The script is never lengthened: a
script that ends sooner gives fewer laps.

The figure: with CUDA in use, the block's mean (block time / steps, a throughput: the CPU
runs ahead of the GPU, so single laps are skewed by the launch queue); CPU only, the median
of blocks of 5 consecutive steps when there are at least 3 blocks (robust to a stray slow
step), else the block's mean.

With CUDA, the steps after the window are un-profiled only if CUPTI was detached: Kineto leaves it
attached when the profiler stops unless TEARDOWN_CUPTI=1 (pytorch/pytorch#144455). On an H200 and
an H100 (torch 2.11) a launch-bound step ran 7-45% slower after a profiler session than before it
in the same process, and not slower with TEARDOWN_CUPTI=1; a GPU-bound step was unaffected.
record sets it in the child where CUDA >= 12.6 and the user did not set it (record_boot); where it
is off, the method sentence says so and ``unprofiled_cupti_attached`` flags it.
"""
from __future__ import annotations

import statistics
from typing import Optional, Tuple

MIN_STEPS = 3      # fewer timed steps: no figure
BLOCK = 5          # steps per block when there are enough for a median of blocks
MIN_BLOCKS = 3


def _blocks(laps: list) -> list:
    """Consecutive blocks of BLOCK laps (the remainder joins the last block), as means."""
    n = len(laps) // BLOCK
    cuts = [i * BLOCK for i in range(n)] + [len(laps)]
    return [sum(laps[a:b]) / (b - a) for a, b in zip(cuts, cuts[1:])]


def summarize(info: Optional[dict], window: Optional[str], requested: int
              ) -> Tuple[dict, Optional[str]]:
    """The meta keys (``unprofiled_step_ms`` only when measured) and the stderr line (None:
    nothing to say, e.g. no optimizer window)."""
    info = info or {}
    laps = [float(x) for x in info.get("laps_s") or [] if isinstance(x, (int, float)) and x >= 0]
    meta: dict = {"unprofiled_steps": len(laps), "unprofiled_steps_requested": requested}
    opt = info.get("optimizer") or "the optimizer"
    if requested <= 0:
        meta["unprofiled_method"] = "not measured (--unprofiled-steps 0)"
        return meta, None
    of = {"optimizer_steps": "optimizer", "forward_calls": "forward"}.get(window)
    laps_of = info.get("laps_of") or of
    model = info.get("forward_module") or "model"
    calls = "optimizer steps" if of == "optimizer" else "forward calls"
    if of is None or laps_of != of or not info.get("window_done"):
        why = ("no step window was recorded (whole run)" if of is None else
               "an optimizer step came after the forward calls' window" if laps_of != of else
               f"the {calls}' window did not complete")
        meta["unprofiled_method"] = "not measured: steps are timed after the profiled window, and " + why
        return meta, None
    steps = "optimizer step(s)" if of == "optimizer" else f"outermost {model} call(s)"
    if len(laps) < MIN_STEPS:
        after = len(laps) + (1 if info.get("block_started") else 0)
        meta["unprofiled_method"] = (
            f"not measured: the script ended {after} {steps} after the profiled window "
            f"(the first one after it settles and is not timed; at least {MIN_STEPS} timed steps "
            "are needed); run more iterations to measure it")
        return meta, (f"un-profiled step: not measured (only {len(laps)} step(s) after the "
                      f"profiled window; {MIN_STEPS} needed)")
    ms = [x * 1000.0 for x in laps]
    blocks = _blocks(ms)
    if info.get("cuda_synchronized"):
        # GPU work is queued ahead: the first laps are short while the queue fills, and the
        # last one holds the final synchronize's drain; only the whole block is a throughput
        value = sum(ms) / len(ms)
        how = ("the block's mean (a throughput: with CUDA, single steps and sub-blocks are "
               "skewed by the launch queue filling and draining)")
        short = f"mean of {len(ms)} steps after the profiled window"
    elif len(blocks) >= MIN_BLOCKS:
        value = statistics.median(blocks)
        how = f"the median of {len(blocks)} blocks of {BLOCK}+ consecutive steps"
        short = f"median of {len(blocks)} blocks, {len(ms)} steps after the profiled window"
    else:
        value = sum(ms) / len(ms)
        how = "the block's mean (too few steps for a median of blocks)"
        short = f"mean of {len(ms)} steps after the profiled window"
    sync = ""
    if info.get("cuda_synchronized"):
        sync = (", torch.cuda.synchronize() at the block's start and end" if info.get("synchronized_end")
                else ", torch.cuda.synchronize() at the block's start only (the script ended "
                     "before the block's end: GPU work still queued then is not counted, so a "
                     "GPU-bound step may read low)")
    ended = "" if len(laps) >= requested else f"; the script ended after {len(laps)} of {requested}"
    cupti = bool(info.get("cuda_synchronized")) and not info.get("cupti_teardown")
    if cupti:
        sync += ("; CUPTI stayed attached after the profiler stopped (no TEARDOWN_CUPTI=1), which "
                 "can make a launch-bound step read up to ~45% slow")
    meta["unprofiled_cupti_attached"] = cupti
    meta["unprofiled_step_ms"] = round(value, 4)
    meta["unprofiled_block_ms"] = [round(b, 4) for b in blocks]
    between = (f"consecutive {opt}.step() calls" if of == "optimizer" else
               f"the ends of consecutive outermost {model} forward calls (a hook on that module alone)")
    meta["unprofiled_method"] = (
        f"{len(laps)} {calls} after the profiled window "
        f"ended (profiler stopped), timed with time.perf_counter between {between}{sync}; the first one "
        f"after the window is not timed{ended}; the figure is {how}")
    return meta, f"un-profiled step: {value:.2f} ms ({short})"
