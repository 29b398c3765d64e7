"""Which Python calls a CPU thread spent a stretch of time in (traces recorded with with_stack=True).

A stretch is split by exclusive time: each recorded event (Python frame, built-in method, op) owns what
its children do not cover. That time is credited to the call the user's code made: the outermost event
below the innermost user frame above it (numpy's argmax, not the step function around it; the profiler's
own step, not the loop that calls it), or to the user frame itself for its own lines. The profiler
records each frame's first line (the `def`), never the calling line.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from .model import TraceModel

PY_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
LIB = re.compile(r"(site-packages|dist-packages|(^|/)torch/|/lib/python\d|<frozen|<built-in)")
# A call of a C built-in, as with_stack names it (the method's name may be empty: pybind11's functions).
BUILTIN_CALL = r"^<built-in (?:method|function) "
BUILTIN = re.compile(BUILTIN_CALL + r"(?P<meth>\w+)(?: of (?P<cls>[\w.]+) object)?")
# The profiler's own Python (its step(), record_function's enter/exit): absent from the un-profiled run.
PROFILER_OWN = re.compile(r"torch/profiler/|torch/autograd/profiler\.py|_record_function_(enter|exit)")


# The profiler writes installed modules' paths relative to their sys.path entry ("numpy/_core/_methods.py",
# "typing.py"): a library is told by its top-level name. (A script named like a stdlib module, test.py,
# stays user code.)
LIBRARIES = (frozenset(sys.stdlib_module_names) - {"test", "code", "this"}) | {
    "numpy", "scipy", "pandas", "PIL", "cv2", "sklearn", "torchvision", "torchaudio", "torchtext", "triton",
    "transformers", "tokenizers", "datasets", "accelerate", "lightning", "pytorch_lightning",
    "lightning_fabric", "apex", "deepspeed", "timm", "tqdm", "wandb", "tensorboard", "einops", "safetensors",
    "huggingface_hub", "fsspec", "xformers", "flash_attn", "megatron", "numba", "pyarrow", "h5py",
    "albumentations", "_pytest", "pluggy", "IPython", "ipykernel", "tornado", "zmq", "absl"}


def is_user_frame(name: str) -> bool:
    """A frame of the user's own code: not torch, not the standard library, not a known library."""
    m = PY_FRAME.match(name)
    if not m or LIB.search(m.group("file")):
        return False
    return m.group("file").split("/", 1)[0].removesuffix(".py") not in LIBRARIES


def frame_label(name: str) -> str:
    """"step(), def at train.py:64" for a frame (the profiler records the `def` line, not the calling one);
    "ndarray.argmax()" / "nonzero()" for a built-in."""
    m = PY_FRAME.match(name)
    if m:
        return f"{m.group('func')}(), def at {m.group('file')}:{m.group('line')}"
    b = BUILTIN.match(name)
    if b:
        # A method of a type object (torch.nonzero: torch's function table, dict.fromkeys) or a plain
        # built-in function (next) is named by itself: the trace does not say whose it is.
        cls = b.group("cls")
        cls = "" if cls in (None, "type") else cls.rsplit(".", 1)[-1] + "."
        return f"{cls}{b.group('meth')}()"
    return STEP_NUMBER.sub("", name)


STEP_NUMBER = re.compile(r"#\d+$")


def calls_in(model: TraceModel, thread: str, spans) -> dict[str, float]:
    """us per call label over the spans [(start, end), ...] of one thread, by exclusive time: each instant
    belongs to the deepest event then running (by time, not by parent links: a range that outlives the
    frame it started in, ProfilerStep inside record_function's enter, is not that frame's child)."""
    cpu = model.cpu
    rows = model.thread_rows().get(thread)
    if rows is None or not len(rows):
        return {}
    rows = rows[cpu["kind"].to_numpy()[rows] != "runtime"]
    ts, end = cpu["ts"].to_numpy()[rows], cpu["end"].to_numpy()[rows]
    depth = cpu["depth"].to_numpy()[rows]
    parent, names, kinds = cpu["parent"].to_numpy(), cpu["name"].to_numpy(), cpu["kind"].to_numpy()
    label_of: dict[int, str] = {}
    out: dict[str, float] = {}
    for a, b in spans:
        hit = np.flatnonzero((ts < b) & (end > a))
        if not len(hit):
            continue
        lo, hi, d = np.maximum(ts[hit], a), np.minimum(end[hit], b), depth[hit]
        bounds = np.unique(np.concatenate([lo, hi]))
        starts = bounds[:-1]
        owner = np.full(len(starts), -1, dtype=np.int64)
        for level in np.unique(d):                  # shallow first: deeper levels overwrite
            sel = np.flatnonzero(d == level)
            sel = sel[np.argsort(lo[sel], kind="stable")]
            j = np.searchsorted(lo[sel], starts, side="right") - 1
            ok = j >= 0
            ok[ok] = hi[sel[j[ok]]] > starts[ok]
            owner[ok] = sel[j[ok]]
        busy = owner >= 0
        per = np.bincount(owner[busy], weights=np.diff(bounds)[busy], minlength=len(hit))
        for k in np.flatnonzero(per > 0):
            e = int(rows[hit[k]])
            lab = label_of.get(e)
            if lab is None:
                lab = label_of[e] = _label(e, parent, names, kinds)
            out[lab] = out.get(lab, 0.0) + float(per[k])
    return out


# Decorators' wrappers say nothing of the call (optimizer.zero_grad runs inside torch._disable_dynamo's
# inner()): the call is named by what the wrapper called.
WRAPPER = re.compile(r"(torch/_compile\.py\(\d+\): inner|torch/_dynamo/eval_frame\.py\(\d+\): _fn|"
                     r"torch/utils/_contextlib\.py\(\d+\): decorate_context|"
                     r"functools\.py\(\d+\): \w+)$")


def _label(e: int, parent: np.ndarray, names: np.ndarray, kinds: np.ndarray) -> str:
    outer, q, hops = e, e, 0
    path: list[int] = []            # the non-runtime events from e up to `outer`
    while q >= 0 and hops < 500:
        if kinds[q] == "python" and is_user_frame(names[q]):
            if q == e:
                func, _, where = frame_label(names[q]).partition(", ")
                return f"{func} itself, {where}"
            where = frame_label(names[q])
            k = len(path) - 1
            while k > 0 and WRAPPER.search(names[path[k]]):
                k -= 1
            outer = path[k] if path else outer
            lab = frame_label(names[outer])
            own = " (the profiler's own)" if PROFILER_OWN.search(names[outer]) else ""
            return f"{lab} in {where}{own}"
        if kinds[q] != "runtime":
            outer = q
            path.append(q)
        q = int(parent[q])
        hops += 1
    return frame_label(names[outer])
