"""One step per optimizer.step() for unmodified PyTorch programs.

Installed by the start-up hook (sitecustomize.py) right after the program itself
has imported torch; importing torch from the hook would slow every Python start-up
and could initialise CUDA before the program chose its device.

Step k runs from the end of step k-1 to the end of the k-th optimizer.step(); step 0
starts when the last optimizer is created before it ends (else when torch is
imported). With several optimizers, the first one to step drives the steps (one
step per iteration of a GAN-style loop), until it is garbage-collected.

Step 0 is held back until the second optimizer.step() (or exit): by then a program
that marks its own steps (torchprof.step(), or its own ProfilerStep# ranges, which
the injected library notices) has shown it, and no automatic step gets mixed in.
"""

import atexit
import os
import time
import weakref

import torchprof


class _AutoSteps:
    def __init__(self):
        self._exit_registered = False
        self.reset()

    def reset(self):
        self.index = 0
        self.start_ns = time.monotonic_ns()
        self.held = None  # (start, end) of step 0 until the next step confirms it
        self.driver = None  # weakref to the optimizer whose steps count

    def optimizer_created(self):
        if self.index == 0:
            self.start_ns = time.monotonic_ns()

    def optimizer_stepped(self, optimizer):
        if torchprof._user_steps.called:
            self.held = None
            return
        if not self._is_driver(optimizer):
            return
        end = time.monotonic_ns()
        if self.index == 0:
            self.held = (self.start_ns, end)
            self._register_exit()
        else:
            self.release_held()
            torchprof._emit_step(self.index, self.start_ns, end)
        self.index += 1
        self.start_ns = end

    def release_held(self):
        held, self.held = self.held, None
        if held is not None and not torchprof._user_steps.called:
            torchprof._emit_step(0, held[0], held[1])

    def _is_driver(self, optimizer):
        current = self.driver() if self.driver is not None else None
        if current is None:
            try:
                self.driver = weakref.ref(optimizer)
            except TypeError:  # no weak references: keep counting every optimizer
                return True
            return True
        return current is optimizer

    def _register_exit(self):
        if not self._exit_registered:
            self._exit_registered = True
            atexit.register(self.release_held)


_steps = _AutoSteps()


def _wrap_init(optimizer_cls):
    original = optimizer_cls.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _steps.optimizer_created()

    for attr in ("__doc__", "__name__", "__qualname__", "__module__"):
        setattr(__init__, attr, getattr(original, attr, None))
    __init__.__wrapped__ = original
    optimizer_cls.__init__ = __init__


def _hook_steps(opt_mod):
    optimizer_cls = opt_mod.Optimizer
    register = getattr(opt_mod, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0
        register(lambda optimizer, args, kwargs: _steps.optimizer_stepped(optimizer))
        return True
    # torch 1.x calls Optimizer._optimizer_step_code() after every step(): an empty
    # method kept as an entry point for profilers.
    original = getattr(optimizer_cls, "_optimizer_step_code", None)
    if original is None:
        return False

    def _optimizer_step_code(self):
        original(self)
        _steps.optimizer_stepped(self)

    optimizer_cls._optimizer_step_code = _optimizer_step_code
    return True


def install(torch):
    """Called once torch has been imported (sys.modules['torch'] is `torch`)."""
    from torch.optim import optimizer as opt_mod

    if not _hook_steps(opt_mod):
        return
    _wrap_init(opt_mod.Optimizer)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_steps.reset)
    _steps.reset()
    from torchprof import _pytorch_ops

    _pytorch_ops.install(torch)
