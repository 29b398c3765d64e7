"""The un-profiled laps ``traceinsight record`` times after its profiled window (child side; the
parent states them: record_unprofiled).

Steps after the window, the profiler stopped: the first one settles (the profiler's export and
teardown ran in the hook before it) and starts the block; each later one ends a lap. CUDA is
synchronized only at the block's start and end, so a lap is throughput, not one step's latency;
laps tile the block (hook time included). A step is what the window's was: an optimizer step, or,
in a script that steps no optimizer (an inference loop), an outermost forward call of the model
the window followed, timed by a hook on that module alone (the window's hooks on every module call
cost Python time on each: they are gone by then).
"""
from __future__ import annotations

import os
import time


class Laps:
    def __init__(self, torch, cuda: bool, timed_max: int):
        self.torch = torch
        self.cuda = cuda
        self.timed_max = timed_max
        self._handle = None         # the forward hook timing a model's calls, while it times them
        self.reset()

    def reset(self) -> None:
        """Drop what was timed (the window changed: an optimizer step came after a forward window)."""
        self.remove_hook()
        self.laps: list = []
        self.start = None
        self.gpu_sync = False       # CUDA in use: synchronize at the timed block's ends
        self.synced_end = False
        self.of = None              # "optimizer" | "forward": whose steps the laps are

    def wanted(self) -> bool:
        return len(self.laps) < self.timed_max

    def tick(self, of: str) -> None:
        """One more step after the window."""
        self.of = of
        now = time.perf_counter()
        if self.start is None:
            self.gpu_sync = self.cuda and self.torch.cuda.is_initialized()  # never init CUDA
            if self.gpu_sync:
                self.torch.cuda.synchronize()
                now = time.perf_counter()
            self.start = now
            return
        if len(self.laps) + 1 == self.timed_max and self.gpu_sync:
            self.torch.cuda.synchronize()
            now = time.perf_counter()
            self.synced_end = True
        self.laps.append(now - self.start)
        self.start = now

    # -- forward calls -------------------------------------------------------------------
    def time_forward_of(self, module, hook) -> None:
        """Time the outermost calls of `module` (its own forward hook: `hook(module, args, output)`)."""
        if self.timed_max > 0 and self._handle is None and module is not None:
            self.of = "forward"
            self._handle = module.register_forward_hook(hook)

    def remove_hook(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.remove()
            except Exception:
                pass

    def timing(self, traces: dict, optimizer_name, forward_module) -> dict:
        """What the parent needs to state the un-profiled step (status.json)."""
        of = self.of or ("optimizer" if "optimizer" in traces else None)
        return {"requested": self.timed_max, "laps_s": list(self.laps), "laps_of": of,
                "window_done": bool(of) and of in traces, "block_started": self.start is not None,
                "cuda_synchronized": self.gpu_sync, "synchronized_end": self.synced_end,
                "cupti_teardown": os.environ.get("TEARDOWN_CUPTI") == "1",
                "optimizer": optimizer_name, "forward_module": forward_module}
