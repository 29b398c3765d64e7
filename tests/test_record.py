"""`traceinsight record`: run a user's script unchanged under torch.profiler.

Every test goes through the real command line (`python -m traceinsight record ...`) in a
subprocess and checks real outputs: the gzipped trace and its "traceinsight_record" key,
exit statuses, stderr. The scripts it runs live in tests/record_scripts/. CPU torch is
enough; tests that need it are skipped without it (except the no-torch ones).
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "record_scripts"
REPO = Path(__file__).resolve().parent.parent
HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (pip install torch, CPU is enough)")


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    # the traceinsight under test, wherever pytest runs from
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def record(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceinsight", "record", *args], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout)


def record_via(code: str, *args: str, cwd: Path, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """Run the CLI's main() after `code` (to simulate a missing torch, a failing analysis)."""
    wrapper = (f"import sys\n{code}\nsys.argv = ['traceinsight', 'record'] + sys.argv[1:]\n"
               "from traceinsight.cli import main\nmain()\n")
    return subprocess.run([sys.executable, "-c", wrapper, *args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=120)


def load_trace(out_dir: Path) -> dict:
    traces = sorted(out_dir.glob("*.pt.trace.json.gz"))
    assert len(traces) == 1, list(out_dir.iterdir())
    with gzip.open(traces[0], "rt", encoding="utf-8") as f:
        return json.load(f)


def step_events(trace: dict) -> list[dict]:
    steps = [e for e in trace["traceEvents"] if e.get("ph") == "X"
             and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return sorted(steps, key=lambda e: e["ts"])


def ops_in(trace: dict, step: dict, name: str) -> int:
    """How many `name` events start inside the step's interval (CPU side)."""
    lo, hi = step["ts"], step["ts"] + step["dur"]
    return sum(1 for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == name
               and e.get("cat") in ("cpu_op", "user_annotation") and lo <= e["ts"] < hi)


def one_clean_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("traceinsight record: "), lines[0]
    return lines[0]


# -- the script sees what plain python would give it --------------------------------------------

@needs_torch
def test_argv_name_cwd_and_path_pass_through(tmp_path):
    report = tmp_path / "seen.json"
    script = os.path.relpath(SCRIPTS / "echo_argv.py", tmp_path)  # relative stays relative
    script_args = ["--out-dir", "x", "--help", "--", "-m", "y", "a b"]
    # record's own options before the script; after it, everything (--out-dir, --help, --,
    # -m) is the script's
    r = record("--no-analyze", script, *script_args, cwd=tmp_path,
               env=_env(RECORD_TEST_REPORT=str(report)))
    assert r.returncode == 0, r.stderr
    seen = json.loads(report.read_text())
    assert seen["argv"] == [script, *script_args]
    assert seen["name"] == "__main__"
    assert seen["main_module_is_me"]
    assert seen["cwd"] == str(tmp_path)
    assert seen["path0"] == str(SCRIPTS)  # the script's folder, as python sets it
    assert Path(seen["file"]).resolve() == SCRIPTS / "echo_argv.py"
    assert not seen["traceinsight_imported"]  # the script does not run inside traceinsight
    assert not (tmp_path / "x").exists()

    # exactly what plain python gives
    plain_report = tmp_path / "plain.json"
    subprocess.run([sys.executable, script, *script_args], cwd=tmp_path,
                   env=_env(RECORD_TEST_REPORT=str(plain_report)), check=True)
    plain = json.loads(plain_report.read_text())
    for key in ("argv", "name", "cwd", "path0", "file", "main_module_is_me"):
        assert seen[key] == plain[key], key

    # default output: a new folder named after the script, printed
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith("traceinsight-echo_argv-")]
    assert folder.name in r.stderr
    meta = load_trace(folder)["traceinsight_record"]
    assert meta["window"] == "whole_run"  # no optimizer, no module: the whole run
    assert meta["steps_recorded"] == 0
    assert meta["argv"] == [script, *script_args] and meta["script"] == script


def test_default_out_dir_is_new_every_time(tmp_path, monkeypatch):
    from traceinsight.trace import record as rec

    monkeypatch.chdir(tmp_path)
    first, created1 = rec._prepare_out_dir(None, "train", "train.pt.trace.json.gz")
    second, created2 = rec._prepare_out_dir(None, "train", "train.pt.trace.json.gz")
    assert created1 and created2 and first != second  # same second: a -2 suffix
    assert first.name.startswith("traceinsight-train-") and second.is_dir()


# -- windowing ----------------------------------------------------------------------------------

@needs_torch
def test_training_script_gets_optimizer_step_windows_and_a_report(tmp_path):
    out = tmp_path / "out"
    r = record("--out-dir", str(out), "--skip", "1", "--warmup", "1", "--steps", "3",
               str(SCRIPTS / "train.py"), "--iters", "8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "done 8" in r.stdout  # the script's own output is untouched
    trace = load_trace(out)
    meta = trace["traceinsight_record"]
    assert meta["window"] == "optimizer_steps"
    assert meta["optimizer"] == "SGD"
    assert meta["steps_recorded"] == 3
    assert meta["exit_code"] == 0 and meta["interrupted"] is False and meta["exception"] is None
    assert meta["argv"] == [str(SCRIPTS / "train.py"), "--iters", "8"]
    assert meta["cuda"] is False or meta["activities"] == ["CPU", "CUDA"]
    assert meta["torch_version"]
    assert (meta["with_stack"], meta["profile_memory"], meta["record_shapes"]) == (False, False, False)

    steps = step_events(trace)
    assert [s["name"] for s in steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    for step in steps:  # one training iteration per step
        assert ops_in(trace, step, "aten::mse_loss") == 1, step["name"]
        assert ops_in(trace, step, "Optimizer.step#SGD.step") == 1, step["name"]

    # the analysis ran beside the trace, or failed with one warning line; never a traceback
    assert "Traceback" not in r.stderr
    if not (out / "report.html").exists():
        assert "warning: analysis failed" in r.stderr
    else:
        assert (out / "report.json").exists() and (out / "report.md").exists()


@needs_torch
def test_inference_script_steps_on_outermost_forward_calls_only(tmp_path):
    out = tmp_path / "out"
    r = record("--no-analyze", "-o", str(out), str(SCRIPTS / "infer.py"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = load_trace(out)
    meta = trace["traceinsight_record"]
    assert meta["window"] == "forward_calls"
    assert meta["forward_module"] == "Sequential"
    steps = step_events(trace)
    assert len(steps) >= 2 and meta["steps_recorded"] == len(steps) == 3
    # Sequential(Linear, ReLU, Linear): nested module calls do not end a step, so each
    # step holds both linears and the softmax of one outer call
    for step in steps:
        assert ops_in(trace, step, "aten::linear") == 2, step["name"]
        assert ops_in(trace, step, "aten::softmax") == 1, step["name"]
    assert any("forward" in note for note in meta["overhead_notes"])


@needs_torch
@needs_torch
def test_a_script_with_its_own_profiler_gets_it(tmp_path):
    # One thread holds one profiler: the script's start had raised "Profiler is already enabled on this
    # thread" and the run died by SIGSEGV, its own trace and ours lost. Ours now steps aside.
    runs = {}
    for warm, name in ((0, "cold"), (3, "warm")):
        (tmp_path / "own_trace.json").unlink(missing_ok=True)
        r = runs[name] = record("--no-analyze", "-o", str(tmp_path / name), str(SCRIPTS / "own_profiler.py"),
                                str(warm), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "own trace written" in r.stdout
        assert json.loads((tmp_path / "own_trace.json").read_text())["traceEvents"]
        assert "stepped aside" in r.stderr and "signal" not in r.stderr
    # Started before any step: nothing of ours to keep, and it says why.
    assert "nothing was recorded: the script runs its own torch.profiler" in runs["cold"].stderr
    assert not (tmp_path / "cold").exists()
    # Started after three steps: what our window had recorded by then is kept.
    assert load_trace(tmp_path / "warm")["traceinsight_record"]["window"] == "optimizer_steps"


def test_no_module_no_optimizer_records_the_run_capped_by_max_seconds(tmp_path):
    out = tmp_path / "out"
    r = record("--no-analyze", "--max-seconds", "0.3", "--with-stack", "-o", str(out),
               str(SCRIPTS / "plain_ops.py"), "1.5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "plain True" in r.stdout  # the script ran to its end after the cap
    trace = load_trace(out)
    meta = trace["traceinsight_record"]
    assert meta["window"] == "whole_run" and meta["capped"] is True
    assert step_events(trace) == []
    assert any(e.get("name") == "aten::mm" for e in trace["traceEvents"])
    assert meta["with_stack"] is True
    assert any("with_stack" in note for note in meta["overhead_notes"])


@needs_torch
def test_module_form_runs_like_python_dash_m(tmp_path):
    report = tmp_path / "seen.json"
    out = tmp_path / "out"
    r = record("-o", str(out), "--no-analyze", "-m", "rpkg.tool", "--report", str(report),
               "--steps", "9", cwd=SCRIPTS)
    assert r.returncode == 0, r.stderr
    seen = json.loads(report.read_text())
    assert seen["argv"] == [str(SCRIPTS / "rpkg" / "tool.py"), "--report", str(report),
                            "--steps", "9"]
    assert seen["name"] == "__main__" and seen["spec"] == "rpkg.tool"
    assert seen["cwd"] == str(SCRIPTS) and seen["path0"] == str(SCRIPTS)
    meta = load_trace(out)["traceinsight_record"]
    assert meta["module"] is True and meta["script"] == "rpkg.tool"
    assert meta["window"] == "optimizer_steps" and meta["optimizer"] == "Adam"
    assert meta["steps_recorded"] == 3  # --steps 9 after the module was the script's


# -- the un-profiled step: optimizer steps after the window, the profiler stopped -----------------

@needs_torch
def test_steps_after_the_window_are_timed_unprofiled_and_analyze_uses_them(tmp_path):
    out = tmp_path / "out"
    # window: first step switches, skip 1, warmup 1, steps 3 -> ends at step 6; step 7 settles;
    # steps 8..13 are timed (6 of them)
    r = record("--no-analyze", "-o", str(out), "--unprofiled-steps", "6", str(SCRIPTS / "train.py"),
               "--iters", "16", cwd=tmp_path)
    plain = subprocess.run([sys.executable, str(SCRIPTS / "train.py"), "--iters", "16"],
                           capture_output=True, text=True, env=_env())
    assert r.returncode == plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout == "done 16\n"  # the script is neither cut nor lengthened
    trace = load_trace(out)
    meta = trace["traceinsight_record"]
    assert meta["steps_recorded"] == 3 and len(step_events(trace)) == 3  # the window is unchanged
    assert meta["unprofiled_steps"] == 6 and meta["unprofiled_steps_requested"] == 6
    assert meta["unprofiled_step_ms"] > 0
    assert len(meta["unprofiled_block_ms"]) == 1  # 6 steps: the block's mean
    assert "after the profiled window" in meta["unprofiled_method"]
    assert "SGD.step()" in meta["unprofiled_method"]
    lines = [l for l in r.stderr.splitlines() if "un-profiled step:" in l]
    assert len(lines) == 1 and " ms (mean of 6 steps after the profiled window)" in lines[0]

    # analyze calibrates to it. A CPU-only trace has no GPU timeline to replay, so the recorded
    # block goes onto a small GPU sample trace (the CUDA test checks a real GPU recording)
    with gzip.open(REPO / "sample_traces" / "launch_small_mlp__before.json.gz", "rt") as f:
        gpu = json.load(f)
    gpu["traceinsight_record"] = meta
    spliced = tmp_path / "spliced.json"
    spliced.write_text(json.dumps(gpu))
    subprocess.run([sys.executable, "-m", "traceinsight", "analyze", "-q", str(spliced), "--json",
                    str(tmp_path / "a.json")], cwd=tmp_path, env=_env(), check=True,
                   capture_output=True)
    summary = json.loads((tmp_path / "a.json").read_text())["summary"]
    assert summary["unprofiled_step_method"].startswith("measured by traceinsight record")
    assert summary["unprofiled_step_range_ms"] is None     # measured: no estimate's band
    # The document rounds to the microsecond.
    assert summary["unprofiled_step_ms"] == pytest.approx(meta["unprofiled_step_ms"], abs=5.01e-4)
    # The CPU-only trace itself has nothing to replay, and still states the step record measured (a review
    # found it on stderr only, the report's summary empty).
    own = next(out.glob("*.json.gz"))
    subprocess.run([sys.executable, "-m", "traceinsight", "analyze", "-q", str(own), "--json",
                    str(tmp_path / "cpu.json"), "--markdown", str(tmp_path / "cpu.md")], cwd=tmp_path, env=_env(),
                   check=True, capture_output=True)
    summary = json.loads((tmp_path / "cpu.json").read_text())["summary"]
    assert summary["unprofiled_step_ms"] == pytest.approx(meta["unprofiled_step_ms"], abs=5.01e-4)
    assert summary["unprofiled_step_method"].startswith("measured by traceinsight record")
    assert "Without the profiler the step is about" in (tmp_path / "cpu.md").read_text()


@needs_torch
def test_an_inference_loop_gets_its_forward_calls_timed_unprofiled(tmp_path):
    # No optimizer: the window's steps are the model's outermost forward calls, and so are the laps after it,
    # timed by a hook on that module alone (the window's hooks on every module call are gone by then).
    out = tmp_path / "out"
    r = record("--no-analyze", "-o", str(out), "--unprofiled-steps", "10", str(SCRIPTS / "infer_long.py"),
               cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "inferred\n", r.stderr
    meta = load_trace(out)["traceinsight_record"]
    assert meta["window"] == "forward_calls" and meta["forward_module"] == "Sequential"
    assert meta["unprofiled_steps"] == 10 and meta["unprofiled_step_ms"] > 0
    assert "10 forward calls after the profiled window" in meta["unprofiled_method"]
    assert "outermost Sequential forward calls (a hook on that module alone)" in meta["unprofiled_method"]
    # The nested Linear and ReLU calls end no lap: asked for more laps than the script has calls, it gets
    # fewer than its 40 outermost calls (three module calls each would give about 100).
    r = record("--no-analyze", "-o", str(tmp_path / "all"), "--unprofiled-steps", "100",
               str(SCRIPTS / "infer_long.py"), cwd=tmp_path)
    meta_all = load_trace(tmp_path / "all")["traceinsight_record"]
    assert 10 < meta_all["unprofiled_steps"] < 40 and "ended after" in meta_all["unprofiled_method"]
    # A script too short for the laps says so in the same words.
    r = record("--no-analyze", "-o", str(tmp_path / "short"), "--unprofiled-steps", "10",
               str(SCRIPTS / "infer.py"), cwd=tmp_path)
    meta = load_trace(tmp_path / "short")["traceinsight_record"]
    assert "unprofiled_step_ms" not in meta and "outermost Sequential call(s) after the profiled window" in \
        meta["unprofiled_method"]


@needs_torch
def test_too_few_steps_after_the_window_give_a_reason_and_zero_turns_it_off(tmp_path):
    # --iters 8: the script ends 2 steps after the window (1 settles, 1 timed): no figure
    r = record("--no-analyze", "-o", str(tmp_path / "a"), str(SCRIPTS / "train.py"), "--iters", "8",
               cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "done 8\n", r.stderr
    meta = load_trace(tmp_path / "a")["traceinsight_record"]
    assert "unprofiled_step_ms" not in meta
    assert meta["unprofiled_steps"] == 1 and meta["unprofiled_steps_requested"] == 20
    assert meta["unprofiled_method"].startswith("not measured: the script ended 2 optimizer step(s) "
                                                "after the profiled window")
    assert "un-profiled step: not measured (only 1 step(s)" in r.stderr

    r = record("--no-analyze", "-o", str(tmp_path / "b"), "--unprofiled-steps", "0",
               str(SCRIPTS / "train.py"), "--iters", "14", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "done 14\n", r.stderr
    meta = load_trace(tmp_path / "b")["traceinsight_record"]
    assert "unprofiled_step_ms" not in meta and meta["unprofiled_steps"] == 0
    assert meta["unprofiled_method"] == "not measured (--unprofiled-steps 0)"
    assert "un-profiled step" not in r.stderr


def test_unprofiled_figure_is_a_median_of_blocks_or_the_block_mean():
    from traceinsight.trace.record_unprofiled import summarize

    info = {"window_done": True, "block_started": True, "optimizer": "AdamW",
            "cuda_synchronized": False, "synchronized_end": False}
    # CPU only, 20 steps: 4 blocks of 5; one slow step (a checkpoint, a GC pause) moves one block
    laps = [0.004] * 20
    laps[7] = 0.104
    meta, line = summarize(dict(info, laps_s=laps), "optimizer_steps", 20)
    assert meta["unprofiled_step_ms"] == pytest.approx(4.0)
    assert meta["unprofiled_block_ms"] == pytest.approx([4.0, 24.0, 4.0, 4.0])
    assert meta["unprofiled_steps"] == 20 and "synchronize" not in meta["unprofiled_method"]
    assert meta["unprofiled_cupti_attached"] is False
    assert line == "un-profiled step: 4.00 ms (median of 4 blocks, 20 steps after the profiled window)"
    # CUDA: the GPU-bound pattern seen on an H200 (the CPU queues steps ahead, the final
    # synchronize drains them into the last lap): only block time / steps is right
    info.update(cuda_synchronized=True, synchronized_end=True)
    laps = [0.0025] * 10 + [0.24] * 9 + [20 * 0.24 - 0.025 - 0.24 * 9]  # a 240 ms step
    meta, line = summarize(dict(info, laps_s=laps), "optimizer_steps", 20)
    assert meta["unprofiled_step_ms"] == pytest.approx(240.0)
    assert "synchronize() at the block's start and end" in meta["unprofiled_method"]
    assert meta["unprofiled_cupti_attached"] and "CUPTI stayed attached" in meta["unprofiled_method"]
    meta, _ = summarize(dict(info, laps_s=laps, cupti_teardown=True), "optimizer_steps", 20)
    assert not meta["unprofiled_cupti_attached"] and "CUPTI" not in meta["unprofiled_method"]
    assert line == "un-profiled step: 240.00 ms (mean of 20 steps after the profiled window)"
    # 17 steps: the 2 left over join the last block
    meta, _ = summarize(dict(info, laps_s=[0.002] * 15 + [0.005, 0.005]), "optimizer_steps", 20)
    assert meta["unprofiled_block_ms"] == pytest.approx([2.0, 2.0, 20.0 / 7], abs=1e-3)
    assert "ended after 17 of 20" in meta["unprofiled_method"]
    # few steps: the block's mean; an unsynchronized end says what it misses
    meta, _ = summarize(dict(info, laps_s=[0.001, 0.002, 0.006], synchronized_end=False),
                        "optimizer_steps", 20)
    assert meta["unprofiled_step_ms"] == pytest.approx(3.0)
    assert "start only" in meta["unprofiled_method"]
    # no optimizer window: nothing is said on stderr, the reason is in the meta
    meta, line = summarize({"window_done": False}, "forward_calls", 20)
    assert line is None and "unprofiled_step_ms" not in meta
    assert "forward calls" in meta["unprofiled_method"]


# -- however the script ends, the trace is kept and the exit status is python's -----------------

@needs_torch
def test_the_child_detaches_cupti_where_that_is_safe_unless_the_user_chose(monkeypatch):
    # Left attached, CUPTI slows the steps timed after the window (our un-profiled figure) by up to
    # 45% where launch-bound; CUDA < 12.6 crashed re-attaching it after a teardown with CUDA graphs.
    import types
    spec = importlib.util.spec_from_file_location(
        "_boot_under_test", Path(__file__).resolve().parents[1] / "traceinsight/trace/record_boot.py")
    boot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boot)

    def torch_with(cuda):
        return types.SimpleNamespace(version=types.SimpleNamespace(cuda=cuda))
    for cuda, want in (("12.8", "1"), ("13.0", "1"), ("12.4", None), (None, None)):
        monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
        boot._tear_down_cupti(torch_with(cuda))
        assert os.environ.get("TEARDOWN_CUPTI") == want, cuda
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")      # the user's choice stands
    boot._tear_down_cupti(torch_with("12.8"))
    assert os.environ["TEARDOWN_CUPTI"] == "0"


def test_crash_mid_run_keeps_the_trace_exit_1_and_the_traceback(tmp_path):
    out = tmp_path / "out"
    r = record("--no-analyze", "-o", str(out), "--steps", "10", str(SCRIPTS / "train.py"),
               "--iters", "8", "--crash-at", "5", cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback (most recent call last):" in r.stderr
    assert 'train.py", line' in r.stderr and "ValueError: boom at step 5" in r.stderr
    assert "_record_boot" not in r.stderr and "runpy" not in r.stderr  # the script's frames only
    meta = load_trace(out)["traceinsight_record"]
    assert meta["exit_code"] == 1 and meta["exception"] == "ValueError: boom at step 5"
    assert meta["interrupted"] is False
    # the window (10 steps) was cut short: what was recorded so far is there
    assert meta["window"] == "optimizer_steps" and 1 <= meta["steps_recorded"] < 10


@needs_torch
def test_sys_exit_code_is_kept_and_a_failing_analysis_only_warns(tmp_path):
    out = tmp_path / "out"
    boom = ("import traceinsight.cli.common as common\n"  # an analysis that blows up
            "def boom(*a, **k):\n    raise RuntimeError('analysis exploded')\n"
            "common.analyze_and_write = boom")
    # --skip 0 --warmup 0 also guards a crash seen once: a session started recording inside
    # the optimizer's record_function that began under the previous session
    r = record_via(boom, "--skip", "0", "--warmup", "0", "-o", str(out), str(SCRIPTS / "train.py"),
                   "--iters", "8", "--exit-at", "6", "--exit-code", "3", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    warnings = [l for l in r.stderr.splitlines() if "analysis failed" in l]
    assert len(warnings) == 1 and "analysis exploded" in warnings[0]
    meta = load_trace(out)["traceinsight_record"]
    assert meta["exit_code"] == 3 and meta["exception"] is None and meta["interrupted"] is False
    assert meta["window"] == "optimizer_steps" and meta["steps_recorded"] == 3


@needs_torch
def test_keyboard_interrupt_keeps_the_trace_and_ends_like_python(tmp_path):
    out = tmp_path / "out"
    r = record("--no-analyze", "-o", str(out), str(SCRIPTS / "train.py"), "--iters", "8",
               "--interrupt-at", "4", cwd=tmp_path)
    plain = subprocess.run([sys.executable, str(SCRIPTS / "train.py"), "--iters", "8",
                            "--interrupt-at", "4"], capture_output=True, text=True, env=_env())
    # python dies by SIGINT after an uncaught KeyboardInterrupt (-2 for subprocess, 130 in a
    # shell); record ends the same way (and where python cannot, as on some GPU sandboxes
    # once torch's threads run, it gives what python gives)
    assert plain.stderr.strip().endswith("KeyboardInterrupt")
    assert r.returncode == plain.returncode
    assert r.returncode in (-signal.SIGINT, 130, 1)
    assert 'train.py", line' in r.stderr and "raise KeyboardInterrupt" in r.stderr
    meta = load_trace(out)["traceinsight_record"]
    assert meta["interrupted"] is True
    assert meta["exit_code"] == (130 if plain.returncode == -signal.SIGINT else plain.returncode)
    assert meta["exception"] == "KeyboardInterrupt"
    assert meta["window"] == "optimizer_steps" and meta["steps_recorded"] >= 2


@needs_torch
def test_tracebacks_are_printed_exactly_as_python_prints_them(tmp_path):
    script = SCRIPTS / "interrupt.py"
    r = record("--no-analyze", "-o", str(tmp_path / "out"), str(script), cwd=tmp_path)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           cwd=tmp_path)
    assert r.returncode == plain.returncode
    assert r.stdout == plain.stdout == "working\n"
    # the same traceback, and only our one line after it
    assert r.stderr.startswith(plain.stderr), (r.stderr, plain.stderr)
    ours = r.stderr[len(plain.stderr):].strip().splitlines()
    assert len(ours) == 1 and ours[0].startswith("traceinsight record: trace (whole run")
    assert load_trace(tmp_path / "out")["traceinsight_record"]["interrupted"] is True


# -- record's own errors: exit 2, one line, no traceback ----------------------------------------

@needs_torch
@pytest.mark.parametrize("case", ["missing", "directory", "binary", "syntax"])
def test_bad_scripts_are_refused_with_one_line(tmp_path, case):
    target = {"missing": tmp_path / "nope.py", "directory": tmp_path,
              "binary": tmp_path / "blob.py", "syntax": tmp_path / "broken.py"}[case]
    if case == "binary":
        target.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    if case == "syntax":
        target.write_text("def f(:\n    pass\n")
    r = record(str(target), "--x", cwd=tmp_path)
    line = one_clean_error_line(r)
    assert str(target) in line or target.name in line
    assert not list(tmp_path.glob("traceinsight-*"))  # nothing left behind


@needs_torch
def test_module_not_found_is_refused_with_one_line(tmp_path):
    r = record("-m", "no_such_pkg_for_traceinsight.mod", cwd=tmp_path)
    line = one_clean_error_line(r)
    assert "no_such_pkg_for_traceinsight" in line
    assert not list(tmp_path.glob("traceinsight-*"))
    assert "not a module name" in one_clean_error_line(record("-m", "a b", cwd=tmp_path))


@needs_torch
def test_unusable_out_dir_is_refused_with_one_line(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    line = one_clean_error_line(record("-o", str(a_file / "sub"), str(SCRIPTS / "infer.py"),
                                       cwd=tmp_path))
    assert "out-dir" in line
    one_clean_error_line(record("-o", str(a_file), str(SCRIPTS / "infer.py"), cwd=tmp_path))


@needs_torch
@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_out_dir_is_refused_with_one_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        line = one_clean_error_line(record("-o", str(ro), str(SCRIPTS / "infer.py"), cwd=tmp_path))
        assert "not writable" in line
    finally:
        ro.chmod(0o700)


@needs_torch
def test_an_earlier_recording_is_never_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    earlier = out / "infer.pt.trace.json.gz"
    earlier.write_bytes(b"earlier")
    line = one_clean_error_line(record("-o", str(out), str(SCRIPTS / "infer.py"), cwd=tmp_path))
    assert "already holds infer.pt.trace.json.gz, which a recording would overwrite" in line
    assert earlier.read_bytes() == b"earlier"


@needs_torch
def test_ranks_of_a_torchrun_launch_record_side_by_side(tmp_path):
    # Under torchrun every rank runs `traceinsight record -o run ...`: each had raced for the same file names
    # (the second refused), or for default folders named by the second they started. Each rank now names its
    # files after itself, so the folder holds one job that `analyze run` reads.
    out = tmp_path / "run"
    for rank, options in (("0", ()), ("1", ("--no-analyze",))):
        r = record(*options, "-o", str(out), str(SCRIPTS / "train.py"), "--iters", "6", cwd=tmp_path,
                   env=_env(RANK=rank, WORLD_SIZE="2", LOCAL_RANK=rank))
        assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert "train.rank0.pt.trace.json.gz" in names and "train.rank1.pt.trace.json.gz" in names
    assert "report.rank0.html" in names and not any(n.startswith("report.html") for n in names)
    # Without -o, a rank's default folder carries its rank.
    r = record("--no-analyze", str(SCRIPTS / "train.py"), "--iters", "4", cwd=tmp_path,
               env=_env(RANK="1", WORLD_SIZE="2"))
    assert r.returncode == 0, r.stderr
    assert [p.name for p in tmp_path.glob("traceinsight-train-rank1-*")]


def test_without_torch_record_says_how_to_install_it(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    r = record_via("sys.modules['torch'] = None", str(script), cwd=tmp_path)
    line = one_clean_error_line(r)
    assert "pip install" in line and "traceinsight-gpu[record]" in line
    assert "hi" not in r.stdout


def test_torch_that_fails_to_import_in_the_script_process_is_one_line(tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('simulated broken torch')\n")
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "fake"), env["PYTHONPATH"]])
    r = record(str(script), cwd=tmp_path, env=env)
    line = one_clean_error_line(r)
    assert "simulated broken torch" in line and "pip install" in line
    assert not list(tmp_path.glob("traceinsight-*"))


def test_record_module_does_not_import_torch():
    code = ("import sys, traceinsight.trace.record, traceinsight.cli\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


def test_options_after_the_script_are_never_taken_by_record():
    """The parser itself: stops at SCRIPT; -m takes the module as SCRIPT."""
    import typer
    from typer.testing import CliRunner

    from traceinsight.cli import record as rec

    calls = []

    def fake_run_record(script, script_args, **opts):
        calls.append((script, script_args, opts))
        return 0

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    original = rec.run_record
    rec.run_record = fake_run_record
    try:
        rec.register(app)
        runner = CliRunner()
        res = runner.invoke(app, ["record", "--steps", "5", "-o", "d", "t.py", "--steps", "7",
                                  "--out-dir", "x", "--help", "-m", "--", "z"])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["record", "--with-stack", "-m", "pkg.mod", "--with-stack", "-v"])
        assert res.exit_code == 0, res.output
    finally:
        rec.run_record = original
    (s1, a1, o1), (s2, a2, o2) = calls
    assert s1 == "t.py" and a1 == ["--steps", "7", "--out-dir", "x", "--help", "-m", "--", "z"]
    assert o1["steps"] == 5 and str(o1["out_dir"]) == "d" and o1["module"] is False
    assert o1["unprofiled_steps"] == 20
    assert s2 == "pkg.mod" and a2 == ["--with-stack", "-v"]
    assert o2["module"] is True and o2["with_stack"] is True


def _maybe_gpu() -> bool:
    return HAVE_TORCH and (Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists())


@pytest.mark.skipif(not _maybe_gpu(), reason="no NVIDIA GPU here")
def test_cuda_activities_are_recorded_when_a_gpu_is_there(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    out = tmp_path / "out"
    r = record("--no-analyze", "-o", str(out), str(SCRIPTS / "gpu_train.py"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = load_trace(out)
    meta = trace["traceinsight_record"]
    assert meta["cuda"] is True and meta["activities"] == ["CPU", "CUDA"]
    assert meta["window"] == "optimizer_steps" and meta["steps_recorded"] == 3
    steps = step_events(trace)
    kernels = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert kernels, "no GPU kernels in the trace"
    assert len(steps) == 3
    assert "unprofiled_step_ms" not in meta  # 8 steps: the script ends 2 after the window

    # 30 steps: 20 timed after the window (the 7th settles), CUDA synchronized at the block's ends,
    # and the analysis calibrates to the figure
    out = tmp_path / "long"
    r = record("--no-analyze", "-o", str(out), str(SCRIPTS / "gpu_train.py"), "--iters", "30",
               cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "gpu done True\n", r.stderr
    meta = load_trace(out)["traceinsight_record"]
    assert meta["unprofiled_steps"] == 20 and meta["unprofiled_step_ms"] > 0
    assert "AdamW.step()" in meta["unprofiled_method"]
    assert "torch.cuda.synchronize() at the block's start and end" in meta["unprofiled_method"]
    (trace_path,) = out.glob("*.pt.trace.json.gz")
    subprocess.run([sys.executable, "-m", "traceinsight", "analyze", "-q", str(trace_path), "--json",
                    str(tmp_path / "a.json")], cwd=tmp_path, env=_env(), check=True,
                   capture_output=True)
    summary = json.loads((tmp_path / "a.json").read_text())["summary"]
    assert summary["unprofiled_step_method"].startswith("measured by traceinsight record")
    assert summary["unprofiled_step_ms"] > 0
