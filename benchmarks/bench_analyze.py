"""Speed and memory of `traceinsight analyze` on a benchmark-size trace, against the parse floor and HTA.

    python benchmarks/bench_analyze.py [TRACE] [--no-hta] [--no-stages] [--profile] [--repeat N]
                                       [--target-rss-mb MB] [--scaling TRACE2 TRACE3 ...]

TRACE defaults to bench_data/big_trace.json.gz, built by make_big_trace.py when missing.
Each measurement runs in a fresh subprocess; wall time is measured around the process (imports
included) and the peak RSS is that process's own ru_maxrss (os.wait4 returns it per child):
  floor    read + gunzip + a typed msgspec decode of only the fields the analysis needs
           (ph, cat, name, pid, tid, ts, dur, args{correlation, External id, stream, device}): the
           cost of just reading every event; the targets are ratios to this row
  floor_nogc  the same with the Structs declared gc=False (for reference: what the loader could
           reach by keeping the garbage collector off its million objects)
  analyze  the real command: python -m traceinsight analyze TRACE -o report.html --json r.json -q
  stages   the same work called stage by stage (load_trace, build_model, analyze_model, to_dict,
           HTML, JSON) to say where the time goes
  hta      Holistic Trace Analysis 0.5.0: TraceAnalysis(trace_files={0: TRACE}) (the load only),
           with the interpreter of .venv-hta (or $TRACEINSIGHT_HTA_PYTHON)
  scaling  floor and analyze again on bigger traces (e.g. the same steps repeated 4x and 8x, made by
           make_big_trace.py --events 4000000): how time and memory grow with the trace
Prints a Markdown table and writes it, with the machine, to benchmarks/results.md (--out).
This file imports only the standard library at the top: the HTA child runs it in the HTA venv.
"""
# No `from __future__ import annotations`: the msgspec Structs below are local classes, and msgspec
# resolves string annotations in module globals only.
import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "bench_data" / "big_trace.json.gz"
TARGET_RATIO = 1.5
TARGET_RSS_MB = 1024


# ---- children (run in their own process) --------------------------------------------------------

def child_floor(path: str, gc: bool = True) -> dict:
    """gc=False: the same Structs declared gc=False (msgspec skips GC tracking of the 1M objects)."""
    import zlib
    from typing import Union

    import msgspec

    class Args(msgspec.Struct, gc=gc):
        correlation: Union[int, str, None] = None
        external_id: Union[int, str, None] = msgspec.field(default=None, name="External id")
        stream: Union[int, str, None] = None
        device: Union[int, str, None] = None

    class Event(msgspec.Struct, gc=gc):
        ph: str = ""
        cat: Union[str, None] = None
        name: Union[str, int, float, None] = ""
        pid: Union[int, str, None] = 0
        tid: Union[int, str, None] = 0
        ts: Union[float, str, None] = None
        dur: Union[float, str, None] = None
        args: Union[Args, None] = None

    class Trace(msgspec.Struct, gc=gc):
        traceEvents: list[Event] = []

    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = zlib.decompressobj(wbits=47).decompress(data)
    t1 = time.perf_counter()
    doc = msgspec.json.Decoder(Trace).decode(data)
    t2 = time.perf_counter()
    return {"events": len(doc.traceEvents), "json_bytes": len(data),
            "stages": {"read+gunzip": t1 - t0, "decode": t2 - t1}}


def child_stages(path: str, outdir: str, profile: bool = False) -> dict:
    from traceinsight.report import analyze as pipeline
    from traceinsight.trace.load import load_trace
    from traceinsight.trace.model import build_model
    from traceinsight.render import html as html_r
    from traceinsight.render import json_out
    from traceinsight.report.document import build_report

    stages: dict[str, float] = {}

    def run():
        t = time.perf_counter()
        raw = load_trace(path)
        stages["load_trace"] = time.perf_counter() - t
        t = time.perf_counter()
        model = build_model(raw)
        del raw
        stages["build_model"] = time.perf_counter() - t
        t = time.perf_counter()
        a = pipeline.analyze_model(model)
        stages["analyze_model"] = time.perf_counter() - t
        t = time.perf_counter()
        r = build_report(a)
        stages["build_report"] = time.perf_counter() - t
        t = time.perf_counter()
        html_r.write([r], Path(outdir) / "report.html")
        stages["write_html"] = time.perf_counter() - t
        t = time.perf_counter()
        json_out.write([r], Path(outdir) / "report.json")
        stages["write_json"] = time.perf_counter() - t
        return a

    if profile:
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        a = prof.runcall(run)
        prof.dump_stats(str(Path(outdir) / "analyze.prof"))
        out = {}
        for key in ("tottime", "cumulative"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(key).print_stats(30)
            out[key] = s.getvalue()
        return {"stages": stages, "profile": out, "events": a.model.n_events}
    a = run()
    return {"stages": stages, "events": a.model.n_events, "steps": int(len(a.model.steps)),
            "gpu_rows": int(len(a.model.gpu)), "cpu_rows": int(len(a.model.cpu))}


def child_hta(path: str) -> dict:
    import logging
    logging.disable(logging.CRITICAL)
    import hta
    from hta.trace_analysis import TraceAnalysis
    t = time.perf_counter()
    ta = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
    load = time.perf_counter() - t
    return {"stages": {"TraceAnalysis": load}, "hta_version": hta.__version__,
            "rows": int(len(ta.t.get_trace(0)))}


# ---- parent -----------------------------------------------------------------------------------

def measure(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run cmd; wall seconds, its own peak RSS (MB), rc, and the JSON its stdout ends with (if any)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
        deadline = t + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    res = {"wall_s": wall, "rss_mb": ru.ru_maxrss / 1024, "rc": p.returncode}
    if p.returncode != 0:
        res["error"] = (stderr.strip().splitlines() or ["(no stderr)"])[-1][:300]
    lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
    if lines:
        try:
            res["child"] = json.loads(lines[-1])
        except ValueError:
            pass
    return res


def best_of(n: int, fn) -> dict:
    runs = [fn() for _ in range(n)]
    ok = [r for r in runs if r["rc"] == 0]
    if not ok:
        return dict(runs[-1], runs=n)
    best = dict(min(ok, key=lambda r: r["wall_s"]))
    best["rss_mb"] = max(r["rss_mb"] for r in ok)
    best["runs"] = n
    return best


def hta_python() -> Path | None:
    env = os.environ.get("TRACEINSIGHT_HTA_PYTHON")
    p = Path(env) if env else ROOT / ".venv-hta" / "bin" / "python"
    return p if p.is_file() else None


def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gb = int(line.split()[1]) / 2**20
    except OSError:
        pass
    versions = {}
    for mod in ("traceinsight", "msgspec", "pandas", "numpy"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": ram_gb, "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}", "date": _dt.datetime.now(_dt.timezone.utc)
            .strftime("%Y-%m-%d %H:%M UTC"), "versions": versions}


def ensure_trace(path: Path) -> None:
    if path.is_file():
        return
    if path != DEFAULT_TRACE:
        raise SystemExit(f"bench_analyze: {path}: no such file")
    print(f"building {path} with make_big_trace.py ...", file=sys.stderr)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_big_trace.py"), "-o", str(path)], check=True)


def trace_info(path: Path, floor: dict) -> dict:
    child = floor.get("child", {})
    return {"file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
            "gz_mb": path.stat().st_size / 1e6, "json_mb": child.get("json_bytes", 0) / 1e6,
            "events": child.get("events")}


def fmt_table(rows: list[tuple[str, dict]], floor: dict) -> str:
    out = ["| measurement | wall (s) | peak RSS (MB) | wall / floor | RSS / floor |",
           "|---|---:|---:|---:|---:|"]
    for label, r in rows:
        if r.get("rc", 0) != 0:
            out.append(f"| {label} | failed (rc {r['rc']}): {r.get('error', '')} | | | |")
            continue
        out.append(f"| {label} | {r['wall_s']:.1f} | {r['rss_mb']:.0f} | "
                   f"{r['wall_s'] / floor['wall_s']:.2f}x | {r['rss_mb'] / floor['rss_mb']:.2f}x |")
    return "\n".join(out)


def fmt_stages(label: str, r: dict) -> str:
    st = (r.get("child") or {}).get("stages") or {}
    if not st:
        return ""
    total = sum(st.values())
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in st.items())
    return f"- {label}: {parts} (sum {total:.1f} s; the rest of the wall time is interpreter start and imports)"


def fmt_scaling(rows) -> list[str]:
    """Floor and analyze per trace size, and growth against the first (smallest) trace."""
    out = ["How time and memory grow with the trace (each row: fresh processes, same machine, same run):", "",
           "| trace | events | JSON MB | floor (s) | floor RSS (MB) | analyze (s) | analyze RSS (MB) | analyze / floor "
           "| analyze time vs 1st | analyze RSS vs 1st |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base = rows[0][2]
    for path, fl, cl in rows:
        child = fl.get("child", {})
        if cl.get("rc", 0) != 0 or fl.get("rc", 0) != 0:
            out.append(f"| {path.name} | failed: floor rc {fl.get('rc')} {fl.get('error', '')}, analyze rc "
                       f"{cl.get('rc')} {cl.get('error', '')} | | | | | | | | |")
            continue
        out.append(f"| {path.name} | {child.get('events', 0):,} | {child.get('json_bytes', 0) / 1e6:.0f} | "
                   f"{fl['wall_s']:.1f} | {fl['rss_mb']:.0f} | {cl['wall_s']:.1f} | {cl['rss_mb']:.0f} | "
                   f"{cl['wall_s'] / fl['wall_s']:.2f}x | {cl['wall_s'] / base['wall_s']:.2f}x | "
                   f"{cl['rss_mb'] / base['rss_mb']:.2f}x |")
    return out + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--child", choices=["floor", "floor_nogc", "stages", "hta"], help=argparse.SUPPRESS)
    ap.add_argument("--outdir", help=argparse.SUPPRESS)
    ap.add_argument("--no-hta", action="store_true", help="skip the HTA measurement")
    ap.add_argument("--no-stages", action="store_true", help="skip the stage-by-stage run")
    ap.add_argument("--profile", action="store_true",
                    help="also run the stages under cProfile and print the top functions")
    ap.add_argument("--repeat", type=int, default=1, help="best-of-N wall time for floor and analyze")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.md")
    ap.add_argument("--target-rss-mb", type=float, default=TARGET_RSS_MB)
    ap.add_argument("--scaling", type=Path, nargs="*", default=[],
                    help="more traces (bigger versions of TRACE): floor and analyze on each, growth table")
    args = ap.parse_args(argv)

    if args.child:
        path = str(Path(args.trace).resolve())
        if args.child in ("floor", "floor_nogc"):
            res = child_floor(path, gc=args.child == "floor")
        elif args.child == "stages":
            res = child_stages(path, args.outdir, profile=args.profile)
        else:
            res = child_hta(path)
        print(json.dumps(res))
        return 0

    trace = args.trace.resolve()
    load_before = os.getloadavg()
    ensure_trace(trace)
    with open(trace, "rb") as fh:  # warm the page cache so no child pays for the first disk read
        while fh.read(1 << 24):
            pass
    me = [sys.executable, str(Path(__file__).resolve()), str(trace)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        print("floor ...", file=sys.stderr)
        floor = best_of(args.repeat, lambda: measure(me + ["--child", "floor"], args.timeout, env))
        if floor["rc"] != 0:
            raise SystemExit(f"bench_analyze: the floor run failed: {floor.get('error')}")
        results.append(("parse floor: read + gunzip + typed msgspec decode (minimal Struct)", floor))
        floor_nogc = best_of(args.repeat, lambda: measure(me + ["--child", "floor_nogc"], args.timeout, env))
        results.append(("parse floor, Structs declared gc=False (for reference)", floor_nogc))
        print("analyze ...", file=sys.stderr)
        cli = best_of(args.repeat, lambda: measure(
            [sys.executable, "-m", "traceinsight", "analyze", str(trace), "-o", f"{tmp}/report.html",
             "--json", f"{tmp}/report.json", "--force", "-q"], args.timeout, env))
        results.append(("`traceinsight analyze` (CLI: analysis + HTML + JSON)", cli))
        stages = None
        if not args.no_stages:
            print("stages ...", file=sys.stderr)
            stages = measure(me + ["--child", "stages", "--outdir", tmp], args.timeout, env)
            results.append(("same, stage by stage (pipeline calls)", stages))
        hta = None
        py = hta_python()
        if not args.no_hta and py is not None:
            print("hta ...", file=sys.stderr)
            hta_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            hta = measure([str(py), str(Path(__file__).resolve()), str(trace), "--child", "hta"],
                          args.timeout, hta_env)
            ver = (hta.get("child") or {}).get("hta_version", "?")
            results.append((f"HTA {ver} TraceAnalysis load (JSON parser, default)", hta))
        scaling = [(trace, floor, cli)]
        for extra in args.scaling:
            extra = extra.resolve()
            if not extra.is_file():
                raise SystemExit(f"bench_analyze: {extra}: no such file")
            print(f"scaling: {extra.name} ...", file=sys.stderr)
            x_me = [sys.executable, str(Path(__file__).resolve()), str(extra)]
            x_floor = best_of(args.repeat, lambda: measure(x_me + ["--child", "floor"], args.timeout, env))
            x_cli = best_of(args.repeat, lambda: measure(
                [sys.executable, "-m", "traceinsight", "analyze", str(extra), "-o", f"{tmp}/report.html",
                 "--json", f"{tmp}/report.json", "--force", "-q"], args.timeout, env))
            scaling.append((extra, x_floor, x_cli))
        prof = None
        if args.profile:
            print("profile ...", file=sys.stderr)
            prof = measure(me + ["--child", "stages", "--outdir", tmp, "--profile"], args.timeout, env)

    m = machine()
    load_after = os.getloadavg()
    info = trace_info(trace, floor)
    ratio = cli["wall_s"] / floor["wall_s"]
    if cli["rc"] != 0:
        verdict = "Targets: not evaluated, the analyze run failed."
    else:
        verdict = (f"Targets: analyze within {TARGET_RATIO}x the floor's wall time: "
                   f"{'MET' if ratio <= TARGET_RATIO else 'MISSED'} ({ratio:.2f}x); peak RSS at most "
                   f"{args.target_rss_mb:.0f} MB: {'MET' if cli['rss_mb'] <= args.target_rss_mb else 'MISSED'} "
                   f"({cli['rss_mb']:.0f} MB).")
    lines = [
        "# Benchmark results",
        "",
        f"Trace: `{info['file']}`: {info['events']:,} events, {info['json_mb']:.0f} MB of JSON "
        f"({info['gz_mb']:.1f} MB gzipped)"
        + (", made by `benchmarks/make_big_trace.py`." if Path(args.trace).resolve() == DEFAULT_TRACE.resolve() else "."),
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']:.1f} GB RAM, {m['os']}, Python {m['python']} "
        f"({', '.join(f'{k} {v}' for k, v in m['versions'].items())}). Date: {m['date']}.",
        "",
        f"Each row is a fresh process: wall time around the whole process (interpreter start and "
        f"imports included), peak RSS from os.wait4. Best of {args.repeat}. Load average "
        f"{load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end (other work on the machine "
        f"slows the rows it overlaps).",
        "",
        fmt_table(results, floor),
        "",
        verdict,
        "",
        "Where the time goes (in-process seconds):",
        "",
        *[s for s in (fmt_stages("floor", floor), fmt_stages("floor, gc=False", floor_nogc),
                      fmt_stages("stages", stages or {}),
                      fmt_stages("HTA", hta or {})) if s],
        "",
        *(fmt_scaling(scaling) if len(scaling) > 1 else []),
    ]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text)
    if prof and prof.get("child", {}).get("profile"):
        for key, s in prof["child"]["profile"].items():
            print(f"\n## cProfile, top 30 by {key}\n")
            print(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
