"""Match collectives across ranks: one column per collective of the job, one row per rank.

A collective is known by its process group and its place in that group's issue order. Where every rank
recorded `Seq` (record_param_comms on newer PyTorch) that number is the place; otherwise it is (step,
index within the step): ProfilerStep numbers are the same on every rank of a job, so a collective
issued before one rank's window opened, or one rank's extra pre-window kernel, cannot shift the match.
Columns are then checked: same op and size on every rank, else a warning.

Everything is numpy over all (rank, collective) pairs at once: 4,096 ranks x 300 collectives is
1.2 M rows, one np.unique and a few scatters.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .summary import RankSummary

_SEQ_BIT = 1 << 51


@dataclass
class Matched:
    rows: list                  # the RankSummary of each row, sorted by rank
    pgs: list                   # global code tables
    ops: list
    dtypes: list
    col_pg: np.ndarray          # per column
    col_op: np.ndarray
    col_dtype: np.ndarray
    col_nelems: np.ndarray
    col_out_nelems: np.ndarray
    col_group: np.ndarray
    col_step: np.ndarray
    start: np.ndarray           # [rows, columns], each rank's own clock (us); NaN where absent
    end: np.ndarray
    present: np.ndarray         # [rows, columns] the rank issued it
    complete: np.ndarray        # [columns] every rank of its group has it, with times
    warnings: list = field(default_factory=list)
    cells: tuple = ()           # (row, column, position in that rank's own arrays) of every match

    @property
    def n_rows(self) -> int:
        return len(self.rows)


def _global(tables: list[list[str]]) -> tuple[list[str], list[np.ndarray]]:
    names = sorted({n for t in tables for n in t})
    where = {n: i for i, n in enumerate(names)}
    return names, [np.array([where[n] for n in t], dtype=np.int64) for t in tables]


def match(rows: list[RankSummary]) -> Matched:
    pgs, pg_maps = _global([r.pgs for r in rows])
    ops, op_maps = _global([r.ops for r in rows])
    dtypes, dt_maps = _global([r.dtypes for r in rows])
    n = np.array([r.n_coll for r in rows], dtype=np.int64)
    row = np.repeat(np.arange(len(rows)), n)

    def cat(name, maps=None):
        parts = [r.coll[name] if maps is None else maps[i][r.coll[name]] if len(r.coll[name]) else
                 np.zeros(0, dtype=np.int64) for i, r in enumerate(rows)]
        return np.concatenate(parts) if parts else np.zeros(0)

    pg, op, dt = cat("pg", pg_maps), cat("op", op_maps), cat("dtype", dt_maps)
    seq, step, idx = cat("seq"), cat("step"), cat("idx")
    warnings: list[str] = []
    # Per process group: Seq when every rank has it for every collective of the group.
    seq_ok = np.bincount(pg, weights=seq < 0, minlength=len(pgs)) == 0
    by_seq = seq_ok[pg] if len(pg) else np.zeros(0, dtype=bool)
    keep = by_seq | (step >= 0)
    if (~keep).any():
        warnings.append(f"{int((~keep).sum())} collective(s) issued outside any step window were not matched")
    key = np.where(by_seq, _SEQ_BIT | np.maximum(seq, 0), ((step + 1) << 24) | np.minimum(idx, (1 << 24) - 1))
    key = (pg << 52) | key
    key, row, sel = key[keep], row[keep], np.flatnonzero(keep)
    # Columns in key order (group, then place); a hash factorize, then a sort of the few distinct keys.
    codes, uniq = pd.factorize(key)
    order = np.argsort(uniq, kind="stable")
    rank_of = np.empty(len(uniq), dtype=np.int64)
    rank_of[order] = np.arange(len(uniq))
    inv = rank_of[codes]
    R, C = len(rows), len(uniq)

    def scatter(values, fill=np.nan, dtype=float):
        out = np.full((R, C), fill, dtype=dtype)
        out[row, inv] = values[sel]
        return out

    start, end = scatter(cat("start")), scatter(cat("end"))
    present = np.zeros((R, C), dtype=bool)
    present[row, inv] = True
    if len(row) != int(present.sum()):
        warnings.append(f"{len(row) - int(present.sum())} collective(s) share a group and place with another "
                        "on the same rank (coalesced?); one of each was kept")
    # Each column's attributes from the first rank that has it.
    first = np.full((R, C), -1, dtype=np.int64)
    first[row, inv] = sel
    src = first[np.argmax(present, axis=0), np.arange(C)]
    nel, onel, grp = cat("nelems"), cat("out_nelems"), cat("group")
    col = dict(col_pg=pg[src], col_op=op[src], col_dtype=dt[src], col_nelems=nel[src],
               col_out_nelems=onel[src], col_group=grp[src], col_step=step[src])
    bad = (op[sel] != col["col_op"][inv]) | (nel[sel] != col["col_nelems"][inv])
    if bad.any():
        warnings.append(f"{int(bad.sum())} matched collective(s) differ in op or size between ranks: the ranks "
                        "may not have recorded the same steps")
    # Which ranks take part in each group: those that issued anything in it.
    member = np.zeros((R, len(pgs)), dtype=bool)
    member[row, pg[sel]] = True
    expected = member.sum(axis=0)[col["col_pg"]]
    col["col_group"] = np.where(col["col_group"] > 0, col["col_group"], expected)
    timed = present & np.isfinite(start) & np.isfinite(end)
    complete = (timed.sum(axis=0) == expected) & (present.sum(axis=0) == expected)
    offset = np.concatenate([[0], np.cumsum(n)[:-1]])
    return Matched(rows=rows, pgs=pgs, ops=ops, dtypes=dtypes, start=start, end=end, present=present,
                   complete=complete, warnings=warnings, cells=(row, inv, sel - offset[row]), **col)
