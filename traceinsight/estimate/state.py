"""The replay's values: what a fix changes (State, a copy of the compiled graph's arrays) and what a replay
gives back (Replay: each step's time)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compiled import Compiled

UNBLOCKED_CALL_US = 5.0       # a call that no longer waits costs about what a launch costs
GRAPH_KEEPS_BARE_US = 100.0   # the program's own Python between two launches that a graph keeps


@dataclass
class Replay:
    step_us: dict[int, float]

    @property
    def median_us(self) -> float:
        vals = list(self.step_us.values())
        return float(np.median(vals)) if vals else float("nan")


class State:
    """The mutable part a fix changes; starts as a copy of the compiled graph's values."""

    def __init__(self, c: Compiled):
        self.c = c
        self.dur = c.dur.copy()
        self.host = c.host.copy()
        self.feed = c.feed.copy()
        self.unasked = {k: v.copy() for k, v in c.unasked.items()}
        self.latency = c.latency.copy()
        self.spred = c.spred.copy()
        self.sgap = c.sgap.copy()
        # Least spacing after the previous activity on the stream: the GPU's own gap between queued eager
        # kernels (Compiled.queued_gap), or a CUDA graph's kernel-to-kernel gap once a fix graphs them.
        self.min_gap = np.where(c.is_gpu & (c.spred >= 0), c.queued_gap, 0.0)
        self.syncs = list(c.syncs)
        self.unblocked = np.zeros(len(c.nodes), dtype=bool)
        self.staged = c.staged_tail.copy()
        self.peer = c.peer_wait.copy()
        self.optimizer_fused = False
        self.wrapper_merged_us = 0.0   # torch.compile wrapper time per step a merge of split regions took away

    def unblock(self, i: int) -> None:
        self.syncs[i] = []
        self.dur[i] = min(self.dur[i], UNBLOCKED_CALL_US)
        self.unblocked[i] = True

    def detach_from_stream(self, i: int) -> None:
        """Move an activity to a stream of its own (a prefetch stream): its neighbours close ranks."""
        nxt = self.c.ssucc[i]
        if nxt >= 0 and self.spred[nxt] == i:
            self.spred[nxt] = self.spred[i]
            self.sgap[nxt] = 0.0
        self.spred[i] = -1
