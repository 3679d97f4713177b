"""The bootstrap's op capture steps aside while the program profiles by itself.

torch keeps one profiler state per thread: while the bootstrap's emit_nvtx is on, the
program's torch.profiler (or its own emit_nvtx) would fail in _enable_profiler with
"Profiler is already enabled on this thread." (profiler_kineto.cpp, 1.13 to 2.x),
and a dispatch mode of ours would make torch's profiler count some operators twice.
So on the thread the capture was started on, it leaves while the program's profiler
is on and comes back once the last of them has stopped. The hooks:

- torch.autograd.profiler.profile._start_trace (the profiler goes on; torch.profiler's
  _KinetoProfile.start_trace calls it, 1.13 to 2.x) and profile.__exit__ (it goes off;
  _KinetoProfile.stop_trace calls it);
- __enter__/__exit__ of classes such as emit_nvtx and emit_itt, whose __enter__ switches
  a profiler on, for the program's own instances.
"""

import threading

from torchprof._util import log, replace_attr


class Holds:
    """Subclasses give _enter() and _leave() (the capture on and off) and
    _can_come_back()."""

    def __init__(self):
        self._thread = threading.get_ident()
        self._holders = 0       # the program's profilers (and modes) on, on that thread
        self._held_by = set()   # ids of the profilers that took the capture off
        self._on = False

    def _can_come_back(self):
        return True

    def hold(self):
        """Something of the program's wants the thread: the capture leaves. False (and
        nothing held) on another thread, where the capture is not on."""
        if threading.get_ident() != self._thread:
            return False
        if self._holders == 0 and self._on:
            try:
                self._leave()
            except Exception as e:  # noqa: BLE001 - the program's profiler starts regardless
                log("op capture not stopped: %s: %s" % (type(e).__name__, e))
        self._holders += 1
        return True

    def release(self):
        self._holders = max(0, self._holders - 1)
        if self._holders == 0 and not self._on and self._can_come_back():
            try:
                self._enter()
            except Exception as e:  # noqa: BLE001
                log("op capture stopped: %s: %s" % (type(e).__name__, e))

    def _held_while(self, obj, call):
        """call() with the capture off around it when it switches a profiler on; the hold
        lasts until obj's __exit__."""
        if id(obj) in self._held_by or not self.hold():
            return call()
        self._held_by.add(id(obj))
        try:
            return call()
        except BaseException:
            self._held_by.discard(id(obj))
            self.release()
            raise

    def _released_after(self, obj, call):
        try:
            return call()
        finally:
            if id(obj) in self._held_by:
                self._held_by.discard(id(obj))
                self.release()

    def hook_profiler_class(self, profile_cls):
        holds = self
        start, leave = profile_cls._start_trace, profile_cls.__exit__

        def _start_trace(prof):
            return holds._held_while(prof, lambda: start(prof))

        def __exit__(prof, *exc):
            return holds._released_after(prof, lambda: leave(prof, *exc))

        replace_attr(profile_cls, "_start_trace", _start_trace)
        replace_attr(profile_cls, "__exit__", __exit__)

    def hook_context_class(self, cls, is_own):
        """cls.__enter__ switches a profiler on (emit_nvtx, emit_itt); is_own(ctx) tells
        the capture's own instance, which passes straight through."""
        holds = self
        enter, leave = cls.__enter__, cls.__exit__

        def __enter__(ctx):
            if is_own(ctx) or not getattr(ctx, "enabled", True):
                return enter(ctx)
            return holds._held_while(ctx, lambda: enter(ctx))

        def __exit__(ctx, *exc):
            if is_own(ctx):
                return leave(ctx, *exc)
            return holds._released_after(ctx, lambda: leave(ctx, *exc))

        replace_attr(cls, "__enter__", __enter__)
        replace_attr(cls, "__exit__", __exit__)
