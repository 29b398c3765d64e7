"""What every renderer reads the same way from a report document: which findings are fixes and which
are notes about the measurement, what the trace cannot show, whether it is a CPU-only run or an
interrupted recording, how to name its GPU and its rank. One place, so the terminal, Markdown and
HTML never disagree."""
from __future__ import annotations

from ..analyses import spec
from ..estimate.rank import MIN_SHARE


def _is_note(f) -> bool:
    return bool(spec(str(f.get("kind", ""))).note)


def fixes(doc) -> list:
    """The ranked fixes: the findings that are not notes about the measurement."""
    return [f for f in doc.get("findings") or () if not _is_note(f)]


def notes(doc) -> list:
    """Notes about the measurement (doc["notes"]; older documents kept them among the findings)."""
    return list(doc.get("notes") or ()) + [f for f in doc.get("findings") or () if _is_note(f)]


def limits(doc) -> list[str]:
    """Sentences: what this trace cannot show."""
    return [str(x) for x in (doc.get("trace") or {}).get("limits") or ()]


def cpu_only(doc) -> bool:
    t = doc.get("trace") or {}
    return not t.get("gpu_activities")


def no_gpu_label(doc) -> str:
    """What a trace without GPU activity is: a CPU-only run, or a GPU job whose GPU side was not recorded."""
    if (doc.get("trace") or {}).get("gpu_events_cut_off"):
        return f"no GPU activity in the file: it is cut off, and its header names {doc['trace']['gpu_events_cut_off']}"
    if (doc.get("trace") or {}).get("gpu_work_unrecorded"):
        return "no GPU activity was recorded, though the CPU drove GPU work (see the limits)"
    return "CPU only: no GPU activity was recorded"


def recording(doc) -> dict:
    return ((doc.get("trace") or {}).get("profiler") or {}).get("record") or {}


def interrupted(doc) -> str | None:
    """One sentence when the recording was cut short (Ctrl-C, a crash, sys.exit), else None."""
    rec = recording(doc)
    if not rec:
        return None
    n = rec.get("steps_recorded")
    got = f"{n} step{'' if n == 1 else 's'}" if isinstance(n, int) and n > 0 else "what ran"
    if rec.get("interrupted"):
        return (f"The recording was interrupted (Ctrl-C) before the script finished: this report covers only "
                f"{got} recorded before it stopped.")
    # (a window completed before the script stopped covers all it asked for: no "only")
    full = isinstance(n, int) and isinstance(rec.get("steps_requested"), int) and n >= rec["steps_requested"] > 0
    only = "" if full else "only "
    if rec.get("exception"):
        return (f"The script ended with an exception ({rec['exception']}): this report covers {only}{got} "
                "recorded before it.")
    code = rec.get("exit_code")
    if code not in (None, 0):
        return f"The script exited with status {code}: this report covers {only}{got} recorded before it."
    return None


def gpu_label(t) -> str:
    """The GPU's name; when the trace leaves it out, say so with what it does tell."""
    name = str(t.get("gpu") or "")
    if not t.get("gpu_activities"):
        return "none (no GPU activity was recorded)"
    if name and name != "unknown GPU":
        return name
    cc = t.get("compute_capability")
    gfx = t.get("gfx_arch")
    amd = ("an AMD GPU: a ROCm trace" + (f", gfx version {gfx} (no CUDA compute capability)" if gfx else "")
           if t.get("vendor") == "AMD" else "")
    return "not named in the trace" + (f" ({', '.join(x for x in (amd, f'compute capability {cc}' if cc else '') if x)})"
                                       if amd or cc else "")


def rank_label(t) -> str:
    """" (rank 3 of 8)" for a rank of a multi-rank job, "" for a single process."""
    ws = t.get("world_size")
    if isinstance(ws, int) and ws > 1:
        return f" (rank {t.get('rank')} of {ws})"
    return ""


def plural(n, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def verdict_tone(doc) -> str:
    """healthy | neutral | alarm: red only when there is something to fix."""
    if doc.get("healthy"):
        return "healthy"
    if cpu_only(doc) or not fixes(doc):
        return "neutral"
    return "alarm"


def unprofiled(doc) -> str | None:
    """One sentence: the step without the profiler, and where the figure comes from."""
    s = doc.get("summary") or {}
    u, p = s.get("unprofiled_step_ms"), s.get("median_step_ms")
    if not u or not p:
        return None
    how = s.get("unprofiled_step_method") or ""
    kind = "measured" if how.startswith("measured") else "estimated"
    band = s.get("unprofiled_step_range_ms")
    gpu = str((doc.get("trace") or {}).get("gpu") or "")
    # (the cost model and its band come from H100 and H200 hosts: another GPU's host is outside them)
    named = gpu and "unknown" not in gpu.lower()
    amd = (doc.get("trace") or {}).get("vendor") == "AMD"
    other = ("" if (not named and not amd) or "H100" in gpu or "H200" in gpu else
             f"; this trace's {gpu if named else 'AMD GPU'} is outside that calibration")
    band = ("" if not band else f"; likely {band[0]:.3f}-{band[1]:.3f} ms, the window's own spread of steps, "
            "which compiling varies" if s.get("unprofiled_step_range_basis") == "window" else
            f"; likely {band[0]:.3f}-{band[1]:.3f} ms, the band that held 8 in 10 of our own H100/H200 "
            f"measurements{other}")
    shares = "Savings are shares of it. " if fixes(doc) or doc.get("minor_findings") else ""
    # (the profiler only adds time: a measured step well above the profiled one says the host was disturbed while
    # it was timed; a user's 2-rank gloo job read 4.85 ms un-profiled beside 2.72 ms profiled, without a word)
    odd = (" It measured longer than the profiled step, which the profiler only lengthens: most likely the host ran "
           "slower while it was timed (other processes, a shared or throttled machine, ranks waiting on each other), "
           "or the steps timed did other work; time it again on a quiet machine before trusting shares of it."
           if kind == "measured" and u > ODD_UNPROFILED * p
           else "")
    one = one_window(doc)     # (no median step)
    return (f"Without the profiler the {'window' if one else 'step'} is about {u:.3f} ms ({kind}; profiled "
            f"{'' if one else 'median '}{p:.3f} ms{band}).{odd} "
            f"{shares}Method: {how}.")


ODD_UNPROFILED = 1.15   # measured un-profiled / profiled step above which the measurement is doubted


def plan_rows(doc) -> list[dict]:
    """The fix plan: fixes in the order to apply them, each replayed on top of the ones before."""
    return list(((doc.get("whatif") or {}).get("plan")) or ())


GPU_WORK_FALLS = 0.9     # a fix that leaves less than this share of the GPU work before it says so


def plan_note(row: dict) -> str:
    """A fix-plan row's note: what it is needed for, and how many DataLoader workers its step needs."""
    parts = []
    if row.get("prerequisite_for"):
        parts.append("first: needed by " + ", ".join(row["prerequisite_for"]))
    if row.get("helps"):
        parts.append("first: " + ", ".join(row["helps"]) + " then saves more")
    if row.get("paced_by_dataloader_workers"):
        parts.append("alone it saves nothing: the loop waits for its DataLoader workers until the fixes above "
                     "make them keep up")
    elif row.get("pays_after_fixes_above"):
        parts.append("alone it saves nothing: its work runs beside the GPU's until the fixes above shorten that")
    if row.get("loader_handoff_ms"):
        parts.append(f"{row['loader_workers_needed']} DataLoader workers, and more help little: each batch's "
                     f"hand-off to the loop (about {row['loader_handoff_ms']} ms) sets the step")
    elif row.get("loader_workers_needed"):
        parts.append(f"needs >= {row['loader_workers_needed']} DataLoader workers")
    if row.get("cpu_bound_after"):
        parts.append(f"then the CPU sets the step: the GPU works about {row['gpu_work_after_ms']} ms of it")
    elif (row.get("gpu_work_before_ms") or 0.0) * GPU_WORK_FALLS > (row.get("gpu_work_after_ms") or 0.0):
        parts.append(f"it changes the kernels: the GPU works about {row['gpu_work_after_ms']} ms a step after it "
                     f"({row['gpu_work_before_ms']} before it, as the fixes above left it)")
    if row.get("collectives_ms"):
        parts.append(f"then its collectives are {100 * row['collectives_ms'] / row['estimated_step_ms']:.0f}% of the "
                     f"step, {row['collectives_ms']} ms of GPU time a step, {row['collectives_exposed_ms']} ms of it "
                     "beside no compute in the trace: " + (
                         "they move far slower than GPU links carry, so most of that is likely a wait for another rank "
                         "or a slow transport rather than work (see exposed_communication; all ranks' traces tell), so "
                         "measure again after this fix" if row.get("collectives_slow") else
                         "how much of them overlaps compute may then set the step (see exposed_communication), so "
                         "measure again after this fix"))
    if not parts and (row.get("saves_ms") or 0.0) < 0.005:
        # (ranked for what it saves alone: after the fixes above it, what it removed is gone or off the path)
        parts.append("saves nothing more once the fixes above it are in")
    return "; ".join(parts)


def plan_shown(doc) -> bool:
    """A plan is worth a table with two fixes or more, or one whose note says what follows it."""
    rows = plan_rows(doc)
    return len(rows) > 1 or any(plan_note(r) for r in rows)


def outside_ops(c: dict) -> str:
    """What the step thread's time outside any op was: Python and host code, less its waits for the GPU
    and for the backward on autograd's thread."""
    if (c.get("untraced_ms") or 0) >= (c.get("outside_ops_ms") or 0) > 0:
        # (the thread recorded nothing in the step: what it did the trace cannot say, Python or a wait)
        return "all of it untraced: the thread records no event in the step, so the trace cannot say what it did"
    parts = [f"{w} ms of it {what}" for w, what in (
        (c.get("untraced_ms") or 0, "untraced, before the thread's first recorded event or after its last"),
        (c.get("waiting_for_gpu_ms") or 0, "waiting in runtime calls for the GPU"),
        (c.get("waiting_for_backward_ms") or 0, "waiting for the backward on autograd's thread"
         if c.get("backward_thread_recorded", True) else
         "inside the program's backward range, waiting for autograd's thread, which the trace does not hold")) if w]
    return ", ".join(parts + ["the rest Python and other host code" if parts else "Python and other host code"])


def in_ops_what(d: dict) -> str:
    """What time inside torch ops holds: no wait for a GPU where the trace has none; the waits' time where
    there is some (a blocking copy inside aten::copy_)."""
    w = (d.get("cpu_time") or {}).get("waiting_for_gpu_in_ops_ms") or 0
    return "dispatch and the ops' CPU kernels" + (
        "" if cpu_only(d) else f", and {w} ms of waiting for the GPU in runtime calls inside them" if w
        else ", and any wait for the GPU inside them")


def loading_line(c: dict) -> str | None:
    """'Fetching batches from the DataLoader (its __next__) takes 6.5 ms of it (95.3%).'"""
    if not c.get("loading_ms"):
        return None
    return (f"Fetching batches from the DataLoader (its __next__, ops and Python alike) takes {c['loading_ms']} ms "
            f"of it ({c['loading_pct']}%).")


def collectives_line(c: dict) -> str | None:
    """'Collectives (gloo:all_reduce) run 173.4 ms per step (median), on threads other than the step's.'"""
    if not c.get("collectives_ms"):
        return None
    where = ", on threads other than the step's" if c.get("collectives_on_other_threads") else ""
    return (f"Collectives ({', '.join(c.get('collectives') or ())}) run {c['collectives_ms']} ms per step "
            f"(median, the union of their ranges){where}.")


def step_counts(d: dict) -> str:
    """'5 steps (ProfilerStep, 1 partial or warm-up, left out of the medians)'; where every step is partial
    the medians are theirs, and it says so (a review read 'left out of the medians' beside the median)."""
    s, t = d["summary"], d["trace"]
    n, part = s["steps"], t["partial_steps"]
    left = ("" if not part else f", {part} partial or warm-up, left out of the medians" if part < n else
            f", {'all ' if n > 1 else ''}partial or warm-up: no complete step, so the figures come from "
            f"{'these partial steps' if n > 1 else 'this partial step'}")
    moved = t.get("steps_moved_to_gpu") or 0
    # (a review matched the steps against the ProfilerStep ranges and found other durations: say why)
    cpu_side = (f"{'their' if moved > 1 else 'its'} ProfilerStep range" if t["step_source"] == "ProfilerStep" else
                "where the CPU's step ended")
    gpu = (f"; {'all' if moved == n and n > 1 else moved} bounded where the GPU finished a step's work, not by "
           f"{cpu_side}: the GPU ran behind the CPU") if moved else ""
    return plural(n, "step") + f" ({t['step_source']}{left}{gpu})"


def one_window(d: dict) -> bool:
    """Whether the whole trace is the one window (no step markers): its figures are the window's, no median step's."""
    return d["trace"].get("step_source") == "whole trace"


def per_step(d: dict) -> str:
    """"per step", or "in the window" where the whole trace is the one window (no step markers)."""
    return "in the window" if one_window(d) else "per step"


def step_line(d: dict) -> str:
    s = d["summary"]
    if s["steps"] == 1:
        # (one step, or the whole trace as one window: no median, min and max of one value)
        return f"{'window' if one_window(d) else 'step'} {s['median_step_ms']} ms"
    return f"median step {s['median_step_ms']} ms (min {s['min_step_ms']} ms, max {s['max_step_ms']} ms)"


def after_fixes(f: dict) -> str:
    """'once sync_stall is fixed', or 'once sync_stall (needed first) and fusion_candidates are fixed' where
    the plan's row that figure comes from also follows fixes it does not need."""
    first, before = f.get("needs_first") or [], f.get("saves_after_plan_fixes") or []
    if not before or set(before) <= set(first):
        return f"once {', '.join(first)} {'is' if len(first) == 1 else 'are'} fixed"
    named = [k + (" (needed first)" if k in first else "") for k in before]
    return f"once {', '.join(named[:-1])} and {named[-1]} are fixed"


def saving(f: dict, sep: str) -> str:
    """A finding's saving per step as the tables show it: the estimate with its share and range; for a fix
    that needs others first, what it adds once they are fixed (what it is ranked by), then what it would
    save alone: which it cannot be applied as, or, for a hidden fix, nothing until then."""
    if f.get("needs_first"):
        alone = (" (the loop waits for its DataLoader workers until then)"
                 if (f.get("evidence") or {}).get("paced_by_dataloader_workers") else
                 " (it runs beside the GPU's work until then)" if f.get("hidden") else
                 f" ({r})" if (r := span(f)) else "")
        return (f"{f['saves_after_needs_first_ms']} ms {after_fixes(f)}{sep}"
                f"{f['estimated_savings_ms']} ms alone" + alone)
    return f"{f['estimated_savings_ms']} ms ({f['estimated_savings_pct']}%)" + (f"{sep}{r}" if (r := span(f)) else "")


LIKELY_CAPTION = ("likely: where about 8 in 10 of our measured fixes landed around estimates of that kind and "
                  "size (all validated kinds' pooled where the kind has too few; H100/H200 validation; below "
                  "zero: the fix may cost time); range: the replay's own, for minor findings and kinds not "
                  "validated")


def minor_line(d: dict) -> str | None:
    """The minor findings in one line for the terminal and Markdown (the HTML and JSON have each in full), so
    that no output leaves them out."""
    minor = d.get("minor_findings") or ()
    if not minor:
        return None
    if minor_caption(d).startswith("Findings ("):     # (not a steady state: sizes that say little, left out)
        return ("Findings listed, not ranked (the trace is not a steady-state step): "
                + ", ".join(f["kind"] for f in minor) + "; each in full in the HTML and JSON.")
    return ("Minor findings, below the bar for a ranked fix: " + ", ".join(
        f"{f['kind']} (saves " + (f"about {f.get('estimated_savings_ms')} ms {per_step(d)})"
                                  if (f.get("estimated_savings_ms") or 0) >= 0.01 else "next to nothing)")
        for f in minor)
        + "; estimates, each in full in the HTML and JSON.")


def replay_trust(d: dict) -> str:
    """What the replay's error on the unchanged trace means for the estimates (beyond rank's bar, replayed
    savings fall back to the measured costs)."""
    if (d.get("whatif") or {}).get("replay_reliable", True):
        return "Estimates are differences between two replays, so this error mostly cancels."
    return ("That is too far for a replayed saving to be trusted: where one is larger than its finding's measured "
            "cost, the measured cost is the estimate and the replay the top of its range.")


def minor_caption(d: dict) -> str:
    """What the minor findings are: below the bar for a ranked fix (each kind's own bar, named), or, in a
    trace that records a graph capture, every fix listed unranked (its sizes can be large)."""
    minor = d.get("minor_findings") or ()
    if any(spec(f["kind"]).headline for f in [*(d.get("findings") or ()), *notes(d)]):
        return (f"Findings ({len(minor)}), listed, not ranked: the trace is not a steady-state step, so their "
                "sizes say little about the program's steps")
    own = sorted({(f["kind"], spec(f["kind"]).min_share) for f in minor if spec(f["kind"]).min_share is not None})
    bars = "".join(f"; {k} {share:.0%}" for k, share in own)
    return (f"Minor findings ({len(minor)}): seen in the trace, each below the bar for a ranked fix (an estimated "
            f"saving, and for a cause of idle time its measured idle, of {MIN_SHARE:.0%} of a step{bars})")


def span(f: dict, num=str) -> str:
    """The estimate's range in words: where it will likely land (validated kinds), else the replay's range.
    One wording for every renderer; num formats the numbers (the HTML's fmt)."""
    if rng := f.get("likely_savings_range_ms"):
        # (" to ": the low end may be below zero; a rounded -0.0 is 0)
        return f"likely {num(0.0 if rng[0] == 0 else rng[0])} to {num(rng[1])} ms"
    rng = f.get("savings_range_ms")
    unvalidated = " (not validated)" if str(f.get("likely_basis", "")).startswith("not validated") else ""
    return f"range {num(rng[0])}-{num(rng[1])} ms{unvalidated}" if rng else ""


def alternatives(f: dict) -> str | None:
    """The estimates for other ways users apply a fix (a copy pinned but still waited for; only a result
    copied), one line, each said to save less or more than the fix as advised."""
    alts = f.get("alternatives") or ()
    if not alts:
        return None
    own = f.get("estimated_savings_ms") or 0.0

    def compared(x: float) -> str:
        return "about as much as" if abs(x - own) <= SAME_SHARE * own else "less than" if x < own else "more than"
    def saves(a: dict) -> str:
        # (a review read "saves about 0.0 ms per step" as a figure; next to nothing is what it says)
        x = a["estimated_savings_ms"] or 0.0
        top = max((r[1] for r in (a.get("likely_savings_range_ms"), a.get("savings_range_ms")) if r), default=x)
        return (f"saves next to nothing, about {x} ms per step" if max(x, top) <= NEXT_TO_NOTHING * own else
                f"saves about {x} ms per step")
    said = {compared(a["estimated_savings_ms"]) for a in alts}
    if len(alts) > 1 and len(said) == 1:
        # (one comparison for all: said once, not after each of four worker counts)
        return (f"Done another way (estimates, each {said.pop()} the fix as advised): " + "; ".join(
            f"{a['what']}: {saves(a)}" + (f" ({span(a)})" if span(a) else "")
            for a in alts) + ".")
    return "Done another way: " + "; ".join(
        f"{a['what']}: {saves(a)} ("
        + (f"{span(a)}; " if span(a) else "")
        + f"estimate, {compared(a['estimated_savings_ms'])} the fix as advised)" for a in alts) + "."


# An alternative saving at most this share of the fix as advised saves next to nothing beside it.
NEXT_TO_NOTHING = 0.05
# Two estimates within this share of each other are "about as much" (the replay's own noise is ~1-2%).
SAME_SHARE = 0.02


def prerequisite_fixes(doc) -> list[tuple[str, str, str]]:
    """(kind, "needed first" or "first in the plan", fix) of the plan's prerequisites that are not among
    the ranked fixes (a sync that costs little alone but blocks a CUDA graph, or one at the step's edge after
    which the graph saves more): the plan puts them first, so their code change is shown with it."""
    ranked = {f["kind"] for f in fixes(doc)}
    minor = {f["kind"]: f.get("fix") or "" for f in doc.get("minor_findings") or ()}
    return [(r["kind"], "needed first" if r.get("prerequisite_for") else "first in the plan", minor[r["kind"]])
            for r in plan_rows(doc)
            if (r.get("prerequisite_for") or r.get("helps")) and r["kind"] not in ranked and minor.get(r["kind"])]


def window(doc) -> str | None:
    """Which steps the what-if estimates read, and which steps the rest of the report covers."""
    w = doc.get("whatif") or {}
    rs = list(w.get("replayed_steps") or ())
    n = (doc.get("summary") or {}).get("steps")
    if not rs or not n:
        return None
    contiguous = rs == list(range(rs[0], rs[-1] + 1))
    span = f"{rs[0]}-{rs[-1]}" if len(rs) > 1 and contiguous else ", ".join(map(str, rs))
    t = doc.get("trace") or {}
    which = ("the whole trace (one window: no step markers)" if one_window(doc) else
             f"step {span}" if len(rs) == 1 else f"steps {span}")
    part = t.get("partial_steps") or 0
    medians = ("the measured medians leave out only warm-up and partial steps" if part < n else
               "with no complete step, the medians are the partial step's" if n == 1 else
               "with no complete step, the medians are the partial steps'")
    return (f"The what-if estimates read {which} ({len(rs)} of {n}); the per-step table (HTML, JSON) shows "
            f"every step, and {medians}.")
