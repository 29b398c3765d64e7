"""compile_capture (trace only): torch.compile(mode="reduce-overhead") capture vs replay.

The model of compile_default_vs_ro.py, compiled with mode="reduce-overhead".
capture: for each profile setting a fresh model is compiled (after torch._dynamo.reset()); the
         first call (Dynamo/Inductor compile + the cudagraph-trees warm-up run) is NOT profiled,
         then the profiler runs from the very next call with schedule(wait=0, warmup=0, active=5),
         so the first profiled step contains the CUDA graph capture (CUDAGraphNode.record,
         cudaStreamBeginCapture / cudaGraphInstantiate) and the later ones are replays.
warm:    the usual recipe (warm-up, un-profiled timing, schedule wait=1 warmup=2 active=5): replays only.
"""

import sys
import time

import torch

from . import compile_default_vs_ro as base
from ._util import cpu_mode, sync

NAME = "compile_capture"
EXPECTED_KIND = "cuda_graph_capture"
ROLE = "trace_only"
VARIANTS = ("capture", "warm")
FIX = None
DESCRIPTION = {
    "capture": ('torch.compile(mode="reduce-overhead") small MLP (see compile_default_vs_ro), profiled from the '
                'call right after the compile call: step 1 records the CUDA graph, steps 2-5 replay'),
    "warm": "same compiled model profiled after warm-up (replays only), usual schedule",
}
WARMUP_STEPS = 6


def make(variant, device):
    return base.compiled_step(device, "reduce-overhead")


def record(rec, device):
    entry = rec.new_entry(sys.modules[__name__], "capture")
    entry["step_ms"] = None
    entry["notes"] = ("no un-profiled timing for 'capture' (its steps are not repeatable); the un-profiled "
                      "replay time is under variant 'warm'")
    entry["compile_first_call_s"] = {}
    for setting in rec.settings:
        step = make("capture", device)
        try:
            t0 = time.perf_counter()
            step()                                   # compile + cudagraph-trees warm-up run (not profiled)
            sync(device)
            entry["compile_first_call_s"][setting] = round(time.perf_counter() - t0, 2)
            entry["info"] = dict(step.info)
            rec.profile_into(entry, step, setting, wait=0, warmup=0, active=5)
        finally:
            step.close()
            rec.cleanup()
    entry["cpu_mode_note"] = "eager on CPU (no compile)" if cpu_mode() else None
    rec.add_entry(entry)
    rec.record_variant(sys.modules[__name__], "warm")
