"""Scale a recorded Kineto trace up to benchmark size by replicating its ProfilerStep windows.

    python benchmarks/make_big_trace.py [SEED] [-o bench_data/big_trace.json.gz] [--events 1000000]

The seed's events are split by an anchor time into three regions:
  pre    anchored before the first ProfilerStep starts (warm-up, outer Python frames, metadata),
  block  anchored inside [first step start, last step end): the steps themselves,
  post   anchored after the last step ends.
An event's anchor is its own ts, except for events tied to a launch (GPU kernels, memcpys,
memsets, cuda_sync events and ac2g flow arrows) which take the ts of the CPU runtime call with
their correlation id, so a kernel always travels with the call that launched it.

The output is pre once, then K copies of the block, then post. Copy k (0-based) is shifted by k*P
where P = (latest end of any block event) - (first step start), so no thread or stream sees two
copies overlap; post is shifted like the last copy. ProfilerStep#N becomes #N + k*n_steps. Every
id is renumbered consistently per id space: External id, correlation (args.correlation,
wait_on_cuda_event_record_corr_id and the ac2g flow id, which is the correlation), Python id /
Python parent id, Sequence number, and each other flow category's id. An id that already
appears in pre keeps its value everywhere (children of an outer Python frame keep pointing at
it); any other id in copy k gets + k * stride, stride = (largest id of that space) + 1, and post
uses the last copy's offsets, so flows, launches, fwd/bwd links and Python parents stay valid.
Pre events that span the whole block (the outer Python frames, the "PyTorch Profiler" span) are
stretched by (K-1)*P.

Streaming: only the seed is held in memory (a few MB); the output is encoded event by event and
gzipped as it is written, so building a 300 MB trace needs well under 1 GB of RAM.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SEEDS = [ROOT / "benchmarks" / "seed" / "small_conv_with_stack.json.gz",
                 ROOT.parent / "shared" / "external_traces" / "hta" / "v100_resnet_ns_timestamps.pt.trace.json.gz"]
DEFAULT_OUT = ROOT / "bench_data" / "big_trace.json.gz"

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# GPU-side categories whose place in time is decided by the launching runtime call.
_LAUNCHED = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "cuda_sync"}
_RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
# args keys -> id space
_ARG_SPACES = {"External id": "ext", "correlation": "corr", "wait_on_cuda_event_record_corr_id": "corr",
               "Python id": "py", "Python parent id": "py", "Sequence number": "seq"}


def flow_space(e: dict) -> str:
    return "corr" if e.get("cat") == "ac2g" else f"flow:{e.get('cat')}"


def _as_int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def iter_ids(e: dict):
    """(space, value) for every id this event carries."""
    a = e.get("args")
    if isinstance(a, dict):
        for k, space in _ARG_SPACES.items():
            v = _as_int(a.get(k))
            if v is not None and v >= 0:
                yield space, v
    if e.get("ph") in ("s", "f", "t"):
        v = _as_int(e.get("id"))
        if v is not None:
            yield flow_space(e), v


def load_seed(path: Path) -> dict:
    with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as fh:
        return json.loads(fh.read())


def plan(doc: dict) -> dict:
    """Split the seed's events into regions and work out the period, strides and pre-owned ids."""
    ev = doc["traceEvents"]
    steps = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and _STEP.match(str(e.get("name", "")))]
    if len(steps) < 1:
        raise SystemExit("seed has no ProfilerStep#N annotations to replicate")
    s0 = min(e["ts"] for e in steps)
    s_end = max(e["ts"] + e.get("dur", 0) for e in steps)
    nums = [int(_STEP.match(e["name"]).group(1)) for e in steps]
    n_steps = max(nums) - min(nums) + 1

    launch_ts = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in _RUNTIME and isinstance(e.get("args"), dict):
            c = _as_int(e["args"].get("correlation"))
            if c is not None:
                launch_ts.setdefault(c, e["ts"])

    def anchor(e):
        ts = e.get("ts")
        if e.get("cat") in _LAUNCHED and isinstance(e.get("args"), dict):
            c = _as_int(e["args"].get("correlation"))
            if c in launch_ts:
                return launch_ts[c]
        if e.get("cat") == "ac2g" and _as_int(e.get("id")) in launch_ts:
            return launch_ts[e["id"]]
        return ts

    region = []
    for e in ev:
        a = anchor(e)
        if e.get("ph") == "M" or not isinstance(a, (int, float)):
            region.append("pre")
        elif a < s0:
            region.append("pre")
        elif a < s_end:
            region.append("block")
        else:
            region.append("post")
    block_end = max(e["ts"] + (e.get("dur") or 0) for e, r in zip(ev, region) if r == "block")
    period = max(s_end, block_end) - s0
    if all(isinstance(e.get("ts"), int) for e in ev if e.get("ph") == "X"):
        period = math.ceil(period)

    strides: dict[str, int] = {}
    pre_ids: dict[str, set] = {}
    for e, r in zip(ev, region):
        for space, v in iter_ids(e):
            strides[space] = max(strides.get(space, 0), v + 1)
            if r == "pre":
                pre_ids.setdefault(space, set()).add(v)
    counts = {r: region.count(r) for r in ("pre", "block", "post")}
    return {"region": region, "s0": s0, "s_end": s_end, "period": period, "n_steps": n_steps,
            "first_step": min(nums), "strides": strides, "pre_ids": pre_ids, "counts": counts}


def _shift_ts(ts, shift):
    if isinstance(ts, int) and isinstance(shift, int):
        return ts + shift
    return round(ts + shift, 3)


def transform(e: dict, k: int, p: dict) -> dict:
    """The event as it appears in block copy k (post events use k = K-1)."""
    if k == 0:
        return e
    e = dict(e)
    shift = k * p["period"]
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = _shift_ts(e["ts"], shift)
    strides, pre_ids = p["strides"], p["pre_ids"]

    def new_id(space, v):
        if v in pre_ids.get(space, ()):
            return v
        return v + k * strides[space]

    a = e.get("args")
    if isinstance(a, dict):
        a = dict(a)
        for key, space in _ARG_SPACES.items():
            v = _as_int(a.get(key))
            if v is not None and v >= 0:
                a[key] = new_id(space, v)
        e["args"] = a
    if e.get("ph") in ("s", "f", "t") and _as_int(e.get("id")) is not None:
        e["id"] = new_id(flow_space(e), e["id"])
    m = _STEP.match(str(e.get("name", "")))
    if m:
        e["name"] = f"ProfilerStep#{int(m.group(1)) + k * p['n_steps']}"
    return e


def copies_for(target_events: int, p: dict) -> int:
    c = p["counts"]
    return max(1, math.ceil((target_events - c["pre"] - c["post"]) / max(1, c["block"])))


def write_big(doc: dict, out: Path, copies: int, p: dict, level: int = 6) -> dict:
    ev = doc["traceEvents"]
    region = p["region"]

    def enc(e) -> bytes:  # json's ", " / ": " separators: about the byte count of Kineto's own layout
        return json.dumps(e).encode()
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    header["traceName"] = str(out)
    stretch = (copies - 1) * p["period"]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    n = 0
    raw_bytes = 0
    with gzip.open(tmp, "wb", compresslevel=level) as fh:
        # Kineto's files start with a newline before the '{'; so do ours (a loader that strips
        # leading whitespace by copying the text pays for it here as it would on a real trace).
        head = ("\n" + (json.dumps(header, indent=2)[:-2] + ',\n  "traceEvents": [' if header
                        else '{\n  "traceEvents": [')).encode()
        fh.write(head)
        raw_bytes += len(head)
        buf: list[bytes] = []

        def emit(e):
            nonlocal n, raw_bytes
            b = (b"\n  " if n == 0 else b",\n  ") + enc(e)
            buf.append(b)
            raw_bytes += len(b)
            n += 1
            if len(buf) >= 20000:
                fh.write(b"".join(buf))
                buf.clear()

        for e, r in zip(ev, region):
            if r != "pre":
                continue
            if stretch and e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) \
                    and e["ts"] + (e.get("dur") or 0) >= p["s_end"]:
                e = dict(e)
                e["dur"] = _shift_ts(e["dur"], stretch)
            emit(e)
        for k in range(copies):
            for e, r in zip(ev, region):
                if r == "block":
                    emit(transform(e, k, p))
        for e, r in zip(ev, region):
            if r == "post":
                emit(transform(e, copies - 1, p))
        tail = b"\n  ]\n}\n"
        buf.append(tail)
        raw_bytes += len(tail)
        fh.write(b"".join(buf))
    tmp.replace(out)
    return {"events": n, "json_bytes": raw_bytes, "gz_bytes": out.stat().st_size,
            "steps": copies * p["n_steps"], "copies": copies}


def link_report(doc: dict, region: list[str] | None = None) -> dict:
    """Broken links and duplicated ids in a trace document, counted by kind.

    Seeds have broken links of their own (e.g. the ac2g arrow of a cuLaunchKernel driver call ends
    on the call but starts nowhere). With `region` (the seed's plan) the counts are split into
    those of block events and the rest, so the expected count of a scaled trace with K copies is
    rest + K * block; with no new duplicates.
    """
    from collections import Counter
    ev = doc["traceEvents"]
    rt_corr = Counter(); flows: dict = {}; py_ids = Counter(); ext_cpu = set(); steps = []
    for e in ev:
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        cat = e.get("cat")
        if e.get("ph") == "X" and cat in _RUNTIME and _as_int(a.get("correlation")) is not None:
            rt_corr[a["correlation"]] += 1
        if e.get("ph") in ("s", "f"):
            flows.setdefault((cat, e.get("id")), set()).add(e["ph"])
        if cat == "python_function" and _as_int(a.get("Python id")) is not None:
            py_ids[a["Python id"]] += 1
        if cat in ("cpu_op", "user_annotation") and _as_int(a.get("External id")) is not None:
            ext_cpu.add(a["External id"])
        if cat == "user_annotation" and _STEP.match(str(e.get("name", ""))):
            steps.append((e["ts"], e["ts"] + e.get("dur", 0), e["name"]))
    counts: dict[str, Counter] = {"block": Counter(), "rest": Counter()}
    for i, e in enumerate(ev):
        where = counts["block" if region is not None and region[i] == "block" else "rest"]
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        cat = e.get("cat")
        if e.get("ph") == "X" and cat in _LAUNCHED and _as_int(a.get("correlation")) is not None \
                and a["correlation"] not in rt_corr:
            where["gpu_without_launch"] += 1
        if e.get("ph") == "f" and "s" not in flows[(cat, e.get("id"))]:
            where["flow_f_without_s"] += 1
        if e.get("ph") == "s" and "f" not in flows[(cat, e.get("id"))]:
            where["flow_s_without_f"] += 1
        if cat == "python_function" and _as_int(a.get("Python parent id")) is not None \
                and a["Python parent id"] > 0 and a["Python parent id"] not in py_ids:
            where["python_parent_dangling"] += 1
        if e.get("ph") == "X" and cat in _RUNTIME and _as_int(a.get("External id")) is not None \
                and a["External id"] not in ext_cpu:
            where["runtime_ext_id_without_op"] += 1
    steps.sort()
    dup = {"runtime_corr_duplicated": sum(1 for v in rt_corr.values() if v > 1),
           "python_id_duplicated": sum(1 for v in py_ids.values() if v > 1),
           "step_names_duplicated": len(steps) - len({s[2] for s in steps}),
           "steps_overlapping": sum(1 for a, b in zip(steps, steps[1:]) if b[0] < a[1])}
    return {"events": len(ev), "steps": len(steps), "duplicates": dup,
            "broken_block": dict(counts["block"]), "broken_rest": dict(counts["rest"])}


def check_scaled(seed_doc: dict, p: dict, copies: int, out_doc: dict) -> list[str]:
    """Problems of a scaled trace relative to its seed (an empty list when it is right)."""
    seed_r = link_report(seed_doc, p["region"])
    out_r = link_report(out_doc)
    problems = [f"{k}: {v}" for k, v in out_r["duplicates"].items() if v != seed_r["duplicates"][k]]
    for k in set(seed_r["broken_block"]) | set(seed_r["broken_rest"]) | set(out_r["broken_rest"]):
        want = seed_r["broken_rest"].get(k, 0) + copies * seed_r["broken_block"].get(k, 0)
        got = out_r["broken_rest"].get(k, 0)
        if got != want:
            problems.append(f"{k}: {got} in the output, expected {want}")
    if out_r["steps"] != copies * p["n_steps"]:
        problems.append(f"steps: {out_r['steps']}, expected {copies * p['n_steps']}")
    want_events = p["counts"]["pre"] + p["counts"]["post"] + copies * p["counts"]["block"]
    if out_r["events"] != want_events:
        problems.append(f"events: {out_r['events']}, expected {want_events}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seed", nargs="?", type=Path, help="seed trace (default: benchmarks/seed/..., else "
                    "../shared/external_traces/hta/v100_resnet_ns_timestamps.pt.trace.json.gz)")
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--events", type=int, default=1_000_000, help="target number of events (default 1M)")
    ap.add_argument("--level", type=int, default=6, help="gzip level (default 6)")
    ap.add_argument("--check", action="store_true",
                    help="re-read the output and compare its link counts with the seed's (needs RAM: "
                         "about 15x the uncompressed size)")
    args = ap.parse_args(argv)
    seed = args.seed or next((s for s in DEFAULT_SEEDS if s.is_file()), None)
    if seed is None or not seed.is_file():
        print(f"make_big_trace: no seed trace (tried {[str(s) for s in DEFAULT_SEEDS]})", file=sys.stderr)
        return 2
    t = time.perf_counter()
    doc = load_seed(seed)
    p = plan(doc)
    copies = copies_for(args.events, p)
    info = write_big(doc, args.out, copies, p, args.level)
    info.update(seed=str(seed), seed_events=len(doc["traceEvents"]), regions=p["counts"],
                period_us=p["period"], seconds=round(time.perf_counter() - t, 1), out=str(args.out))
    print(json.dumps(info))
    if args.check:
        problems = check_scaled(doc, p, copies, load_seed(args.out))
        print(json.dumps({"check": problems or "ok", "seed_links": link_report(doc, p["region"])}))
        if problems:
            print(f"make_big_trace: the scaled trace has problems: {problems}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
