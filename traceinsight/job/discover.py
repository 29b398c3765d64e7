"""Which files make a job: group rank traces by the world they share (trace.load.expand lists the files).

Two traces belong to one job when their distributedInfo agrees (world_size, backend, process groups)
and their ranks are distinct; the rank comes from distributedInfo, else from the file name (`rank3`,
`rank_3`, `..._of2` for the world). Files of different worlds, or repeating a rank, are separate jobs,
with a warning. A job with ranks missing is still analyzed, with a note naming them.

peek() reads only the head of a file (distributedInfo is written before the events), so deciding
whether the input is a job costs a few KB per file; grouping itself uses the ranks' summaries.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..trace.reader import head

_HEAD = 64 << 10
_DIST = re.compile(rb'"distributedInfo"\s*:\s*\{(.{0,4000}?)\}', re.S)
_FIELD = {k: re.compile(rb'"%s"\s*:\s*(-?\d+)' % k.encode()) for k in ("rank", "world_size")}
_RANK_NAME = re.compile(r"rank[_-]?(\d+)", re.I)
_WORLD_NAME = re.compile(r"_of_?(\d+)", re.I)


def peek(path) -> dict:
    """rank / world_size from the head of the file (distributedInfo), else from its name."""
    info = {"rank": None, "world_size": None}
    text = head(path, _HEAD)
    m = _DIST.search(text)
    if m:
        for k, rx in _FIELD.items():
            f = rx.search(m.group(1))
            info[k] = int(f.group(1)) if f else None
    rank, world = name_identity(path)
    info["rank"] = rank if info["rank"] is None else info["rank"]
    info["world_size"] = world if info["world_size"] is None else info["world_size"]
    return info


def name_identity(path) -> tuple[int | None, int | None]:
    """(rank, world size) as a file name states them: `rank3`, `rank_3`, `..._of8`."""
    name = Path(path).name
    r, w = _RANK_NAME.search(name), _WORLD_NAME.search(name)
    return (int(r.group(1)) if r else None), (int(w.group(1)) if w else None)


def looks_like_job(paths) -> bool:
    """True when the files are ranks of a distributed run (the CLI's switch to job mode)."""
    infos = [peek(p) for p in paths]
    return any((i["world_size"] or 0) > 1 for i in infos) or sum(i["rank"] is not None for i in infos) > 1


@dataclass
class Job:
    summaries: list                 # RankSummary, sorted by rank
    world_size: int | None
    missing_ranks: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def _key(s) -> tuple:
    pgs = tuple(sorted((str(p.get("name")), p.get("size")) for p in s.pg_config))
    return (s.world_size, s.backend, pgs)


def group(summaries) -> tuple[list[Job], list[str]]:
    """Jobs (largest first) and warnings about how the files were split."""
    warnings: list[str] = []
    by_key: dict = {}
    broken = [s for s in summaries if s.error]
    for s in summaries:
        if not s.error:
            by_key.setdefault(_key(s), []).append(s)
    parts: list[list] = []
    for members in by_key.values():
        parts += _split_repeats(members, warnings)
    # An unreadable file joins the job of its directory (its rank is missing there), else stands alone.
    for s in broken:
        home = next((p for p in parts if Path(p[0].path).parent == Path(s.path).parent), None)
        if home is not None:
            home.append(s)
        else:
            parts.append([s])
    jobs = [_job(p) for p in parts]
    jobs.sort(key=lambda j: (-len(j.summaries), j.summaries[0].path))
    if len(jobs) > 1:
        desc = "; ".join(f"world {j.world_size or '?'}: {len(j.summaries)} file(s) from "
                         f"{Path(j.summaries[0].path).parent}" for j in jobs)
        warnings.append(f"the input holds {len(jobs)} different jobs, analyzed separately ({desc})")
    return jobs, warnings


def _split_repeats(members: list, warnings: list) -> list[list]:
    """Files of one world that repeat a rank are different runs: by directory, else in file order."""
    ranks = [s.rank for s in members]
    if len(set(ranks)) == len(ranks):
        return [members]
    by_dir: dict = {}
    for s in members:
        by_dir.setdefault(str(Path(s.path).parent), []).append(s)
    out = []
    for d, ms in sorted(by_dir.items()):
        runs: list[list] = []
        for s in sorted(ms, key=lambda s: s.path):
            for run in runs:
                if s.rank not in {x.rank for x in run}:
                    run.append(s)
                    break
            else:
                runs.append([s])
        if len(runs) > 1:
            warnings.append(f"{d}: rank(s) repeat within one directory; split into {len(runs)} runs by file order")
        out += runs
    return out


def _job(members: list) -> Job:
    members = sorted(members, key=lambda s: (s.rank, s.path))
    world = next((s.world_size for s in members if s.world_size), None)
    present = {s.rank for s in members if s.error is None and s.rank >= 0}
    notes = []
    if world is None:
        world = max(present) + 1 if present else len(members)
        notes.append("no distributedInfo: world size taken from the ranks in the file names")
    missing = sorted(set(range(world)) - present)
    if missing:
        shown = ", ".join(map(str, missing[:20])) + (" ..." if len(missing) > 20 else "")
        notes.append(f"{len(missing)} of {world} ranks missing (rank {shown}): cross-rank figures cover the "
                     f"{len(present)} rank(s) present")
    for s in members:
        if s.error:
            notes.append(f"rank {s.rank if s.rank >= 0 else '?'} unreadable: {s.error}")
        elif s.rank_source != "distributedInfo":
            notes.append(f"{Path(s.path).name}: rank {s.rank} from the file name (no distributedInfo)")
    return Job(summaries=members, world_size=world, missing_ranks=missing, notes=notes)
