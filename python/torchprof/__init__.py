"""Annotations for programs profiled by torchprof.

    import torchprof

    with torchprof.range("load"):
        ...

    @torchprof.range("forward")      # or bare: @torchprof.range
    def forward(x): ...

    torchprof.mark("checkpoint saved")
    torchprof.step()                 # ends the current step and begins the next

Ranges and marks are NVTX ranges and marks in the default domain, like
torch.cuda.nvtx's. Steps are named ProfilerStep#k as torch.profiler names them;
once a program calls step(), torchprof-run stops marking one step per
optimizer.step() for it. Outside torchprof-run every call is a silent no-op.
"""

import os
import time

__all__ = ["range", "mark", "step", "active"]

_NOT_LOADED = object()
_api = _NOT_LOADED


class _Api:
    """The injected library's C API (inject/c_api.cpp), found in the process."""

    def __init__(self, lib, ctypes):
        self.push = lib.torchprof_range_push
        self.pop = lib.torchprof_range_pop
        self.mark = lib.torchprof_mark
        self.step_range = lib.torchprof_step_range
        self.push.argtypes = [ctypes.c_char_p]
        self.push.restype = ctypes.c_int
        self.pop.argtypes = []
        self.pop.restype = ctypes.c_int
        self.mark.argtypes = [ctypes.c_char_p]
        self.mark.restype = None
        self.step_range.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]
        self.step_range.restype = None
        # PyTorch op ranges (_pytorch_ops.py); None with a library that predates them.
        self.op_push = getattr(lib, "torchprof_op_push", None)
        self.op_pop = getattr(lib, "torchprof_op_pop", None)
        if self.op_push is not None and self.op_pop is not None:
            self.op_push.argtypes = [ctypes.c_char_p]
            self.op_push.restype = ctypes.c_int
            self.op_pop.argtypes = []
            self.op_pop.restype = ctypes.c_int
        # nn.Module calls (_modules.py, --with-modules).
        self.module_push = getattr(lib, "torchprof_module_push", None)
        self.module_pop = getattr(lib, "torchprof_module_pop", None)
        if self.module_push is not None and self.module_pop is not None:
            self.module_push.argtypes = [ctypes.c_char_p]
            self.module_push.restype = ctypes.c_int
            self.module_pop.argtypes = []
            self.module_pop.restype = ctypes.c_int


def _load():
    # Loaded on first use: ctypes costs milliseconds to import. The library is
    # preloaded by torchprof-run, so its symbols are in the global scope.
    global _api
    _api = None
    if not os.environ.get("TORCHPROF_SOCKET"):
        return None
    try:
        import ctypes

        _api = _Api(ctypes.CDLL(None), ctypes)
    except (OSError, AttributeError, ImportError):
        _api = None
    return _api


def _get():
    return _load() if _api is _NOT_LOADED else _api


def active():
    """True when running under torchprof-run."""
    return _get() is not None


def _encode(name):
    return str(name).encode("utf-8", "replace")


class range:  # noqa: A001 - named like nvtx.range and torch.profiler.record_function
    """A named range: ``with torchprof.range("x"):`` or ``@torchprof.range("x")``.

    As a bare decorator (``@torchprof.range``) the range takes the function's
    qualified name.
    """

    def __new__(cls, name=None):
        if callable(name) and not isinstance(name, str):
            return cls(getattr(name, "__qualname__", repr(name)))(name)
        return super().__new__(cls)

    def __init__(self, name=None):
        self._name = None if name is None else _encode(name)

    def __enter__(self):
        api = _get()
        if api is not None:
            api.push(self._name or b"")
        return self

    def __exit__(self, *exc):
        api = _get()
        if api is not None:
            api.pop()
        return False

    def __call__(self, fn):
        import functools

        name = self._name or _encode(getattr(fn, "__qualname__", repr(fn)))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            api = _get()
            if api is None:
                return fn(*args, **kwargs)
            api.push(name)
            try:
                return fn(*args, **kwargs)
            finally:
                api.pop()

        return wrapper


def mark(name):
    """An instant event."""
    api = _get()
    if api is not None:
        api.mark(_encode(name))


def _emit_step(index, start_ns, end_ns):
    api = _get()
    if api is not None:
        api.step_range(b"ProfilerStep#%d" % index, start_ns, end_ns)


class _UserSteps:
    """Steps the program marks with torchprof.step()."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.called = False
        self.index = 0
        self.start_ns = time.monotonic_ns()

    def step(self):
        end = time.monotonic_ns()
        self.called = True
        _emit_step(self.index, self.start_ns, end)
        self.index += 1
        self.start_ns = end


_user_steps = _UserSteps()


def step():
    """Ends the current step and begins the next, as torch.profiler.profile.step()."""
    _user_steps.step()


def _after_fork_in_child():
    # A forked child is a new process in the output: its steps count from 0.
    _user_steps.reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
