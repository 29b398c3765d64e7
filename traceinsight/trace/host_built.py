"""Tensors a step builds on the host and copies to the GPU: a causal mask made with torch.full(...).triu(1), rotary
tables from torch.arange, a detection head's grids from torch.meshgrid, noise from torch.randn, each then
`.to(x.device)`. Each copy comes from pageable memory and a blocking `.to()` synchronises the stream after it (the CPU
waits for all the GPU's queued work), and the ops that build the tensor run on the CPU, several on its thread pool.
Making the tensor on the device (`device=`) or once (a buffer, a cache) removes all of it.

What the trace shows: on one thread, a run of outermost ops that launch nothing (CPU tensors), one of them a factory op
(full, zeros, ones, arange, linspace, eye, rand*, ...), ending in an op whose only GPU work is copies to the
device. The run goes on across such a copy (the sin table after the cos table's copy, built from the same arange) and
ends at an op that launches anything else. Data copies (a batch from the DataLoader, torch.tensor(python_list),
torch.from_numpy) have no factory op before them, or run inside the input pipeline's ranges, and are not counted. (Written for the fifty-third
held-out set, registered before it was recorded: sample_traces/matrix/README.md.)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .host import FEEDS_GPU, INPUT_NAMES
from .nesting import innermost_marked
from .steps import step_at

FACTORY = (r"^aten::(full|zeros|ones|arange|linspace|logspace|eye|rand|randn|randint|randperm|normal|tril_indices"
           r"|triu_indices|scalar_tensor)$")
# (Not aten::empty: torch.tensor(python_list) runs an outermost one, then lift_fresh, and an expert review found an
# MLM's masked ids made that way in the main thread, holdout20_mlm_masking_main, read as a constant. A small literal,
# torch.tensor(anchors), inside a run that a factory op started still counts: the detection head's anchor grid.)
STEADY_SHARE = 0.5            # of the full steps: built in this many is what the program does each step
COLUMNS = ["thread", "start", "end", "copy_row", "bytes", "factories", "step"]


def copies(model) -> pd.DataFrame:
    """One row per copy of a host-built tensor: thread, start (the first op of the run that built it), end (the copy
    op's), copy_row (the copy op's cpu row), bytes copied, factories (the run's factory ops, by name), step."""
    def compute():
        cpu, gpu = model.cpu, model.gpu
        if cpu.empty or gpu.empty or "top_op" not in cpu or "copy_dir" not in gpu:
            return pd.DataFrame(columns=COLUMNS)
        n = len(cpu)
        top = cpu["top_op"].to_numpy()
        is_op = (cpu["kind"] == "op").to_numpy()
        lr = gpu["launcher"].to_numpy()
        ok = lr >= 0
        g_top = np.where(ok, top[np.maximum(lr, 0)], -1)
        h2d = ((gpu["kind"] == "memcpy") & (gpu["copy_dir"] == "HtoD")).to_numpy()
        other = np.zeros(n, dtype=bool)
        other[g_top[(g_top >= 0) & ~h2d]] = True
        nbytes = np.zeros(n)
        np.add.at(nbytes, g_top[(g_top >= 0) & h2d], gpu["bytes"].fillna(0.0).to_numpy(dtype=float)[(g_top >= 0) & h2d])
        copy_op = (nbytes > 0) & ~other
        # Runtime calls outside any op that put work on the GPU end a run too (a bare launch, a graph replay).
        rk = cpu["rkind"].to_numpy() if "rkind" in cpu else np.array([""] * n, dtype=object)
        bare_feed = (top < 0) & np.isin(rk, FEEDS_GPU)
        launching = other | bare_feed | (np.isin(rk, FEEDS_GPU) & (top >= 0) & ~copy_op[np.maximum(top, 0)])
        launching_top = np.zeros(n, dtype=bool)
        launching_top[top[(top >= 0) & launching]] = True
        if not copy_op.any():
            return pd.DataFrame(columns=COLUMNS)
        factory = is_op & model.cpu_match(FACTORY)
        # (what the input pipeline builds is data, pinning's to fix)
        in_input = innermost_marked(cpu["parent"].to_numpy(), cpu["depth"].to_numpy(),
                                    model.cpu_match(INPUT_NAMES)) >= 0
        ts, end = cpu["ts"].to_numpy(dtype=float), cpu["end"].to_numpy(dtype=float)
        names = cpu["name"].to_numpy()
        heads = (is_op & (top == np.arange(n))) | bare_feed
        out = []
        for th, rows in model.thread_rows().items():
            r = rows[heads[rows]]
            r = r[np.argsort(ts[r], kind="stable")]
            cp = copy_op[r]
            if not cp.any():
                continue
            # (A loop over the copies only, each finding the run before it by search: a long trace has millions of
            # outermost ops and few copies to the device.)
            brk = (bare_feed[r] | launching_top[r] | in_input[r]) & ~cp
            bounds = np.flatnonzero(cp | brk)
            made_before = np.concatenate(([0], np.cumsum(factory[r])))
            built_after: dict[int, bool] = {}      # a copy's position -> the run goes on past it
            for p in np.flatnonzero(cp).tolist():
                j = int(np.searchsorted(bounds, p)) - 1
                b = int(bounds[j]) if j >= 0 else -1
                # (the run goes on across a counted copy: the next table may reuse this one's arange)
                built = b >= 0 and bool(cp[b]) and built_after.get(b, False)
                run = r[b + 1:p]
                made = [str(x) for x in names[run[factory[run]]]] if made_before[p] > made_before[b + 1] else []
                counted = bool(made or built) and not in_input[r[p]]
                if counted:
                    out.append((th, ts[run[0]] if len(run) else ts[r[p]], end[r[p]], int(r[p]), nbytes[r[p]],
                                tuple(made)))
                built_after[p] = counted or built
        if not out:
            return pd.DataFrame(columns=COLUMNS)
        df = pd.DataFrame(out, columns=COLUMNS[:-1])
        df["step"] = (step_at(model.steps, df["start"].to_numpy(), "cpu_start", "cpu_end") if len(model.steps)
                      else -1)
        return df.sort_values("start", kind="stable").reset_index(drop=True)
    return model.memo("host_built_copies", compute)


def steady(model, full_steps) -> bool:
    """Host-built tensors were copied in most of these full steps, and there are two or more: one window (no step
    markers) cannot show that a copy repeats (a100_alexnet's window builds its model on the CPU, then moves the
    weights to the GPU once)."""
    c = copies(model)
    full = set(int(x) for x in full_steps)
    return len(full) >= 2 and len(set(c["step"].astype(int)) & full) >= STEADY_SHARE * len(full)


def copy_ops(model, full_steps) -> np.ndarray:
    """The cpu rows of the ops that copy host-built tensors, where the program builds them each step (empty
    otherwise): pageable_memcpy leaves these copies to host_built_tensors, whose fix is not pinning."""
    if not steady(model, full_steps):
        return np.zeros(0, dtype=np.int64)
    return copies(model)["copy_row"].to_numpy(dtype=np.int64)


def spans(model) -> tuple[tuple[str, float, float], ...]:
    """(thread, start, end) of each build-and-copy: what making the tensors once takes out of the step."""
    c = copies(model)
    return tuple((str(th), float(a), float(b)) for th, a, b in zip(c["thread"], c["start"], c["end"]))
