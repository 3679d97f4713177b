"""Annotations for programs profiled by torchprof.

    import torchprof
    with torchprof.range("load"):
        ...
    @torchprof.range("forward")
    def forward(x): ...
    torchprof.mark("checkpoint saved")
    torchprof.step()          # ends the current step and begins the next

Outside torchprof-run every call is a silent no-op.
"""

import contextlib
import ctypes
import functools
import time

__all__ = ["range", "mark", "step", "active"]


def _load():
    try:
        lib = ctypes.CDLL(None)
        push = lib.torchprof_range_push
        pop = lib.torchprof_range_pop
        mark_fn = lib.torchprof_mark
        step_fn = lib.torchprof_step_range
    except (OSError, AttributeError):
        return None
    push.argtypes = [ctypes.c_char_p]
    push.restype = ctypes.c_int
    pop.argtypes = []
    pop.restype = ctypes.c_int
    mark_fn.argtypes = [ctypes.c_char_p]
    mark_fn.restype = None
    step_fn.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]
    step_fn.restype = None
    return push, pop, mark_fn, step_fn


_LIB = _load()


def active():
    """True when running under torchprof-run."""
    return _LIB is not None


class range(contextlib.ContextDecorator):  # noqa: A001 - mirrors nvtx.range / record_function
    """A named range: ``with torchprof.range("x"):`` or ``@torchprof.range("x")``."""

    def __init__(self, name):
        self._name = str(name).encode("utf-8", "replace")

    def __enter__(self):
        if _LIB is not None:
            _LIB[0](self._name)
        return self

    def __exit__(self, *exc):
        if _LIB is not None:
            _LIB[1]()
        return False


def mark(name):
    """An instant event."""
    if _LIB is not None:
        _LIB[2](str(name).encode("utf-8", "replace"))


class _Steps:
    def __init__(self):
        self.index = 0
        self.start_ns = time.monotonic_ns()

    def close(self):
        end = time.monotonic_ns()
        if _LIB is not None:
            name = "ProfilerStep#%d" % self.index
            _LIB[3](name.encode(), self.start_ns, end)
        self.index += 1
        self.start_ns = end


_steps = _Steps()
_user_steps = False


def step():
    """Ends the current step and begins the next (as ``torch.profiler.profile.step``)."""
    global _user_steps
    _user_steps = True
    _steps.close()


def _auto_step():
    # Called after each optimizer.step() unless the program marks steps itself.
    if not _user_steps:
        _steps.close()


def _restart_steps():
    _steps.start_ns = time.monotonic_ns()
