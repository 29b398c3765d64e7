"""Timeline data for one step: CPU threads and GPU streams on one time axis, GPU idle gaps by cause.

Built here, into the report document; drawn in the browser by traceinsight/static/timeline.js (no
libraries, canvas), which render/html.py and render/diff_view.py inline (render/assets.py).

API (stable; bump VERSION on an incompatible change)
----------------------------------------------------
timeline_data(analysis, step=None, max_items=MAX_ITEMS) -> dict
    `analysis` is a report.analyze.Analysis. `step` is a step number (the `step` column of
    model.steps); None picks representative_step(analysis) (the full step closest to
    the median), or the first window when there is none. Returns a JSON-serializable dict:

    {
      "version": 1,
      "trace": "name.json.gz",           # file name only (no directory), untrusted text
      "rank": 0,
      "step": 5,                         # step number, or None when the trace had no steps
      "step_start_us": 222503.1,         # step start, us from the trace start
      "duration_us": 219727.0,           # step length; the natural view is [0, duration_us]
      "classes": ["op", ...],            # item class names (CLASSES), indexed by item[3]
      "palette": {"op": "#8fa9c9", ...}, # CSS color per class
      "labels": {"idle:launch_overhead": "idle: launch overhead", ...},  # legend text per class
      "names": ["aten::mm", ...],        # string table, indexed by item[2]; untrusted text
      "rows": [                          # top to bottom
        {"id": "cpu:123/456:ops", "group": "cpu", "label": "pt_main_thread 456 ops",
         "items": [[start_us, dur_us, name_id, class_id, n_events(, link)], ...]},   # sorted by start
        {"id": "idle:0", "group": "idle", "device": 0, "label": "GPU 0 idle (by cause)", ...},
        {"id": "gpu:0/7", "group": "gpu", "device": 0, "stream": 7, "label": "GPU 0 stream 7", ...},
      ],
      "items_total": 12345,              # items in the step before capping
      "items_kept": 12000,               # items in "rows" (merged ones count once)
      "merge_resolution_us": 0.0,        # > 0: items shorter than this were merged per ~bin
      "dropped": 0                       # items dropped after merging (cap still exceeded)
    }

    Item times are us relative to the step start (an item may start before 0 or end after
    duration_us: it overlaps the step). The optional sixth element `link` ties a runtime call to the
    GPU work it launched: the call and its kernels (or copies) carry the same number (the call's row in
    the model's CPU table); timeline.js draws the launch -> kernel arrow on hover. n_events > 1 marks a merged item: that many short events
    of one class on one row within merge_resolution_us of each other; its name says so.
    Idle items are the attributed GPU idle gaps (Analysis.gaps) colored by their largest cause
    (class "idle:<cause>"); their name lists the split by cause.

dumps_for_script and static_asset (render/assets.py) put it into a page.

Embedding (what timeline.js expects):
    <div class="ti-timeline" data-timeline-src="tl-0" data-timeline-group="cmp"></div>
    <script type="application/json" id="tl-0">{{ dumps_for_script(timeline_data(a)) }}</script>
    ...  <script>{{ static_asset("timeline.js") }}</script>
    timeline.js draws every .ti-timeline on DOMContentLoaded (TraceInsightTimeline.renderAll());
    timelines with the same data-timeline-group share (and sync) one time axis. See timeline.js.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..analyses import CAUSE_COLORS, CAUSES
from ..trace.facts import is_collective
from ..trace.steps import STEP_SOURCES
from .analyze import representative_step

VERSION = 1
MAX_ITEMS = 20_000
# One HTML page stays well under 5 MB: timeline items per page, shared by its traces.
ITEMS_PER_PAGE = 60_000
MIN_ITEMS_PER_TRACE = 2_000


def items_per_trace(n_traces: int) -> int:
    """The timeline item budget of each trace when n_traces share one page."""
    return max(MIN_ITEMS_PER_TRACE, min(MAX_ITEMS, ITEMS_PER_PAGE // max(1, n_traces)))
NAME_CHARS = 300

BUSY_COLOR = "#3f8f4f"

CLASSES = ["annotation", "op", "runtime_launch", "runtime_sync", "runtime_memcpy", "runtime_other",
           "kernel", "nccl", "memcpy", "memset"] + [f"idle:{c}" for c in CAUSES]
PALETTE = {
    "annotation": "#b9a6d9",
    "op": "#8fa9c9",
    "runtime_launch": "#7fbf7f",
    "runtime_sync": "#e05a5a",
    "runtime_memcpy": "#e0b040",
    "runtime_other": "#b0b0b0",
    "kernel": BUSY_COLOR,
    "nccl": "#2a7f9e",
    "memcpy": "#d9a400",
    "memset": "#a08050",
    **{f"idle:{c}": col for c, col in CAUSE_COLORS.items()},
}
LABELS = {
    "annotation": "CPU: user annotation",
    "op": "CPU: outermost op",
    "runtime_launch": "CPU: kernel launch call",
    "runtime_sync": "CPU: synchronizing call",
    "runtime_memcpy": "CPU: memcpy call",
    "runtime_other": "CPU: other runtime call",
    "kernel": "GPU: kernel",
    "nccl": "GPU: collective (NCCL) kernel",
    "memcpy": "GPU: memcpy",
    "memset": "GPU: memset",
    **{f"idle:{c}": f"GPU idle: {c.replace('_', ' ')}" for c in CAUSES},
}
_CLS = {c: i for i, c in enumerate(CLASSES)}


def _fmt_us(us: float) -> str:
    if abs(us) >= 1000:
        return f"{us / 1000:.3f} ms"
    return f"{us:.1f} us"


class _Names:
    def __init__(self):
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def ids(self, names) -> np.ndarray:
        out = np.empty(len(names), dtype=np.int64)
        for i, n in enumerate(names):
            n = str(n)[:NAME_CHARS]
            k = self.index.get(n)
            if k is None:
                k = self.index[n] = len(self.table)
                self.table.append(n)
            out[i] = k
        return out


def _pick_step(analysis, step):
    steps = analysis.model.steps
    if step is None:
        step = representative_step(analysis)
    if step is None or steps.empty:
        if steps.empty:
            return None, 0.0, 0.0
        r = steps.iloc[0]
    else:
        sel = steps[steps["step"] == step]
        if sel.empty:
            raise ValueError(f"no step {step} in the trace (steps: {steps['step'].tolist()[:20]})")
        r = sel.iloc[0]
    has_steps = analysis.model.step_source in STEP_SOURCES
    return (int(r["step"]) if has_steps else None), float(r["start"]), float(r["end"])


_THREAD_NAME = re.compile(r"^thread (-?\d+) \((.+)\)$")


def _thread_label(model, pid: str, tid: str) -> str:
    """Short row label: Kineto's "thread 123 (pt_main_thread)" becomes "pt_main_thread 123"."""
    for k, v in model.thread_names.items():
        if str(k[0]) == pid and str(k[1]) == tid and v:
            v = str(v).strip()
            m = _THREAD_NAME.match(v)
            return f"{m.group(2)} {m.group(1)}" if m else v
    return f"thread {tid}"


def _frame(s, d, name_ids, cls_ids, link=None) -> pd.DataFrame:
    return pd.DataFrame({"s": np.asarray(s, dtype=float), "d": np.asarray(d, dtype=float),
                         "name": np.asarray(name_ids, dtype=np.int64),
                         "cls": np.asarray(cls_ids, dtype=np.int64),
                         "n": np.ones(len(s), dtype=np.int64),
                         "link": np.full(len(s), -1, dtype=np.int64) if link is None
                         else np.asarray(link, dtype=np.int64)})


def _cpu_rows(model, w0, w1, names: _Names) -> list[dict]:
    cpu = model.cpu
    if cpu.empty:
        return []
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    inwin = (end > w0) & (ts < w1)
    kind, rkind = cpu["kind"], cpu["rkind"]
    idx = np.arange(len(cpu))
    is_top_op = (kind == "op").to_numpy() & (cpu["top_op"].to_numpy() == idx)
    is_ann = (kind == "annotation").to_numpy() & ~cpu["is_step"].to_numpy()
    is_rt = (kind == "runtime").to_numpy()
    rt_cls = np.select([(rkind == "launch").to_numpy(), (rkind == "sync").to_numpy(),
                        rkind.isin(["memcpy", "memset"]).to_numpy()],
                       [_CLS["runtime_launch"], _CLS["runtime_sync"], _CLS["runtime_memcpy"]],
                       _CLS["runtime_other"])
    is_step = cpu["is_step"].to_numpy()
    th_col = cpu["thread"].to_numpy()
    shown = inwin & (is_top_op | is_ann | is_rt)
    # The thread with the step annotations (the training loop) first, then by activity. It is shown even
    # where it recorded nothing else in the step (HTA's CPU-only gloo rank: its collectives ran on other
    # threads): its row then holds the step range itself, so the loop's thread is not missing from the view.
    main = set(cpu.loc[inwin & is_step, "thread"])
    bare = {th for th in main if not shown[th_col == th].any()}
    threads = cpu.loc[shown | (inwin & is_step & np.isin(th_col, list(bare))), "thread"]
    if threads.empty:
        return []
    counts = threads.value_counts()
    order = sorted(counts.index, key=lambda t: (0 if t in main else 1, -counts[t], t))
    rows = []
    for th in order:
        pid, tid = th.split("/", 1)
        label = _thread_label(model, pid, tid)
        on = inwin & (th_col == th)
        if th in bare:
            r = np.flatnonzero(on & is_step)
            df = _frame(ts[r] - w0, cpu["dur"].to_numpy()[r], names.ids(cpu["name"].to_numpy()[r]),
                        np.full(len(r), _CLS["annotation"]))
            alone = not (on & ~is_step).any()
            rows.append({"id": f"cpu:{th}:step", "group": "cpu",
                         "label": f"{label} step" + (" (no other event recorded in it)" if alone else ""), "df": df})
            continue
        for lane, sel, cls in (("annotations", on & is_ann, np.full(len(cpu), _CLS["annotation"])),
                               ("ops", on & is_top_op, np.full(len(cpu), _CLS["op"])),
                               ("runtime", on & is_rt, rt_cls)):
            r = np.flatnonzero(sel)
            if not len(r):
                continue
            # A runtime call's link is its own row: the GPU work it launched carries the same number.
            df = _frame(ts[r] - w0, cpu["dur"].to_numpy()[r], names.ids(cpu["name"].to_numpy()[r]), cls[r],
                        link=r if lane == "runtime" else None)
            rows.append({"id": f"cpu:{th}:{lane}", "group": "cpu", "label": f"{label} {lane}", "df": df})
    return rows


def _gpu_rows(model, gaps, w0, w1, step, names: _Names) -> list[dict]:
    gpu = model.gpu
    if gpu.empty:
        return []
    ts, end = gpu["ts"].to_numpy(), gpu["end"].to_numpy()
    inwin = (end > w0) & (ts < w1)
    g = gpu[inwin]
    coll = is_collective(model)[inwin] if len(g) else np.zeros(0, dtype=bool)
    kind = g["kind"].to_numpy()
    cls = np.where(kind == "memcpy", _CLS["memcpy"], np.where(kind == "memset", _CLS["memset"],
                   np.where(coll, _CLS["nccl"], _CLS["kernel"])))
    rows = []
    devices = sorted(int(d) for d in gpu["device"].unique())
    for dev in devices:
        # Idle row first: right under the CPU rows that (failed to) feed it.
        gp = gaps
        if len(gp):
            gp = gp[(gp["device"] == dev) & (gp["end"] > w0) & (gp["start"] < w1)]
            if step is not None and "step" in gp:
                gp = gp[gp["step"] == step]
        if len(gp):
            causes = [c for c in CAUSES if c in gp.columns]
            vals = gp[causes].to_numpy(dtype=float) if causes else np.zeros((len(gp), 0))
            top = np.argmax(vals, axis=1) if causes else np.zeros(len(gp), dtype=int)
            has = vals.max(axis=1) > 0 if causes else np.zeros(len(gp), dtype=bool)
            cause = [causes[t] if h else CAUSES[-1] for t, h in zip(top, has)]
            labels = []
            for dur, row in zip(gp["dur"].to_numpy(), vals):
                parts = sorted(((v, c) for v, c in zip(row, causes) if v > 0.0005), reverse=True)
                split = ", ".join(f"{c} {_fmt_us(v)}" for v, c in parts) or CAUSES[-1]
                labels.append(f"GPU idle {_fmt_us(dur)}: {split}")
            df = _frame(gp["start"].to_numpy() - w0, gp["dur"].to_numpy(), names.ids(labels),
                        [_CLS[f"idle:{c}"] for c in cause])
            rows.append({"id": f"idle:{dev}", "group": "idle", "device": dev,
                         "label": f"GPU {dev} idle (by cause)", "df": df})
        gd = g["device"].to_numpy() == dev
        streams = g[gd].groupby("stream")["dur"].sum().sort_values(ascending=False)
        for stream in streams.index:
            sel = gd & (g["stream"].to_numpy() == stream)
            df = _frame(g["ts"].to_numpy()[sel] - w0, g["dur"].to_numpy()[sel],
                        names.ids(g["name"].to_numpy()[sel]), cls[sel], link=g["launcher"].to_numpy()[sel])
            rows.append({"id": f"gpu:{dev}/{int(stream)}", "group": "gpu", "device": dev,
                         "stream": int(stream), "label": f"GPU {dev} stream {int(stream)}", "df": df})
    return rows


def _merge(df: pd.DataFrame, res: float, names: _Names, table: list[str]) -> pd.DataFrame:
    """Merge items shorter than `res` that fall in the same `res`-wide bin and class."""
    small = df["d"].to_numpy() < res
    if small.sum() < 2:
        return df
    big = df[~small]
    sm = df[small].assign(bin=np.floor(df["s"].to_numpy()[small] / res).astype(np.int64),
                          e=df["s"].to_numpy()[small] + df["d"].to_numpy()[small])
    agg = sm.groupby(["bin", "cls"], sort=False).agg(s=("s", "min"), e=("e", "max"), busy=("d", "sum"),
                                                     n=("n", "sum"), first=("name", "first"),
                                                     link=("link", "first"))
    single = agg["n"] == 1
    merged_names = [
        int(f) if one else int(names.ids([f"{n} events merged ({_fmt_us(b)} busy), first: {table[int(f)]}"])[0])
        for f, n, b, one in zip(agg["first"], agg["n"], agg["busy"], single)]
    out = pd.DataFrame({"s": agg["s"].to_numpy(), "d": (agg["e"] - agg["s"]).to_numpy(),
                        "name": np.asarray(merged_names, dtype=np.int64),
                        "cls": agg.index.get_level_values("cls").to_numpy(), "n": agg["n"].to_numpy(),
                        "link": np.where(single, agg["link"].to_numpy(), -1)})
    return pd.concat([big, out], ignore_index=True)


def timeline_data(analysis, step=None, max_items: int = MAX_ITEMS) -> dict:
    """See the module docstring."""
    model = analysis.model
    step, w0, w1 = _pick_step(analysis, step)
    names = _Names()
    rows = _cpu_rows(model, w0, w1, names) + _gpu_rows(model, analysis.gaps, w0, w1, step, names)
    total = sum(len(r["df"]) for r in rows)
    dur = max(w1 - w0, 1e-3)
    res = 0.0
    if total > max_items:
        res = dur / 16000
        merged = rows
        while True:
            merged = [dict(r, df=_merge(r["df"], res, names, names.table)) for r in rows]
            if sum(len(r["df"]) for r in merged) <= max_items or res >= dur:
                break
            res *= 2
        rows = merged
    kept = sum(len(r["df"]) for r in rows)
    dropped = 0
    if kept > max_items:  # pathological: keep the longest items
        dlist = pd.concat([r["df"]["d"] for r in rows], ignore_index=True)
        cut = float(dlist.nlargest(max_items).min())
        new = []
        for r in rows:
            df = r["df"]
            new.append(dict(r, df=df[df["d"] >= cut]))
        rows = new
        dropped = kept - sum(len(r["df"]) for r in rows)
        kept -= dropped
    # Only names still referenced, renumbered in first-use order (small, deterministic output).
    used: dict[int, int] = {}
    out_rows = []
    for r in rows:
        df = r["df"].sort_values(["s", "d"], kind="stable")
        items = []
        for s, d, nm, c, n, ln in zip(df["s"].to_numpy(), df["d"].to_numpy(), df["name"].to_numpy(),
                                      df["cls"].to_numpy(), df["n"].to_numpy(), df["link"].to_numpy()):
            k = used.setdefault(int(nm), len(used))
            items.append([_r(s), _r(d), k, int(c), int(n)] + ([int(ln)] if ln >= 0 else []))
        row = {k: v for k, v in r.items() if k != "df"}
        row["items"] = items
        out_rows.append(row)
    table = [""] * len(used)
    for old, new in used.items():
        table[new] = names.table[old]
    return {
        "version": VERSION,
        "trace": Path(str(model.path)).name,
        "rank": int(model.rank),
        "step": step,
        "step_start_us": _r(w0),
        "duration_us": _r(w1 - w0),
        "classes": list(CLASSES),
        "palette": dict(PALETTE),
        "labels": dict(LABELS),
        "names": table,
        "rows": out_rows,
        "items_total": int(total),
        "items_kept": int(kept),
        "merge_resolution_us": _r(res),
        "dropped": int(dropped),
    }


def _r(x: float) -> float:
    x = float(x)
    if not math.isfinite(x):
        return 0.0
    v = round(x, 3)
    return int(v) if v == int(v) else v
