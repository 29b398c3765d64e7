"""Work the program did not ask for, which only its own fix takes away: torch.compile compiling (recompile's fix),
cuDNN searching its algorithms (cudnn_benchmark's) and autograd's anomaly detection (anomaly_detection's).

Each kind is read two ways: the CPU time of a stretch spent in it (`host_us`), and the runtime calls made in it
(`calls`: the autotuner's and the trials' launches and syncs, the NaN checks'). The attribution gives its idle to
its cause; the timeline graph keeps its time in a bucket of its own per kind (not host work a DataLoader worker
takes over, nor feed a CUDA graph removes); the GPU work its calls launch is not the program's (no fix of the
program's kernels touches it) and a sync made in it is not a sync the program made.
The order matters where two overlap: each kind takes what is left of a stretch after the ones before it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from .anomaly import anomaly_us_in, while_checking
from .compiles import compile_us_in, while_compiling
from .cudnn_search import search_us_in, while_searching


@dataclass(frozen=True)
class Unasked:
    key: str            # its bucket in the timeline graph (estimate/graph.py) and the replay's state
    cause: str          # the finding kind whose fix takes it away
    host_us: Callable   # (model, a, b) -> per [a, b): us of it inside
    calls: Callable     # (model, cpu rows) -> per row: a call made in it


UNASKED = (Unasked("compile", "recompile", compile_us_in, while_compiling),
           Unasked("search", "cudnn_benchmark", search_us_in, while_searching),
           Unasked("anomaly", "anomaly_detection", anomaly_us_in, while_checking))
KEYS = tuple(u.key for u in UNASKED)


def calls_made_in(model, rows) -> dict[str, np.ndarray]:
    """Per kind, per cpu row (negative: none, never made in it): the call was made in that kind of work."""
    rows = np.asarray(rows, dtype=np.int64)
    ok, r = rows >= 0, np.maximum(rows, 0)
    return {u.key: ok & u.calls(model, r) for u in UNASKED}


def not_the_programs(model, rows) -> np.ndarray:
    """Per cpu row (negative: none): a call made in any of them."""
    out = np.zeros(len(np.asarray(rows)), dtype=bool)
    for mask in calls_made_in(model, rows).values():
        out |= mask
    return out


def launched_in(model, gpu: pd.DataFrame) -> np.ndarray:
    """Per gpu row: launched by a call made in any of them (the autotuner's benchmark runs, cuDNN's trials,
    autograd's NaN checks)."""
    return not_the_programs(model, gpu["launcher"].to_numpy())
