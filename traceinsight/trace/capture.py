"""Where the program records a CUDA/HIP graph: the capture ranges, calls and frames, and the stretches they
span. Launches made there run nothing, so the GPU idles there without the launches being late."""
from __future__ import annotations

import re

import numpy as np

from .model import TraceModel
from .steps import merged_intervals, starts_inside

# Ranges (annotations, ops), not Python frames: optimizer.py's _accelerator_graph_capture_health_check
# runs in every eager optimizer step.
_CAPTURE_RANGE = re.compile(r"CUDAGraphNode\.record|^capture_|cuda_graph_capture|CUDAGraph\.capture|"
                            r"capture_cudagraph", re.I)
# A graph tree recording a new graph (with_stack's frame): its node's set-up (the recording inputs, the memory
# pool) and the capture; a review found xDiT's 22 ms CUDAGraphNode.__init__ read as launch overhead.
_GRAPH_TREE_RECORD = r"torch/_inductor/cudagraph_trees\.py\(\d+\): record_function$"
# Python files of PyTorch's CUDA-graph machinery (graph trees, torch.cuda.graph): what runs under them is the
# recording's, not the program's (a review found xDiT's every device sync and free there, advised as the program's).
GRAPH_MACHINERY = r"(?:^|/)torch/(?:_inductor/cudagraph_trees|cuda/graphs)\.py\("


def capture_ranges(model: TraceModel) -> np.ndarray:
    """Per CPU row: a range (op or annotation) that records a graph, or a graph tree's recording frame."""
    kind = model.cpu["kind"]       # (categorical: compared on its codes, not as a million strings)
    return ((((kind == "op") | (kind == "annotation")).to_numpy() & model.cpu_match(_CAPTURE_RANGE.pattern, re.I))
            | ((kind == "python").to_numpy() & model.cpu_match(_GRAPH_TREE_RECORD)))


def capture_spans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the stretches where the program records a CUDA/HIP graph: capture ranges
    (CUDAGraphNode.record, vLLM's capture_*), BeginCapture to the next EndCapture on its thread, and the
    instantiation. Launches there run nothing, so the GPU idles without the launches being late."""
    return model.memo("capture_spans", lambda: _capture_spans(model))


def _capture_spans(model: TraceModel) -> tuple[np.ndarray, np.ndarray]:
    cpu = model.cpu
    if cpu.empty:
        return np.zeros(0), np.zeros(0)
    rt = (cpu["kind"] == "runtime").to_numpy()
    rows = capture_ranges(model) | (rt & model.cpu_match(r"GraphInstantiate", re.I))
    spans = [cpu.loc[rows, ["ts", "end"]].to_numpy()]
    for _th, c in cpu[rt & model.cpu_match(r"StreamBeginCapture|StreamEndCapture", re.I)].groupby("thread"):
        c = c.sort_values("ts")
        begin = c["name"].str.contains("BeginCapture").to_numpy()
        ts, end = c["ts"].to_numpy(), c["end"].to_numpy()
        for i in np.flatnonzero(begin):
            later = np.flatnonzero(~begin[i + 1:])
            if len(later):
                spans.append(np.array([[ts[i], end[i + 1 + later[0]]]]))
    both = np.concatenate(spans)
    return merged_intervals(both[:, 0], both[:, 1]) if len(both) else (np.zeros(0), np.zeros(0))


def under_graph_machinery(model: TraceModel) -> np.ndarray:
    """Per cpu row: it starts inside a Python frame of PyTorch's CUDA-graph machinery on its thread (with_stack)."""
    return model.memo("under_graph_machinery", lambda: _under_graph_machinery(model))


def _under_graph_machinery(model: TraceModel) -> np.ndarray:
    cpu = model.cpu
    frames = (cpu["kind"] == "python").to_numpy() & model.cpu_match(GRAPH_MACHINERY) if len(cpu) else \
        np.zeros(0, dtype=bool)
    if not frames.any():
        return np.zeros(len(cpu), dtype=bool)
    return starts_inside(cpu["ts"].to_numpy(), cpu["end"].to_numpy(), frames, model.thread_rows().values())
