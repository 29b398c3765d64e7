"""Multi-rank ("job") analysis: one report for N rank traces of a distributed run.

    analyze_jobs(paths, engine="local", workers=None, address=None, steps=None, full_ranks=()) -> [job block]
    analyze_job(...) -> job block (the input must hold one job)

Phase 1 fans one small task per rank out on the engine (rank_task.summarize: a path in, a
RankSummary out); the driver groups the ranks into jobs (discover), matches their collectives (match),
aligns their clocks (clock) and computes the cross-rank figures (analysis). Phase 2 runs the full
single-rank analysis for the straggler and the median rank (and --full-ranks) on the same engine.
The block is plain JSON data with sorted lists and rounded numbers: any engine gives the same bytes.
"""
from __future__ import annotations


import numpy as np

from ..errors import TraceError, UsageError
from ..trace.load import expand
from . import discover

CAUSE_TEXT = {
    "host-bound": "host code outside any profiled op (Python between ops, CPU work that launches nothing)",
    "data-loading": "the DataLoader (waiting for its next batch)",
    "slower-kernels": "GPU compute kernels (compared by name and input shapes)",
    "slower-cpu-ops": "traced CPU ops (their dispatch, or on a CPU-only job the compute itself; the profiler "
                      "slows their dispatch too, so part of the lag may be its)",
}
CAUSE_FIX = {
    "host-bound": "Find the extra host work on that rank (record it with with_stack=True) and remove, defer or "
                  "spread it; check the host for other load (CPU contention, throttling).",
    "data-loading": "Feed that rank faster: more DataLoader workers, pin_memory, prefetch, and check its storage "
                    "and preprocessing (uneven shards or sample sizes).",
    "slower-kernels": "Compare that GPU with the others (clocks, thermal throttling, ECC, PCIe/NVLink) and check the "
                      "work split: uneven sequence lengths or experts make uneven kernels.",
    "slower-cpu-ops": "Balance the work per rank, and check that rank's host for contention (threads, NUMA). Where "
                      "every rank runs the same program, traced ops that run slower on one rank are often its host "
                      "or the profiler's cost: time the ranks without the profiler before moving work.",
}


def _ms(us) -> float | None:
    return None if us is None or not np.isfinite(us) else round(float(us) / 1000, 3)


def analyze_job(paths, engine: str = "local", workers: int | None = None, address: str | None = None,
                steps=None, full_ranks=()) -> dict:
    blocks = analyze_jobs(paths, engine, workers, address, steps, full_ranks)
    if len(blocks) != 1:
        raise UsageError(f"the input holds {len(blocks)} jobs; use analyze_jobs")
    return blocks[0]


def analyze_jobs(paths, engine: str = "local", workers: int | None = None, address: str | None = None,
                 steps=None, full_ranks=(), strict: bool = False, peer_waits_out: dict | None = None) -> list[dict]:
    """`strict`: an unreadable rank file is an error (the CLI: the user named it), not a note. `peer_waits_out`:
    filled with {(job index, rank): that rank's waits for the others} (job/analysis.peer_waits), for a caller
    that analyzes a rank again (the CLI's focus rank) and must read it as the job's reports do."""
    # Imported here: `analyze` of single traces imports this package for discover alone.
    from .engine import Session
    from .rank_task import full_rank, summarize
    files = expand(paths)
    with Session(engine, workers, address) as session:
        summaries = session.map(summarize, files)
        broken = [x for x in summaries if x.error]
        if strict and broken:
            raise TraceError(broken[0].path, broken[0].error.removeprefix(f"{broken[0].path}: "))
        jobs, split_warnings = discover.group(summaries)
        built, peer = map(list, zip(*(_cross_rank(job, steps, split_warnings) for job in jobs))) if jobs else ([], [])
        # Phase 2: the full single-rank analysis of the ranks worth reading, in one fan-out.
        want = sorted({(i, r) for i, block in enumerate(built) for r in _report_ranks(block, full_ranks)})
        paths_by = {(i, s.rank): s.path for i, job in enumerate(jobs) for s in job.summaries}
        # Each rank's waits for the others inside its collectives (job/analysis.peer_waits) go with it.
        waits = [peer[i].get(r) for i, r in want]
        docs = session.map(full_rank, [paths_by[k] for k in want], factor=1.2, extra=waits) if want else []
    if peer_waits_out is not None:
        peer_waits_out.update({(i, r): w for i, by_rank in enumerate(peer) for r, w in by_rank.items()})
    for (i, r), doc in zip(want, docs):
        built[i]["rank_reports"][str(r)] = doc
    for block in built:
        _single_rank_cause(block)
        _job_unprofiled(block)
        _straggler_cost(block)
        _waiting_ranks(block)
    return built


OTHER_RUN_US = 1e6     # a clock correction this large is not two hosts' clocks: traces of different runs?


def _report_ranks(block: dict, full_ranks) -> set:
    present = {r["rank"] for r in block["ranks"]}
    extra = _parse_ints(full_ranks, "--full-ranks") or set()
    if extra - present and block["ranks"]:
        raise UsageError(f"--full-ranks: no rank {', '.join(map(str, sorted(extra - present)))} in this job "
                         f"(ranks {min(present)}-{max(present)})")
    out = {block["straggler"]["rank"], block["straggler"]["median_rank"]} | extra
    return {r for r in out if r is not None and r in present}


def _cross_rank(job: discover.Job, steps, split_warnings) -> tuple[dict, dict]:
    """The job block from the ranks' summaries: match, align clocks, then the cross-rank figures; and each rank's
    waits for the others in its collectives ({rank: (starts, waits)}, job/analysis.peer_waits)."""
    from . import analysis, clock, match
    ok = [s for s in job.summaries if s.error is None]
    warnings = list(split_warnings) + list(job.notes)
    for s in ok:
        warnings += [f"rank {s.rank}: {w}" for w in s.warnings]
        if s.dropped.get("prewindow"):
            warnings.append(f"rank {s.rank}: {s.dropped['prewindow']} collective(s) launched before the "
                            "profiling window were left out of the matching")
    if not ok:
        return _empty_block(job, warnings), {}
    m = match.match(ok)
    warnings += m.warnings
    known = np.array([s.epoch_ns is not None for s in ok])
    origin = min((s.epoch_ns for s in ok if s.epoch_ns is not None), default=0)
    shift = np.array([(s.epoch_ns - origin) / 1000 if s.epoch_ns is not None else 0.0 for s in ok])
    chosen = analysis.choose_steps(m, _parse_ints(steps, "--steps"))
    if not len(chosen):
        warnings.append("the ranks recorded no step in common (or none of --steps): nothing to compare; "
                        "record the same ProfilerStep window on every rank")
    op_names = np.array(m.ops + [""], dtype=object)[m.col_op]
    blocking = m.complete & np.isin(op_names, list(clock.BLOCKING)) & (m.col_group > 1)
    d = shift[:, None]
    clk = clock.align(m.start + d, m.end + d, blocking, known, [s.host for s in ok])
    warnings += clk.warnings
    far = float(np.max(np.abs(clk.offsets))) if len(clk.offsets) else 0.0
    if far > OTHER_RUN_US:
        # (a review joined rank 0 of one run with rank 1 of another: "offsets up to 1471.68 ms", a straggler)
        warnings.append(f"the ranks' clocks had to be moved by up to {far / 1e6:.2f} s to line their collectives "
                        "up, far more than hosts' clocks differ: check that these traces come from one run")
    al = analysis.aligned(m, shift, clk.offsets, chosen)
    med = analysis.step_medians(m, chosen, ("dur", "exposed", "comm", "cpu_own", "compute", "profiler_cost"))
    step_us, exposed, comm = med["dur"], med["exposed"], med["comm"]
    job_step = float(np.nanmedian(step_us)) if np.isfinite(step_us).any() else 0.0
    wait = analysis.collective_wait(al, m)
    wait_med = np.median(wait, axis=1) if wait.shape[1] else np.zeros(len(ok))
    if wait.shape[1]:
        # A step's exposed communication holds its wait: the two medians, taken apart, had read 39.83 ms exposed
        # "wait included" beside a 40.15 ms wait (set 31's unfused-Adam rank 1).
        per_step = analysis.step_values(m, chosen, "exposed")
        both = np.fmax(per_step, wait)
        exposed = np.where(np.isfinite(both).any(axis=1), analysis.quiet(np.nanmedian, both, axis=1), exposed)
    strag = analysis.straggler(al, m, job_step)
    srow = strag["row"]
    pool = [i for i in range(len(ok)) if i != srow]
    mrow = sorted(pool, key=lambda i: (wait_med[i], ok[i].rank))[(len(pool) - 1) // 2] if pool else None
    last_counts = strag["counts"]
    # Each rank's own work per step, were it never kept waiting by another (estimates, un-profiled): its loop's
    # CPU time less its waits and the profiler's cost of its events; its GPU's compute and the part of its
    # communication it did not spend waiting for a later rank.
    gpu_job = np.array([s.has_gpu for s in ok])
    own_profiled = med["cpu_own"] - np.where(gpu_job, 0.0, wait_med)    # (a CPU job waits in its collectives)
    own_cpu = np.maximum(own_profiled - med["profiler_cost"], 0.0)
    own_gpu = med["compute"] + np.maximum(exposed - wait_med, 0.0)
    ranks = [{"rank": s.rank, "host": s.host, "file": s.path,
              "step_ms_median": _ms(step_us[i]),
              "collective_wait_ms_per_step": _ms(wait_med[i]) if len(ok) > 1 else None,
              "exposed_comm_ms_per_step": _ms(exposed[i]), "comm_ms_per_step": _ms(comm[i]),
              "overlap_pct": round(float(100 * max(0.0, 1 - exposed[i] / comm[i])), 1) if comm[i] > 0 else None,
              "last_arrivals": int(last_counts[i]),
              "own_cpu_ms_per_step": _ms(own_cpu[i]), "own_gpu_ms_per_step": _ms(own_gpu[i]) if s.has_gpu else None}
             for i, s in enumerate(ok)]
    if not any(s.has_gpu for s in ok):
        warnings.append("no rank recorded GPU activity (a CPU job): collectives are the host's own ranges (gloo's, on "
                        "its threads); 'exposed comm' is their time not overlapped by the step thread's ops, and "
                        "bandwidth shows only where the trace recorded sizes")
    if len(ok) == 1:
        warnings.append("one rank only: collective times include waiting for ranks not in the input, so the "
                        "bandwidth table gives lower bounds and no straggler can be named")
    block = {
        "world_size": job.world_size,
        "ranks_present": len(ok),
        "missing_ranks": job.missing_ranks,
        "backend": next((s.backend for s in ok if s.backend), None),
        "steps": [int(x) for x in chosen],
        "median_step_ms": _ms(job_step),
        "matched_collectives": int(al.use.sum()),
        "straggler": _straggler_block(m, strag, srow, mrow, ok, job_step, chosen, {**med, "cpu_own": own_profiled},
                                      np.where(gpu_job[:, None], 0.0, wait).sum(axis=1) if wait.shape[1] else None),
        "ranks": ranks,
        "collectives": analysis.bandwidth(al, m),
        "clock": {"method": clk.method, "hosts": clk.hosts, "violations": clk.violations,
                  "max_violation_us": round(clk.max_violation_us, 3),
                  "offsets_us": {str(s.rank): round(float(clk.offsets[i]), 3) for i, s in enumerate(ok)}},
        "warnings": sorted(set(warnings), key=warnings.index),
        "rank_reports": {},
    }
    return block, ({s.rank: w for s, w in zip(ok, analysis.peer_waits(m, shift, clk.offsets))} if len(ok) > 1 else {})


def _straggler_block(m, strag, srow, mrow, ok, job_step, chosen, med, cpu_waits) -> dict:
    from . import analysis
    out = {"rank": None, "cause": "none", "cause_text": "", "lag_ms_per_step": _ms(strag["lag_us"]),
           "lag_pct_of_step": round(100 * strag["lag_us"] / job_step, 1) if job_step else None,
           "last_arrival_share": round(strag["share"], 3),
           "candidate_rank": ok[strag["candidate"]].rank if strag["candidate"] is not None else None,
           "median_rank": ok[mrow].rank if mrow is not None else None, "fix": None, "evidence": {}}
    if len(ok) < 2:
        out["cause"], out["cause_text"] = "unknown", "one rank only: no rank to compare with"
        return out
    if srow is None:
        out["cause_text"] = (f"no rank holds the others back by {100 * analysis.STRAGGLER_MIN_SHARE:.0f}% of a "
                             "step or more")
        return out
    # What to explain: how much longer the straggler's own work takes a step than the median rank's (profiled,
    # on the CPU or the GPU), not how late it arrives, which also holds a fixed offset between ranks of one pace.
    gap = float(med["cpu_own"][srow] - med["cpu_own"][mrow])
    if ok[srow].has_gpu:      # (a CPU job's "compute" is its ops, with its waits in them)
        gap = max(gap, float(med["compute"][srow] - med["compute"][mrow]))
    waits = (float(cpu_waits[srow]), float(cpu_waits[mrow])) if cpu_waits is not None else (0.0, 0.0)
    # (no more than the lag at the collectives either: what the others wait for is all there is to explain)
    gap = min(gap, strag["lag_us"]) if np.isfinite(gap) and gap > 0 else strag["lag_us"]
    w = analysis.why(m, srow, mrow, chosen, gap, waits)
    out.update(rank=ok[srow].rank, cause=w["cause"], evidence=w, fix=CAUSE_FIX.get(w["cause"]))
    what = CAUSE_TEXT.get(w["cause"])
    lag = out["lag_ms_per_step"]
    out["cause_text"] = (f"rank {out['rank']} arrives last at its collectives, {lag} ms per step after the others "
                         "(profiled): "
                         + (f"in its steps it spends more time in {what} than rank {out['median_rank']} (the median rank)"
                            if what else "no single difference with the median rank explains it"))
    return out


def _single_rank_cause(block: dict) -> None:
    """When no difference in the ranks' steps explains the straggler, its own report may: a finding it has and the
    median rank has not (a sync stall, launch overhead, ...)."""
    st = block["straggler"]
    if st["cause"] != "mixed":
        return
    reports = block["rank_reports"]
    mine = reports.get(str(st["rank"]), {}).get("findings") or []
    theirs = {f["kind"] for f in reports.get(str(st["median_rank"]), {}).get("findings") or []}
    extra = [f for f in mine if f["kind"] not in theirs]
    if extra:
        st["cause"] = extra[0]["kind"]
        st["cause_text"] += f"; its own report finds what the median rank's does not: {extra[0]['title']}"
        st["fix"] = extra[0].get("fix")


def focus_rank(block: dict) -> int | None:
    """The rank whose own report follows the job's: the straggler, else the rank that arrives last where it was not
    named for setting no pace (its report's step is the job's; the others' keep their waits in theirs), else the
    median rank."""
    st = block.get("straggler") or {}
    for r in (st.get("rank"), st.get("paceless_rank"), st.get("median_rank")):
        if r is not None:
            return r
    return None


def _job_unprofiled(block: dict) -> None:
    """The job's un-profiled step: the estimate (or measurement) of the rank that sets the pace, the straggler (the
    median rank where none is named). The ranks run in lockstep, and a rank that waits for another keeps the
    profiler's cost of the other's steps in its wait (trace/peer_waits.py)."""
    st, focus = block["straggler"], focus_rank(block)
    s = (block["rank_reports"].get(str(focus)) or {}).get("summary") or {}
    if focus is not None and s.get("unprofiled_step_ms"):
        block["unprofiled_step_ms"] = s["unprofiled_step_ms"]
        who = "the straggler, which sets the pace" if st.get("rank") is not None else "the median rank"
        block["unprofiled_step_method"] = f"from rank {focus}, {who}; {s.get('unprofiled_step_method') or ''}"


def _straggler_cost(block: dict) -> None:
    """What the straggler costs the rank that waits for it: the share of the median rank's step that its
    collective_wait what-if frees (its step replayed with the straggler in time), taken of the job's un-profiled
    step. The waiting rank's own estimate keeps the profiler's cost of the straggler's steps in its waits
    (trace/peer_waits.py), so its saving in its own ms can exceed the job's whole step (set 31's fused-Adam jobs:
    14.8-17.1 ms of a 12-13 ms step). The lag at the collectives bounds it and can be far above it: a rank a step
    ahead spins in every collective (52 ms a step on set 33's unfused-Adam job) while its own work would fill most
    of that time. So does the ranks' own work (_pace_bound)."""
    st = block["straggler"]
    if st.get("rank") is None or st.get("median_rank") is None or st["median_rank"] == st["rank"]:
        return
    job = block.get("unprofiled_step_ms")
    bound = _pace_bound(block, st["rank"], job)
    if bound is not None and bound < PACE_MIN_SHARE * job:
        _no_pace(block, bound)
        return
    rep = block["rank_reports"].get(str(st["median_rank"])) or {}
    wait = next((f for f in (rep.get("findings") or []) + (rep.get("minor_findings") or [])
                 if f["kind"] == "collective_wait"), None)
    own = (rep.get("summary") or {}).get("unprofiled_step_ms")
    if not wait or wait.get("estimated_savings_ms") is None or not own or not job:
        return
    share = min(1.0, wait["estimated_savings_ms"] / own)
    saves = share * job
    for cap in (st.get("lag_ms_per_step"), bound):
        if cap is not None:
            saves = min(saves, cap)
    st["median_rank_saves_ms"] = round(saves, 3)
    st["median_rank_saves_share"] = round(share, 4)


# A straggler whose own work outlasts the others' by less than this share of the job's step sets no pace (the share
# its lag at the collectives must reach: job/analysis.STRAGGLER_MIN_SHARE).
PACE_MIN_SHARE = 0.02


def _pace_bound(block: dict, straggler: int, job: float | None) -> float | None:
    """The most putting the straggler in time can save a step (ms, un-profiled estimates): how much longer its own
    work takes than the others' (on the GPU where its kernels are what is slow, else on the CPU), and no more than
    the job's step less the GPU work that stays (the others', and the straggler's own unless it is what is slow). A rank that arrives late by the
    same offset every step while the others' own work fills as long a step sets no pace: a review found 5.2 ms of
    arrival lag between ranks whose CPU steps took 8.85 and 8.83 ms, and "putting it in time" read 1.55 ms;
    another found the waiting rank replayed down to its GPU work, shorter than its own CPU steps (6.57 ms of a
    12.07 ms job, where its own steps left room for 3)."""
    rows = {r["rank"]: r for r in block.get("ranks", [])}
    me, others = rows.get(straggler) or {}, [r for k, r in rows.items() if k != straggler]
    cpu = [r.get("own_cpu_ms_per_step") for r in others]
    if not job or me.get("own_cpu_ms_per_step") is None or not cpu or None in cpu:
        return None
    gpu = [r["own_gpu_ms_per_step"] for r in others if r.get("own_gpu_ms_per_step") is not None]
    mine = me.get("own_gpu_ms_per_step")
    # The fix is where the cause is: its kernels for a straggler whose kernels are slower (its CPU work stays),
    # else its host (its GPU work stays; comm_bound's rank 0 arrived last for slower dispatch, and its own GPU work
    # was the whole un-profiled step).
    slow_gpu = block["straggler"].get("cause") == "slower-kernels" and gpu and mine is not None
    bound = max(0.0, (mine - max(gpu)) if slow_gpu else (me["own_cpu_ms_per_step"] - max(cpu)))
    stays = gpu + ([] if slow_gpu or mine is None else [mine])
    if stays:
        bound = min(bound, max(0.0, job - max(stays)))
    block["straggler"].setdefault("evidence", {})["pace_bound_ms_per_step"] = round(bound, 3)
    return bound


def _no_pace(block: dict, bound: float) -> None:
    """The rank that arrives last is not named a straggler where putting it in time would save next to nothing."""
    st = block["straggler"]
    rows = {r["rank"]: r for r in block.get("ranks", [])}
    me = rows[st["rank"]]
    others = max((r for k, r in rows.items() if k != st["rank"]), key=lambda r: r["own_cpu_ms_per_step"])
    gpu = max((r.get("own_gpu_ms_per_step") or 0.0) for r in rows.values())
    st["candidate_rank"] = st["paceless_rank"] = st["rank"]
    st["rank"], st["cause"], st["fix"], st["median_rank_saves_ms"] = None, "none", None, round(bound, 3)
    # What its steps do differently stays (why it arrives last), but under a name that is not a cause to fix: the
    # evidence had kept "cause": "slower-cpu-ops" beside the straggler's "none" (a review).
    ev = st.get("evidence") or {}
    if "cause" in ev:
        ev["late_arrival_cause"] = ev.pop("cause")
    st["cause_text"] = (
        f"rank {st['candidate_rank']} arrives last at its collectives, {st.get('lag_ms_per_step')} ms per step after "
        f"the others (profiled), but it sets no pace: its own work takes about {me['own_cpu_ms_per_step']:.2f} ms a "
        f"step on the CPU, rank {others['rank']}'s {others['own_cpu_ms_per_step']:.2f} ms"
        + (f", the longest GPU work of a rank {gpu:.2f} ms" if gpu else "")
        + f" (estimates, un-profiled), so putting it in time would save about {bound:.2f} ms a step; the ranks' "
        "own findings are what to fix")
    if block.get("unprofiled_step_method"):
        block["unprofiled_step_method"] = block["unprofiled_step_method"].replace(
            "the straggler, which sets the pace", "the rank that arrives last")


# A rank's own un-profiled estimate this far above the job's is its wait for the pacing rank, not its own work.
WAITING_RANK_EXCESS = 1.15


def _waiting_ranks(block: dict) -> None:
    """The full reports of ranks other than the one that sets the pace (in the JSON) keep that rank's profiled
    pace in their waits: their un-profiled step and savings in ms are of a step they do not run alone (set 33's
    unfused-Adam job: rank 0's own estimate 56.4 ms, its collective_wait 28.2 ms, in a job measured at 25.8 ms).
    Each such report says so among its limits and carries the job's step beside its own."""
    focus, job = focus_rank(block), block.get("unprofiled_step_ms")
    if focus is None or not job:
        return
    st = block["straggler"]
    for r, rep in block["rank_reports"].items():
        s = rep.get("summary") or {}
        own = s.get("unprofiled_step_ms")
        if r == str(focus) or not own or own <= WAITING_RANK_EXCESS * job:
            continue
        s["job_unprofiled_step_ms"] = job
        who = "the rank that arrives last" if st.get("paceless_rank") == focus else "the rank that sets the pace"
        saves = (f"; the job's figure for putting rank {focus} in time is about {st['median_rank_saves_ms']:.2f} ms "
                 "a step" if focus in (st.get("rank"), st.get("paceless_rank")) and st.get("median_rank_saves_ms") is not None
                 else "")
        rep.setdefault("trace", {}).setdefault("limits", []).append(
            f"In this job the ranks run in lockstep at about {job:.2f} ms a step without the profiler (rank {focus}'s "
            f"estimate, {who}); this rank's own estimate, {own:.2f} ms, keeps rank {focus}'s "
            "profiled pace in its waits, so its un-profiled step and its savings in ms are of a step it does not run "
            f"alone{saves}.")


def _parse_ints(spec, option: str):
    """None, an iterable of numbers, or text such as "5-8" or "4,6,9" (--steps, --full-ranks)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        out: set[int] = set()
        for part in spec.split(","):
            part = part.strip()
            try:
                if "-" in part[1:]:
                    a, b = part.split("-", 1)
                    if int(b) < int(a):
                        raise UsageError(f"{option}: {part!r} runs backwards (write {b}-{a})")
                    out |= set(range(int(a), int(b) + 1))
                elif part:
                    out.add(int(part))
            except ValueError:
                raise UsageError(f"{option}: {spec!r} is not a list of numbers or ranges (e.g. 5-8,10)") from None
        return out
    return {int(x) for x in spec}


def _empty_block(job, warnings) -> dict:
    return {"world_size": job.world_size, "ranks_present": 0, "missing_ranks": job.missing_ranks,
            "backend": None, "steps": [], "median_step_ms": None, "matched_collectives": 0,
            "straggler": {"rank": None, "cause": "unknown", "cause_text": "no readable rank",
                          "lag_ms_per_step": None, "median_rank": None},
            "ranks": [], "collectives": [], "clock": {"method": "none", "offsets_us": {}},
            "warnings": warnings, "rank_reports": {}}
