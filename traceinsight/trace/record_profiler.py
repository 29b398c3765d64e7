"""The profiler side of ``traceinsight record``: the Recorder that the child interpreter drives.

Loaded by path from record_boot.py (never as ``traceinsight.trace.record_profiler``), so the
recorded script sees no ``traceinsight`` module; like the boot file it imports only the standard
library and, when called, the ``torch`` the script uses.
"""
import os
import sys
import signal
import threading
import weakref


class Recorder:
    """Owns the profiler sessions and the hooks that step them (main thread only). `laps` is
    record_laps.Laps, `quiet` record_quiet.QuietKineto and `describe` record_boot's one-line exception text,
    handed in by record_boot, which loads the files by path."""

    def __init__(self, torch, cfg, work_dir, laps, quiet, describe):
        from torch.profiler import ProfilerActivity, profile, schedule

        self.torch = torch
        self._describe = describe
        self._profile = _lean_profile_class(torch, profile)
        self._schedule = schedule
        self.cfg = cfg
        self.work_dir = work_dir
        self.cuda = bool(torch.cuda.is_available())
        self.activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self.pid = os.getpid()
        self.main_ident = threading.main_thread().ident
        self.mode = "probe"          # probe -> forward -> optimizer, or probe -> optimizer
        self.prof = None
        self.traces = {}             # "probe" | "forward" | "optimizer" -> raw trace path
        self.capped = False          # the probe hit --max-seconds
        self.disabled = False
        self.yielded = False         # the script started its own profiler: ours stepped aside
        self.depth = 0               # nesting of module forward calls on the main thread
        self.primary_opt = None      # weakref to the optimizer whose steps count
        self.optimizer_name = None
        self.forward_module = None
        self.warnings = []
        self._cap_timer = None
        self._old_alarm = None
        self._cap_fn = self._cap_handler  # one bound-method object, so `is` can find it again
        self._fwd_handles = []
        self._opt_handle = None
        self._quiet = quiet()
        self._remove_forward_hooks_pending = False
        # the un-profiled step: steps after the window, the profiler stopped (record_laps)
        self.timer = laps(torch, self.cuda, max(0, int(cfg.get("unprofiled_steps") or 0)))
        self._forward_ref = None     # weakref to the module whose outermost calls end a forward step
        try:
            from torch.compiler import is_compiling
        except ImportError:  # torch < 2.3
            try:
                from torch._dynamo import is_compiling
            except ImportError:
                def is_compiling():
                    return False
        self._is_compiling = is_compiling

    # -- profiler sessions --------------------------------------------------------------
    def _new_profile(self, kind, scheduled):
        def ready(prof, kind=kind):
            path = os.path.join(self.work_dir, kind + ".json")
            prof.export_chrome_trace(path)
            self.traces[kind] = path

        kwargs = dict(activities=self.activities, on_trace_ready=ready,
                      record_shapes=self.cfg["record_shapes"],
                      profile_memory=self.cfg["profile_memory"],
                      with_stack=self.cfg["with_stack"])
        with self._quiet:
            if scheduled:
                # A new session never records from its first step: it is started in the same
                # hook that stopped the previous one, inside record_function ranges (the
                # optimizer's own "Optimizer.step#..." at least) that began under that one,
                # and Kineto would close those with the dead session's context (a crash in
                # the next garbage collection). With --skip 0 --warmup 0, one step waits.
                wait = self.cfg["skip"] if (self.cfg["skip"] or self.cfg["warmup"]) else 1
                kwargs["schedule"] = self._schedule(
                    wait=wait, warmup=self.cfg["warmup"], active=self.cfg["steps"], repeat=1)
            prof = self._profile(**kwargs)
            prof.start()
        return prof

    def start(self):
        import warnings
        # our global module hooks are the "global hooks" torch.compile warns about; the
        # depth count already ignores the extra OptimizedModule call, so the script's user
        # should not see a warning that plain python would not give
        warnings.filterwarnings("ignore", category=UserWarning,
                                message=r"Using `torch\.compile\(module\)` when there are global hooks")
        self._yield_to_scripts_profiler()
        self.prof = self._new_profile("probe", scheduled=False)
        self._arm_cap()
        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.nn.modules.module import (register_module_forward_hook,
                                             register_module_forward_pre_hook)
        self._opt_handle = register_optimizer_step_post_hook(self._on_optimizer_step)
        self._fwd_handles.append(register_module_forward_pre_hook(self._on_forward_pre))
        try:
            post = register_module_forward_hook(self._on_forward_post, always_call=True)
        except TypeError:  # torch without always_call
            post = register_module_forward_hook(self._on_forward_post)
        self._fwd_handles.append(post)

    def _yield_to_scripts_profiler(self):
        """A script that starts its own torch.profiler gets it: one thread holds one profiler (a second
        raises "Profiler is already enabled on this thread", and the crash that follows loses both
        traces), so our session stops, keeps what it had exported, and records nothing more."""
        from torch.profiler import profile
        from torch.autograd import profiler as legacy
        ours, recorder = self._profile, self

        def step_aside():
            if not recorder._here():
                return
            recorder.yielded = True
            recorder._disarm_cap()
            recorder._give_up("traceinsight record: the script starts its own torch.profiler; traceinsight's "
                              "stepped aside so that it runs (analyze the trace the script writes: traceinsight "
                              "analyze FILE)")

        def wrap(cls, name):
            original = getattr(cls, name)

            def guarded(prof, *args, **kwargs):
                if not isinstance(prof, ours):
                    step_aside()
                return original(prof, *args, **kwargs)
            setattr(cls, name, guarded)
        wrap(profile, "start")
        wrap(legacy.profile, "__enter__")

    def _stop_current(self):
        """Stop the running session; it exports if it was recording (on_trace_ready)."""
        prof, self.prof = self.prof, None
        if prof is not None:
            with self._quiet:
                prof.stop()

    def _switch(self, mode):
        if self.mode == "probe":
            self._disarm_cap()
        self._stop_current()
        self.mode = mode
        if mode == "optimizer":
            self._remove_forward_hooks()
            self.timer.reset()       # laps of forward calls are no steps of this window
        self.prof = self._new_profile(mode, scheduled=True)

    def _advance(self):
        prof = self.prof
        if prof is None:
            return
        try:
            changes = prof.schedule(prof.step_num + 1) != prof.current_action
        except Exception:
            changes = True
        if changes:  # Kineto starts/stops (and talks) only when the schedule's phase changes
            with self._quiet:
                prof.step()
        else:
            prof.step()
        if self.mode in self.traces:  # the window is complete and exported
            self._stop_current()
            # forward hooks cost Python time on every module call: drop them once their
            # window is done (deferred: never mutate the hook dicts while torch iterates them)
            self._remove_forward_hooks_pending = True

    # -- hooks --------------------------------------------------------------------------
    def _here(self):
        return (not self.disabled and threading.get_ident() == self.main_ident
                and os.getpid() == self.pid)

    def _on_optimizer_step(self, optimizer, args, kwargs):
        if self._is_compiling() or not self._here():  # never put our side effects in a graph
            return
        try:
            primary = self.primary_opt() if self.primary_opt is not None else None
            if primary is None:  # the first optimizer (or its successor once it is gone)
                self.primary_opt = weakref.ref(optimizer)
                self.optimizer_name = type(optimizer).__name__
            elif primary is not optimizer:
                return  # one step per iteration, also with several optimizers (GANs, ...)
            if self.mode != "optimizer":
                self._switch("optimizer")
            elif "optimizer" not in self.traces:
                self._advance()
            elif self.timer.wanted():
                self.timer.tick("optimizer")
        except Exception as exc:  # never break the user's training loop
            self._internal_error(exc)

    def timing(self):
        """What the parent needs to state the un-profiled step (status.json)."""
        return self.timer.timing(self.traces, self.optimizer_name, self.forward_module)

    def _on_forward_lap(self, module, args, output):
        """An outermost call of the forward window's module after the window (its own hook)."""
        if self._is_compiling() or not self._here():
            return None
        try:
            if self.mode != "forward" or not self.timer.wanted():
                self.timer.remove_hook()
            else:
                self.timer.tick("forward")
        except Exception as exc:
            self._internal_error(exc)
        return None

    def _on_forward_pre(self, module, args):
        if self._is_compiling():
            return None
        if self._remove_forward_hooks_pending:
            self._remove_forward_hooks()  # safe here: torch iterates a copy of the hooks
            return None
        if self._here():
            self.depth += 1
        return None

    def _on_forward_post(self, module, args, output):
        if self._is_compiling() or not self._here() or self.depth <= 0:
            return None
        self.depth -= 1
        if self.depth or self._remove_forward_hooks_pending:
            return None
        try:
            if not _has_state(module):  # parameter-free modules (transforms) are no model
                return None
            if self.mode == "probe":
                self.forward_module = type(module).__name__
                self._forward_ref = weakref.ref(module)
                self._switch("forward")
            elif self.mode == "forward" and "forward" not in self.traces:
                self._advance()
                if "forward" in self.traces:    # (registered on the module now: its next call starts the block)
                    self.timer.time_forward_of(self._forward_ref(), self._on_forward_lap)
        except Exception as exc:
            self._internal_error(exc)
        return None

    def _remove_forward_hooks(self):
        handles, self._fwd_handles = self._fwd_handles, []
        for handle in handles:
            handle.remove()
        self._remove_forward_hooks_pending = False
        self.depth = 0

    def _internal_error(self, exc):
        self._give_up("traceinsight record: profiling stopped after an internal error: " + self._describe(exc))

    def _give_up(self, msg):
        """Say why, stop the session (what it had exported stays) and record nothing more."""
        self.warnings.append(msg)
        print(msg, file=sys.stderr)
        self.disabled = True
        try:
            self._stop_current()
        except Exception:
            pass

    # -- the whole-run cap ----------------------------------------------------------------
    def _arm_cap(self):
        seconds = self.cfg.get("max_seconds") or 0
        sig = getattr(signal, "SIGALRM", None)
        if seconds <= 0 or sig is None or signal.getsignal(sig) is not signal.SIG_DFL:
            return
        # The timer thread may not touch the profiler (its state is the main thread's):
        # it asks the main thread to run _cap_handler through a simulated signal
        # (_thread.interrupt_main sends nothing to the OS; no EINTR in the script).
        self._old_alarm = signal.signal(sig, self._cap_fn)
        import _thread

        def fire():
            if signal.getsignal(sig) is self._cap_fn:
                _thread.interrupt_main(sig)

        self._cap_timer = threading.Timer(seconds, fire)
        self._cap_timer.daemon = True
        self._cap_timer.name = "traceinsight-record-cap"
        self._cap_timer.start()

    def _disarm_cap(self):
        timer, self._cap_timer = self._cap_timer, None
        if timer is not None:
            timer.cancel()
        sig = getattr(signal, "SIGALRM", None)
        if (sig is not None and self._old_alarm is not None
                and signal.getsignal(sig) is self._cap_fn
                and threading.current_thread() is threading.main_thread()):
            signal.signal(sig, self._old_alarm)
        self._old_alarm = None

    def _cap_handler(self, signum, frame):
        if self.mode != "probe" or self.prof is None or os.getpid() != self.pid:
            return
        try:
            self._disarm_cap()
            self._stop_current()
            self.capped = True
        except Exception as exc:
            self._internal_error(exc)

    # -- the end ----------------------------------------------------------------------------
    def finish(self):
        """Stop everything, export what was recorded, say which trace stands."""
        self._disarm_cap()
        self.disabled = True
        try:
            self._stop_current()
        except Exception as exc:
            msg = "traceinsight record: stopping the profiler failed: " + self._describe(exc)
            self.warnings.append(msg)
            print(msg, file=sys.stderr)
        for handle in self._fwd_handles + ([self._opt_handle] if self._opt_handle else []):
            try:
                handle.remove()
            except Exception:
                pass
        self._fwd_handles, self._opt_handle = [], None
        self.timer.remove_hook()
        cfg = self.cfg
        plan = "skip %d, warmup %d, record %d" % (cfg["skip"], cfg["warmup"], cfg["steps"])
        if "optimizer" in self.traces:
            return ("optimizer_steps", self.traces["optimizer"],
                    "a step ends at each %s.step() on the main thread; the iteration before the "
                    "first optimizer step is never recorded (%s)" % (self.optimizer_name, plan))
        if "forward" in self.traces:
            detail = ("a step ends with each outermost %s forward call on the main thread "
                      "(no optimizer step was seen; %s)" % (self.forward_module, plan))
            if self.mode == "optimizer":
                detail = ("a step ends with each outermost %s forward call: the optimizer steps "
                          "seen later did not reach their window (%s)" % (self.forward_module, plan))
            return ("forward_calls", self.traces["forward"], detail)
        if self.yielded:    # a partial probe is no window the report could stand on
            return (None, None, "the script started its own torch.profiler before traceinsight's "
                                "window was complete")
        if "probe" in self.traces:
            if self.mode != "probe":
                detail = ("the script ended before the step window was reached (%s); this is the "
                          "run from the script's start to its first %s%s" % (
                              plan, "optimizer step" if self.mode == "optimizer"
                              else "outermost forward call",
                              " (at most its first %g s)" % cfg["max_seconds"] if self.capped else ""))
            elif self.capped:
                detail = ("no optimizer step or nn.Module forward call: the run was recorded from "
                          "the script's start for its first %g s (--max-seconds)" % cfg["max_seconds"])
            else:
                detail = ("no optimizer step or nn.Module forward call: the whole run was recorded")
            return ("whole_run", self.traces["probe"], detail)
        return (None, None, "nothing was recorded")


def _lean_profile_class(torch, profile):
    """torch.profiler.profile that does not import torch._inductor (and dynamo) to start.

    prepare_trace() asks ``hasattr(torch, "_inductor")`` to read one inductor setting, and
    torch's lazy ``__getattr__`` imports inductor and dynamo for that: seconds of start-up,
    and modules the script would not have under plain python. If the script has not
    imported inductor, that setting is moot; the question is answered "no" instead.
    """
    class LeanProfile(profile):
        def prepare_trace(self):
            lazy = torch.__dict__.get("__getattr__")
            if lazy is None or "torch._inductor" in sys.modules:
                return super().prepare_trace()

            def no_inductor(name):
                if name == "_inductor":
                    raise AttributeError(name)
                return lazy(name)

            torch.__getattr__ = no_inductor
            try:
                return super().prepare_trace()
            finally:
                torch.__getattr__ = lazy

    LeanProfile.__name__ = LeanProfile.__qualname__ = "profile"
    return LeanProfile


def _has_state(module):
    for _ in module.parameters():
        return True
    for _ in module.buffers():
        return True
    return False
