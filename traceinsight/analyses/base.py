"""What every analyzer gets (Context) and returns (Finding)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace.unasked import launched_in
from ..trace.host import HostActivity
from ..trace.model import TraceModel
from ..trace.pycalls import BUILTIN, callers, frame_label, is_user_frame, library_call, third_party_frame
from ..trace.steps import step_at


@dataclass(frozen=True)
class KindSpec:
    """Everything the rest of the tool knows about one finding kind or idle cause; read from the
    registry (analyses/__init__.py), never spelled out elsewhere."""
    kind: str
    label: str                    # the verdict's words: "launch-bound"
    # Its cost is GPU idle time that attribution gives to it (an idle cause): the measured idle must
    # clear the significance bar too, and the timeline colours gaps with `color`.
    idle_cause: bool = False
    color: str | None = None
    # How the saving is estimated: "replay" (the graph replayed with the fix), "measured" (the fix
    # cannot be replayed from the trace: its measured cost is the upper bound), "idle_floor" (the
    # idle it caused is the estimate, the replay the top of the range), "upper_bound" (the replay is
    # the top of the range, 0 the bottom: the trace cannot show what replaces the removed work).
    estimate: str = "replay"
    # With estimate="upper_bound": why the replay is only the top of the range, in the report's words.
    caveat: str = ""
    # A note about the measurement, never a fix: ranked after every fix, kept out of the verdict.
    note: bool = False
    # A note is shown when it costs at least this share of a step (fixes: rank.MIN_SHARE).
    note_share: float = 0.05
    # A finding about what the trace is (a graph capture, not a steady-state step): when present, its
    # title is the verdict and fixes for the steady state are not offered.
    headline: bool = False
    # Kinds whose fixes must come first (syncs make a CUDA-graph capture fail): the fix plan puts them
    # before this one, and this finding names them.
    prerequisites: tuple[str, ...] = ()
    # A note whose cost is the profiler's own: rank sets it from the un-profiled step it settles on, so
    # the note and the summary give one figure.
    profiler_cost: bool = False
    # A fix must save at least this share of the median step to be ranked (None: rank.MIN_SHARE).
    min_share: float | None = None
    # How its cost per step is had where it is not a measurement but derived from one (a review read a
    # model's figure labelled "measured cost"): the report's words, e.g. "the FP32 GEMMs' time less ...".
    cost_basis: str = ""
    # Why a replayed saving may exceed the finding's own cost, in the report's words (a review read a sync
    # fix's 0.75 ms beside its 0.24 ms of stall as a saving past the idle).
    beyond_cost: str = ""


# Two reasons a replayed saving passes a finding's cost (KindSpec.beyond_cost).
RUNS_AHEAD = "with it gone the CPU runs ahead of the GPU again, so launch gaps hide behind GPU work as well"
KERNELS_GO = "the launches and gaps that went with the removed or shortened kernels go too"


@dataclass
class Finding:
    kind: str
    title: str
    # Measured from the trace: time this cause cost, median per full step and total over the trace (us).
    lost_per_step_us: float
    lost_total_us: float
    fix: str
    confidence: str                      # "high" | "medium" | "low"
    evidence: dict = field(default_factory=dict)
    # The fix as typed changes to the timeline (analyses/fixes.py), applied in order by the replay.
    fixes: tuple = ()
    # Part of the measured cost that is not GPU idle (compute waiting while only copies ran): the cap at
    # the step's idle time does not apply to it.
    beyond_idle_us: float = 0.0
    # Other ways to apply the fix that users take, each (stable key, what it is, its typed fixes): the
    # replay estimates each beside the fix as advised (a copy pinned but still waited for).
    alternatives: tuple[tuple[str, str, tuple], ...] = ()
    # Filled in by estimate/rank.py from the replay.
    estimated_savings_us: float = math.nan
    # The GPU work per step its replay takes away (kernels dropped, fused or shortened): a saving may pass the
    # step's idle by this much.
    gpu_removed_us: float = 0.0
    savings_bound_us: tuple[float, float] | None = None
    # Where the saving will likely land (us): the replay's range widened to the band that held 8 in 10 of
    # our measured fixes of the kind (estimate/likely.py); None for a kind we have not validated.
    likely_range_us: tuple[float, float] | None = None
    likely_basis: str = ""               # what it rests on, in words (or that the kind is not validated)
    estimate_note: str = ""
    # (the ranked fixes it needs first, what it adds once they are done: the plan's row, and every fix the
    # plan puts before it, which that row comes after), where it needs some: it is ranked by that, the
    # estimate above being what it would save alone.
    after_prerequisites: tuple[tuple[str, ...], float, tuple[str, ...]] | None = None
    # Where its kind is another's prerequisite (KindSpec.prerequisites): whether this finding is one here
    # (syncs only at the step's edges do not stop a CUDA graph of the work between them), and what must go
    # first, in a phrase ("": the title).
    is_prerequisite: bool = True
    as_prerequisite: str = ""
    # (key, what it is, estimated saving us, (low, high) us or None, likely (low, high) us or None) of each
    # alternative, from the replay.
    alternative_savings_us: tuple[tuple[str, str, float, tuple[float, float] | None,
                                        tuple[float, float] | None], ...] = ()
    # The verdict's words where this finding says more than its kind's (KindSpec.label): "" for the kind's.
    label: str = ""
    # Its work runs beside longer GPU work now, so alone it saves nothing (a loader in the training loop
    # behind a step of fp32 matmuls): it is offered to the fix plan after the ranked fixes, and reported
    # only where they shorten the GPU's work enough that it then pays (estimate/plan.py).
    hidden: bool = False


@dataclass
class Context:
    model: TraceModel
    host: HostActivity
    gaps: pd.DataFrame          # attributed gaps (attribution.attribute_gaps)
    per_step: pd.DataFrame      # idle us per step and cause
    full_steps: np.ndarray      # step numbers of complete steps (medians are over these)

    @property
    def median_step_us(self) -> float:
        s = self.model.steps
        full = s[s["step"].isin(self.full_steps)]
        return float(full["dur"].median()) if len(full) else float(s["dur"].median())

    def per_step_median(self, values: pd.Series) -> float:
        """Median over full steps of a per-step series (missing steps count as 0)."""
        v = values.reindex(self.full_steps).fillna(0.0)
        return float(v.median()) if len(v) else 0.0

    def step_of(self, ts: np.ndarray) -> np.ndarray:
        """Step number of each timestamp by the step windows (-1 outside every step)."""
        return self._step_at(ts, "start", "end")

    def cpu_step_of(self, ts: np.ndarray) -> np.ndarray:
        """Step number of each CPU timestamp by the ProfilerStep ranges themselves (-1 outside)."""
        return self._step_at(ts, "cpu_start", "cpu_end")

    def _step_at(self, ts: np.ndarray, start_col: str, end_col: str) -> np.ndarray:
        return step_at(self.model.steps, ts, start_col, end_col)

    def gpu_in_full_steps(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The program's GPU work in the full steps: not the work launched in what the program did not ask for
        (trace/unasked.py): torch.compile's autotuner's benchmark runs (a trace recompiling every step read 1,814
        kernels a step for the program's 93), cuDNN's trials while it searched its algorithms (a review found them
        read as 95% of a trace's layout conversions and as a sync's data-dependent kernels), autograd's NaN checks
        (anomaly detection's isnan/any kernels, read as fusable chains)."""
        rows = rows[np.isin(self.step_of(rows["ts"].to_numpy()), self.full_steps)]
        return rows[~launched_in(self.model, rows)]

    @property
    def n_full(self) -> int:
        return max(1, len(self.full_steps))


INSIDE = " (inside "      # user_frame's label of the library code a call went on into


def library_frame(source: str | None) -> str | None:
    """The library frame a user_frame label names as where the call went on to ("_sample(), def at
    transformers/generation/utils.py:2917"), or None."""
    return source.rsplit(INSIDE, 1)[1][:-1] if source and INSIDE in source else None


def user_frame(cpu: pd.DataFrame, row: int) -> str | None:
    """Where user code made the call: the innermost user Python frame running above a cpu row (not torch or
    the stdlib), and the built-in method it called when the trace has it: "Tensor.cpu() in step(),
    train.py:64". The profiler records each frame's first line (the `def`), never the calling line."""
    names, kinds = cpu["name"].to_numpy(), cpu["kind"].to_numpy()
    called = library = inner = None
    for q in _callers(cpu, row, kinds):
        if kinds[q] != "python":
            continue
        if is_user_frame(names[q]):
            called = library or called
            # (a review: BERT's mask check in transformers had been placed in the harness that called the model;
            # and transformers' generate() had one site for its per-token stopping check and the model's mask check)
            via = f"{INSIDE}{inner})" if inner and not (called and inner.startswith(called)) else ""
            return (f"{called} in {frame_label(names[q])}" if called else f"in {frame_label(names[q])}") + via
        inner = inner or third_party_frame(names[q])
        if BUILTIN.match(names[q]):
            called = frame_label(names[q])      # the outermost built-in below the frame: the user's call
        # ... unless the user called a library function that reaches it (clip_grad_norm_, not the
        # linalg_vector_norm() inside it).
        library = library_call(names[q]) or library
    return None


def user_frame_row(cpu: pd.DataFrame, row: int) -> int | None:
    """The cpu row of that frame (one row per call), or None."""
    names, kinds = cpu["name"].to_numpy(), cpu["kind"].to_numpy()
    return next((q for q in _callers(cpu, row, kinds) if kinds[q] == "python" and is_user_frame(names[q])), None)


def _callers(cpu: pd.DataFrame, row: int, kinds: np.ndarray):
    return callers(row, cpu["parent"].to_numpy(), kinds, cpu["ts"].to_numpy(), cpu["end"].to_numpy())


def top_op(cpu: pd.DataFrame, row: int) -> str:
    """The outermost op in the unbroken op chain above a runtime call (aten::item, not the memcpy)."""
    p = int(cpu["parent"].iat[row])
    t = int(cpu["top_op"].iat[p]) if p >= 0 else -1
    return str(cpu["name"].iat[t]) if t >= 0 else str(cpu["name"].iat[row])


def outermost_ops(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The full steps' outermost ops (cpu rows) in time order, and the step of every CPU row (a step's op sequence on
    a thread is then a slice of these)."""
    cpu = ctx.model.cpu
    ts = cpu["ts"].to_numpy()
    step_of = ctx.cpu_step_of(ts)
    top = np.flatnonzero((cpu["top_op"].to_numpy() == np.arange(len(cpu))) & (cpu["kind"] == "op").to_numpy()
                         & np.isin(step_of, ctx.full_steps))
    return top[np.argsort(ts[top], kind="stable")], step_of


def calls_in(cpu, spans: list[tuple[str, float, float]]) -> tuple[int, ...]:
    """The runtime calls (cpu rows) that start inside the spans (thread, start, end)."""
    runtime = np.flatnonzero((cpu["kind"] == "runtime").to_numpy())
    ts, thread = cpu["ts"].to_numpy()[runtime], cpu["thread"].to_numpy()[runtime]
    out: list[np.ndarray] = []
    for t in {t for t, _a, _b in spans}:
        rows = runtime[thread == t]
        at = ts[thread == t]
        order = np.argsort(at, kind="stable")
        rows, at = rows[order], at[order]
        for _t, a, b in (sp for sp in spans if sp[0] == t):
            out.append(rows[np.searchsorted(at, a, "left"):np.searchsorted(at, b, "left")])
    return tuple(int(i) for i in np.unique(np.concatenate(out))) if out else ()


def op_rows(cpu: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The op instance (its outermost op's row) each CPU row, a runtime call, is made under; -1 where it
    is under no op."""
    parent = cpu["parent"].to_numpy()[rows]
    return np.where(parent >= 0, cpu["top_op"].to_numpy()[np.maximum(parent, 0)], -1)


def top_ops(cpu: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """top_op() of many runtime calls at once."""
    rows = np.asarray(rows, dtype=np.int64)
    top = op_rows(cpu, rows)
    names = cpu["name"].to_numpy()
    return np.where(top >= 0, names[np.maximum(top, 0)], names[rows]).astype(str)
