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
from .nesting import EPS

PY_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
# (traceinsight's own modules too, wherever it was installed from: `record` runs the user's script under them.)
LIB = re.compile(r"(site-packages|dist-packages|(^|/)torch/|/lib/python\d|<frozen|<built-in|"
                 r"(^|/)traceinsight/(trace|analyses|estimate|report|render|cli)/)")
# A call of a C built-in, as with_stack names it (the method's name may be empty: pybind11's functions).
BUILTIN_CALL = r"^<built-in (?:method|function) "
BUILTIN = re.compile(BUILTIN_CALL + r"(?P<meth>\w+)(?: of (?P<cls>[\w.]+) object)?")
# The profiler's own Python (its step(), record_function's enter/exit): absent from the un-profiled run.
# (traceinsight's own recorder counts too: `record` steps the profiler from its hooks.)
PROFILER_OWN = re.compile(r"torch/profiler/|torch/autograd/profiler\.py|_record_function_(enter|exit)|"
                          r"traceinsight/trace/record_")


# The profiler writes installed modules' paths relative to their sys.path entry ("numpy/_core/_methods.py",
# "typing.py"): a library is told by its top-level name. (A script named like a stdlib module, test.py,
# stays user code.)
LIBRARIES = (frozenset(sys.stdlib_module_names) - {"test", "code", "this"}) | {
    "numpy", "scipy", "pandas", "PIL", "cv2", "sklearn", "torchvision", "torchaudio", "torchtext", "triton",
    "transformers", "tokenizers", "datasets", "accelerate", "lightning", "pytorch_lightning",
    "lightning_fabric", "apex", "deepspeed", "timm", "tqdm", "wandb", "tensorboard", "einops", "safetensors",
    "huggingface_hub", "fsspec", "xformers", "flash_attn", "megatron", "numba", "pyarrow", "h5py",
    "albumentations", "_pytest", "pluggy", "IPython", "ipykernel", "tornado", "zmq", "absl", "traceinsight"}


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
        # pybind11's own function type ("pybind11_detail_function_record_v1_..._1xxx_use_cxx11_abi_1") is no
        # class of the user's either.
        cls = b.group("cls")
        cls = "" if cls in (None, "type") or cls.startswith("pybind11_") else cls.rsplit(".", 1)[-1] + "."
        return f"{cls}{b.group('meth')}()"
    return STEP_NUMBER.sub("", name)


STEP_NUMBER = re.compile(r"#\d+$")
# Library frames that only pass a call on (decorators' wrappers, module dispatch) say nothing of it:
# optimizer.zero_grad runs inside torch._disable_dynamo's inner(), clip_grad_norm_ inside _no_grad_wrapper(),
# AdamW.step inside the optimizer's wrapper(), torch.unique inside boolean_dispatch's fn(). The call is named by
# what the wrapper called.
WRAPPER = re.compile(r"(\): (wrapper|inner|wrapped|wrapped_fn|fn|decorate_context|_fn|_no_grad_wrapper|_use_grad|"
                     r"_call_impl|_wrapped_call_impl)|functools\.py\(\d+\): \w+)$")


def library_call(name: str) -> str | None:
    """"clip_grad_norm_()" for a frame of a library's public function (torch's, numpy's), the call a user
    makes; None for a user frame, a built-in, a private helper, a module's forward or a wrapper."""
    m = PY_FRAME.match(name)
    if not m or is_user_frame(name) or PROFILER_OWN.search(name) or WRAPPER.search(name):
        return None
    func = m.group("func")
    return None if func.startswith(("_", "<")) or func == "forward" else f"{func}()"


def calls_in(model: TraceModel, thread: str, spans) -> dict[str, float]:
    """us per call label over the spans [(start, end), ...] of one thread, by exclusive time: each instant
    belongs to the deepest event then running (by time, not by parent links), never to a range that outlives
    its parent (ProfilerStep, opened inside record_function's enter: see callers())."""
    cpu = model.cpu
    rows = model.thread_rows().get(thread)
    if rows is None or not len(rows):
        return {}
    parent, names, kinds = cpu["parent"].to_numpy(), cpu["name"].to_numpy(), cpu["kind"].to_numpy()
    all_ts, all_end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    # (A range that outlives its parent holds no instant of its own: what runs in it belongs to the frames.)
    rows = rows[(kinds[rows] != "runtime") & ~_detached(rows, parent, kinds, all_end)]
    ts, end = all_ts[rows], all_end[rows]
    depth = cpu["depth"].to_numpy()[rows]
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
                lab = label_of[e] = _label(e, parent, names, kinds, all_ts, all_end)
            out[lab] = out.get(lab, 0.0) + float(per[k])
    return out




def _label(e: int, parent: np.ndarray, names: np.ndarray, kinds: np.ndarray, ts: np.ndarray,
           end: np.ndarray) -> str:
    outer = e
    path: list[int] = []            # the non-runtime events from e up to `outer`
    for q in (e, *callers(e, parent, kinds, ts, end)):
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
    return frame_label(names[outer])


# The profiler opens some ranges inside a call that returns at once: record_function's enter opens
# ProfilerStep#N (open until the next step) and Optimizer.step#... A range that outlives the event it started
# in is nobody's call, and what is nested in it by time was called by the frames still running when it started
# (`traceinsight record` steps at a forward hook: the user's loop after the forward had returned read as the
# hook's, traceinsight's own frames named as the user's code). Walks up the tree pass over both.
def callers(e: int, parent: np.ndarray, kinds: np.ndarray, ts: np.ndarray, end: np.ndarray):
    """e's callers, innermost first: its ancestors still running when e started, less ranges that outlive
    their own parent."""
    t, q, hops = ts[e], int(parent[e]), 0
    while q >= 0 and hops < 500:
        p = int(parent[q])
        if end[q] + EPS >= t and not (kinds[q] == "annotation" and p >= 0 and end[q] > end[p] + EPS):
            yield q
        q, hops = p, hops + 1



def _detached(rows: np.ndarray, parent: np.ndarray, kinds: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which of the rows are annotations that outlive their parent."""
    p = parent[rows]
    has = p >= 0
    out = np.zeros(len(rows), dtype=bool)
    out[has] = (kinds[rows[has]] == "annotation") & (end[rows[has]] > end[p[has]] + EPS)
    return out
