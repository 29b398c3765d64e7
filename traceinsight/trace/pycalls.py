"""Which Python calls a CPU thread spent a stretch of time in (traces recorded with with_stack=True).

A stretch is split by exclusive time: each recorded event (Python frame, built-in method, op) owns what
its children do not cover. That time is credited to the call the user's code made: the outermost event
below the innermost user frame above it (numpy's argmax, not the step function around it; the profiler's
own step, not the loop that calls it), or to the user frame itself for its own lines. The profiler
records each frame's first line (the `def`), never the calling line.
"""
from __future__ import annotations

import functools
import re
import sys

import numpy as np

from .model import TraceModel
from .nesting import EPS

PY_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
# (traceinsight's own modules too, wherever it was installed from: `record` runs the user's script under them;
# and torch.compile's generated output code, /tmp/torchinductor_<user>/..., which no user edits.)
LIB = re.compile(r"(site-packages|dist-packages|(^|/)torch/|/lib/python\d|<frozen|<built-in|torchinductor_|"
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


@functools.lru_cache(maxsize=1 << 16)
def is_user_frame(name: str) -> bool:
    """A frame of the user's own code: not torch, not the standard library, not a known library."""
    m = PY_FRAME.match(name)
    if not m or LIB.search(m.group("file")):
        return False
    return m.group("file").split("/", 1)[0].removesuffix(".py") not in LIBRARIES


@functools.lru_cache(maxsize=1 << 16)
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


@functools.lru_cache(maxsize=1 << 16)
def library_call(name: str) -> str | None:
    """"clip_grad_norm_()" for a frame of a library's public function (torch's, numpy's), the call a user
    makes; None for a user frame, a built-in, a private helper, a module's forward or a wrapper."""
    m = PY_FRAME.match(name)
    if not m or is_user_frame(name) or _is_profiler_own(name) or _is_wrapper(name):
        return None
    func = m.group("func")
    return None if func.startswith(("_", "<")) or func == "forward" else f"{func}()"


# Libraries whose frames a user's sync site is not named by: PyTorch's own, numpy, the standard library.
_CORE = frozenset(sys.stdlib_module_names) | {"torch", "torchvision", "torchaudio", "torchtext", "numpy", "traceinsight"}


@functools.lru_cache(maxsize=1 << 16)
def third_party_frame(name: str) -> str | None:
    """"_prepare_4d_attention_mask_for_sdpa(), def at transformers/modeling_attn_mask_utils.py:429" for a frame of
    a library other than PyTorch, numpy or the standard library (where the user's call went on to do the
    work); None for anything else, a module's forward or a wrapper."""
    m = PY_FRAME.match(name)
    if not m or is_user_frame(name) or _is_profiler_own(name) or _is_wrapper(name):
        return None
    file = m.group("file").rsplit("-packages/", 1)[-1]
    if file.startswith("/") or file.split("/", 1)[0].removesuffix(".py") in _CORE or "torch/" in file:
        return None
    func = m.group("func")
    return None if func in ("forward", "__call__") or func.startswith("<") else frame_label(name)


# (A trace names the same few thousand frames a million times: each name's verdict is worked out once.)
@functools.lru_cache(maxsize=1 << 16)
def _is_wrapper(name: str) -> bool:
    return WRAPPER.search(name) is not None


@functools.lru_cache(maxsize=1 << 16)
def _is_profiler_own(name: str) -> bool:
    return PROFILER_OWN.search(name) is not None


# Built-ins that wait with the GIL released (a lock, a queue, sleep, select, a socket or pipe read): a thread in
# one leaves the interpreter to the others.
WAITS = re.compile(BUILTIN_CALL + r"(acquire|wait|sleep|select|poll|epoll|recv\w*|read|readinto|accept|get|join|"
                   r"_wait_for_tstate_lock|getaddrinfo|connect|send\w*|write)\b")


@functools.lru_cache(maxsize=1 << 16)
def holds_gil(name: str) -> bool:
    """Whether an instant whose deepest event is this Python event runs Python: a built-in that neither waits
    (WAITS) nor is torch's (its C++ releases the GIL), or the own lines of a frame of the user's code. (A library
    frame's own time is mostly a call the tracer did not see start, a wait begun before the profiler was: every
    idle thread's threading.py frames, vLLM's usage reporter asleep in its loop.)"""
    if re.match(BUILTIN_CALL, name):
        return not (WAITS.match(name) or RELEASES_GIL.search(name))
    return is_user_frame(name)


OPEN_AT_START_US = 1000.0
# Built-ins whose work runs with the GIL released: torch's (its functions are methods "of type object", its tensors'
# "of Tensor object"), numpy's, image decoders', compression, file and socket I/O (a review: a thread decoding with
# PIL or cv2, or saving a checkpoint, had counted as holding the GIL, where a thread is the right place for it).
RELEASES_GIL = re.compile(r"of type object|torch|Tensor|numpy|ndarray|cv2|PIL|Imaging|zlib|lz4|zstd|gzip|bz2|lzma|"
                          r"_io\.|\b(open|stat|fsync|flush|readline|readlines|write|writelines|compress|"
                          r"decompress|imdecode|imread|decode|encode)\b")


def calls_in(model: TraceModel, thread: str, spans, weights=None, holding_gil: bool = False) -> dict[str, float]:
    """us per call label over the spans [(start, end), ...] of one thread, by exclusive time: each instant
    belongs to the deepest event then running (by time, not by parent links), never to a range that outlives
    its parent (ProfilerStep, opened inside record_function's enter: see callers()). With weights, each span's
    time counts at its weight (the share of it that is the cause asked about). holding_gil: only the instants whose
    deepest event is Python (a frame's own lines or a built-in) that does not wait (WAITS): an op's C++ and a wait
    run with the GIL released."""
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
    labels = _Labeller(parent, names, kinds, all_ts, all_end)
    levels = _by_level(ts, end, depth)
    # (A frame open from the window's first instants to its last was entered before the profiler started, which
    # records the stacks then alive in its first ~100 us: what they called, a sleep or a wait, was never recorded,
    # so their "own" time says nothing: vLLM's trace, tqdm's monitor and a usage reporter asleep on tid 0.)
    whole = (all_ts <= all_ts.min() + OPEN_AT_START_US) & (all_end >= all_end.max() - 1.0) if holding_gil else None
    out: dict[str, float] = {}
    for k, (a, b) in enumerate(spans):
        w = 1.0 if weights is None else float(weights[k])
        hit = _overlapping(levels, end, a, b) if levels is not None else np.flatnonzero((ts < b) & (end > a))
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
        got = np.flatnonzero(per > 0)
        for e, us in zip(rows[hit[got]].tolist(), per[got].tolist()):
            if holding_gil and (kinds[e] != "python" or not holds_gil(names[e]) or whole[e]):
                continue
            lab = labels.of(e)
            out[lab] = out.get(lab, 0.0) + us * w
    return out




def _by_level(ts: np.ndarray, end: np.ndarray, depth: np.ndarray) -> list[tuple] | None:
    """Per nesting depth: (its rows' positions, their starts, the running max of their ends), for finding
    the rows that overlap a span without a pass over all of them (a with_stack thread holds millions).
    None where a depth's rows do not start in order (then each span scans them all)."""
    out = []
    order = np.argsort(depth, kind="stable")
    cuts = np.flatnonzero(np.diff(depth[order])) + 1
    for pos in np.split(order, cuts) if len(order) else []:
        t = ts[pos]
        if len(t) > 1 and (np.diff(t) < 0).any():
            return None
        out.append((pos, t, np.maximum.accumulate(end[pos])))
    return out


def _overlapping(levels: list[tuple], end: np.ndarray, a: float, b: float) -> np.ndarray:
    """The positions of the rows with ts < b and end > a, ascending: per depth, those that start before b
    from the first whose depth-mates up to it reach past a (the running max of ends)."""
    parts = []
    for pos, t, reach in levels:
        lo, hi = int(np.searchsorted(reach, a, side="right")), int(np.searchsorted(t, b, side="left"))
        if lo < hi:
            cand = pos[lo:hi]
            parts.append(cand[end[cand] > a])
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


class _Labeller:
    """_label for many events of one trace. A with_stack trace holds ~10^6 events ~15 frames deep: each event's
    walk up to its user frame is summed once per ancestor (chain()) and reused by all the events below it."""

    def __init__(self, parent, names, kinds, ts, end):
        # (Python lists index ~3x faster than arrays, one element at a time.)
        self.tree = parent.tolist(), names.tolist(), kinds.tolist(), ts.tolist(), end.tolist()
        self.memo: dict[int, tuple] = {}
        self.label_of: dict[int, str] = {}

    def of(self, e: int) -> str:
        lab = self.label_of.get(e)
        if lab is None:
            lab = self.label_of[e] = self._fast(e) or _label(e, *self.tree)
        return lab

    def _fast(self, e: int) -> str | None:
        """_label(e) from the chain above e's parent; None where the chain's walk would not be callers()'s
        (an ancestor that ended before e started, a chain past callers()' hop limit)."""
        parent, names, kinds, ts, _end = self.tree
        if kinds[e] == "python" and is_user_frame(names[e]):
            return _itself(names[e])
        user, top_plain, top, low_end, hops = self.chain(parent[e])
        if low_end + EPS < ts[e] or hops >= 500:
            return None
        if user is None:
            return frame_label(names[top if top is not None else e])
        # The path from e up to the user frame (e, then the chain's non-runtime events): its topmost event
        # that is no wrapper, or e itself (_label's `while k > 0` loop).
        return _call_in(names[top_plain if top_plain is not None else e], names[user])

    def chain(self, q: int) -> tuple:
        """For the walk of callers() from q up: (the first user frame or None, the topmost non-runtime event
        below it that is no wrapper, the topmost non-runtime event below it, the earliest end on the way
        up to it, the hops taken)."""
        parent, names, kinds, _ts, end = self.tree
        memo = self.memo
        down: list[int] = []
        while q >= 0 and q not in memo:
            down.append(q)
            p = parent[q]
            if kinds[q] == "python" and is_user_frame(names[q]) and not _outlives(q, p, kinds, end):
                break
            q = p
        res = memo[q] if q >= 0 and q in memo else (None, None, None, float("inf"), 0)
        for q in reversed(down):
            p = parent[q]
            if _outlives(q, p, kinds, end):                 # callers() passes over it
                user, plain, top, low, hops = res
                res = (user, plain, top, low, hops + 1)
            elif kinds[q] == "python" and is_user_frame(names[q]):
                res = (q, None, None, end[q], 1)
            else:
                user, plain, top, low, hops = res
                if kinds[q] != "runtime":
                    top = q if top is None else top
                    plain = q if plain is None and not _is_wrapper(names[q]) else plain
                res = (user, plain, top, min(low, end[q]), hops + 1)
            memo[q] = res
        return res


@functools.lru_cache(maxsize=1 << 16)
def _itself(frame: str) -> str:
    func, _, where = frame_label(frame).partition(", ")
    return f"{func} itself, {where}"


@functools.lru_cache(maxsize=1 << 16)
def _call_in(call: str, frame: str) -> str:
    own = " (the profiler's own)" if _is_profiler_own(call) else ""
    return f"{frame_label(call)} in {frame_label(frame)}{own}"


def _outlives(q: int, p: int, kinds, end) -> bool:
    """q is a range that outlives its parent p (callers() passes over it; _detached() is this for many rows)."""
    return kinds[q] == "annotation" and p >= 0 and end[q] > end[p] + EPS


def _label(e: int, parent, names, kinds, ts, end) -> str:
    outer = e
    path: list[int] = []            # the non-runtime events from e up to `outer`
    for q in (e, *callers(e, parent, kinds, ts, end)):
        if kinds[q] == "python" and is_user_frame(names[q]):
            if q == e:
                return _itself(names[q])
            k = len(path) - 1
            while k > 0 and _is_wrapper(names[path[k]]):
                k -= 1
            return _call_in(names[path[k] if path else outer], names[q])
        if kinds[q] != "runtime":
            outer = q
            path.append(q)
    return frame_label(names[outer])


# The profiler opens some ranges inside a call that returns at once: record_function's enter opens
# ProfilerStep#N (open until the next step) and Optimizer.step#... A range that outlives the event it started
# in is nobody's call, and what is nested in it by time was called by the frames still running when it started
# (`traceinsight record` steps at a forward hook: the user's loop after the forward had returned read as the
# hook's, traceinsight's own frames named as the user's code). Walks up the tree pass over both.
def callers(e: int, parent, kinds, ts, end):
    """e's callers, innermost first: its ancestors still running when e started, less ranges that outlive
    their own parent."""
    t, q, hops = ts[e], int(parent[e]), 0
    while q >= 0 and hops < 500:
        p = int(parent[q])
        if end[q] + EPS >= t and not _outlives(q, p, kinds, end):
            yield q
        q, hops = p, hops + 1



def _detached(rows: np.ndarray, parent: np.ndarray, kinds: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which of the rows are annotations that outlive their parent."""
    p = parent[rows]
    has = p >= 0
    out = np.zeros(len(rows), dtype=bool)
    out[has] = (kinds[rows[has]] == "annotation") & (end[rows[has]] > end[p[has]] + EPS)
    return out
