"""Op capture on CUDA builds of torch: torch's NVTX profiler, as emit_nvtx switches it
on, without the torch.cuda.synchronize() emit_nvtx starts (and ends) with: at import
time that would initialise CUDA before the program picks its device, or forks workers
that must not inherit a CUDA context.

emit_nvtx.__enter__, torch 1.13 (autograd/profiler.py:678) and 2.x (2.6:
autograd/profiler.py:979), is

    torch.cuda.synchronize()
    _run_on_profiler_start()          # torch >= 2.1: profiler._is_profiler_enabled = True
    _enable_profiler(ProfilerConfig(ProfilerState.NVTX, record_shapes,
                                    False, False, False, False, _ExperimentalConfig()),
                     set())

and __exit__ synchronises, then _disable_profiler() and (2.x) _run_on_profiler_stop().
ProfilerConfig takes those seven arguments from 1.13 on; 2.x adds an eighth,
`trace_id: str = ''`, with a default. The version switch: the same calls, made here,
_run_on_profiler_start/_stop only where torch has them; a torch without
_ExperimentalConfig (older than 1.13), or whose ProfilerConfig refuses the seven
arguments, gets emit_nvtx itself with torch.cuda.synchronize replaced by a no-op for
the moment of the call.
"""

from torchprof._holds import Holds
from torchprof._util import log


class Switch:
    """on(shapes) / off() for torch's NVTX profiler in the calling thread."""

    def __init__(self, torch):
        self._torch = torch
        prof = torch.autograd.profiler
        self._prof = prof
        self._enable = getattr(prof, "_enable_profiler", None)
        self._disable = getattr(prof, "_disable_profiler", None)
        self._config = getattr(prof, "ProfilerConfig", None)
        self._state = getattr(getattr(prof, "ProfilerState", None), "NVTX", None)
        self._experimental = getattr(prof, "_ExperimentalConfig", None)
        self._started = getattr(prof, "_run_on_profiler_start", None)
        self._stopped = getattr(prof, "_run_on_profiler_stop", None)
        self.direct = None not in (self._enable, self._disable, self._config, self._state, self._experimental)
        self._ctx = None  # the emit_nvtx of the fallback

    def config(self, shapes):
        return self._config(self._state, bool(shapes), False, False, False, False, self._experimental())

    def on(self, shapes):
        if self.direct:
            try:
                config = self.config(shapes)
            except TypeError as e:  # a ProfilerConfig of another shape
                log("ProfilerConfig: %s; emit_nvtx instead" % e)
                self.direct = False
        if not self.direct:
            self._ctx = self._prof.emit_nvtx(record_shapes=shapes)
            self._without_sync(self._ctx.__enter__)
            return
        if self._started is not None:
            self._started()
        try:
            self._enable(config, set())
        except BaseException:
            if self._stopped is not None:
                self._stopped()
            raise

    def off(self):
        if self._ctx is not None:
            ctx, self._ctx = self._ctx, None
            self._without_sync(lambda: ctx.__exit__(None, None, None))
            return
        self._disable()
        if self._stopped is not None:
            self._stopped()

    def is_own(self, ctx):
        return ctx is self._ctx

    def _without_sync(self, call):
        cuda = self._torch.cuda
        real_sync = cuda.synchronize
        cuda.synchronize = lambda *args, **kwargs: None
        try:
            return call()
        finally:
            cuda.synchronize = real_sync


class NvtxCapture(Holds):
    def __init__(self, torch, shapes):
        super().__init__()
        self._torch = torch
        self._shapes = shapes
        self.switch = Switch(torch)
        autograd = getattr(torch._C, "_autograd", None)
        self._profiler_type = getattr(autograd, "_profiler_type", None)
        types = getattr(getattr(torch._C, "_profiler", None), "ActiveProfilerType", None)
        self._none = getattr(types, "NONE", None)

    def start(self):
        self._enter()
        prof = self._torch.autograd.profiler
        self.hook_profiler_class(prof.profile)
        for name in ("emit_nvtx", "emit_itt"):
            cls = getattr(prof, name, None)
            if cls is not None:
                self.hook_context_class(cls, self.switch.is_own)
        return self

    def _enter(self):
        self.switch.on(self._shapes)
        self._on = True

    def _leave(self):
        self._on = False
        self.switch.off()

    def _can_come_back(self):
        # A profiler the program switched on some other way is still on: wait for it.
        if self._profiler_type is None or self._none is None:
            return True
        return self._profiler_type() == self._none
