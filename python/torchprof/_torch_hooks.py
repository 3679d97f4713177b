"""Automatic steps (one ProfilerStep#k per round of optimizer steps) and the other torch
hooks of unmodified PyTorch programs.

Installed by the start-up hook (sitecustomize.py) right after the program itself
has imported torch; importing torch from the hook would slow every Python start-up
and could initialise CUDA before the program chose its device.

Which optimizer steps end a step is _step_rule.py's business; this module tells it
when each optimizer is created and collected and when each outermost step() ends:

- torch >= 2.0: torch.optim.optimizer.register_optimizer_step_pre_hook and
  register_optimizer_step_post_hook, global hooks that torch's step wrapper
  (Optimizer.profile_hook_step) calls around every optimizer's step(). They fire for
  every optimizer, one wrapping another included, and twice for one optimizer whose
  step() calls its base class's hooked step() (super().step()): a post hook whose call
  began before the same optimizer's last counted step ended is that outer call, and
  does not count again. The post hooks run inside the wrapper's record_function, so a
  step ends when the wrapper returns (_after_wrapper), as torch.profiler's step() does.
- torch 1.x has no such hooks: each optimizer class gets a wrapper around its step(),
  put on the class once, as torch's own _hook_for_profile puts its wrapper there,
  with the same rule.

A program that marks its own steps (torchprof.step(), or ProfilerStep# ranges of its
own, which the injected library notices) gets no automatic ones: the first steps are
held until the rule has seen two rounds, by when such a program has shown it.
"""

import atexit
import os
import sys
import threading
import time
import weakref

import torchprof
from torchprof import _step_rule
from torchprof._util import log, replace_attr

_MAX_OPEN_CALLS = 8  # step() calls of one optimizer still open (an exception leaves one)


class _AutoSteps:
    def __init__(self):
        self._exit_registered = False
        self._keys = {}  # id(optimizer) -> its weakref.finalize (None: no weak references)
        # Collected optimizers, told to the rule under the lock by the next call: a
        # finalizer runs whenever the garbage collector does, the lock perhaps held.
        self._gone = []
        self.rule = _step_rule.StepRule(self._emit, time.monotonic_ns())
        self.reset()

    def reset(self):
        self._lock = threading.Lock()
        self._open = {}      # key -> start times of its step() calls in progress
        self._last_end = {}  # key -> end of its last counted step
        self.rule.reset(time.monotonic_ns())

    @staticmethod
    def _emit(index, start_ns, end_ns):
        if not torchprof._user_steps.called:
            torchprof._emit_step(index, start_ns, end_ns)

    def _key(self, optimizer):
        key = id(optimizer)
        if key not in self._keys:
            try:
                finalizer = weakref.finalize(optimizer, self._collected, key)
                finalizer.atexit = False
            except TypeError:  # no weak references: it stays alive for the rule
                finalizer = None
            self._keys[key] = finalizer
        return key

    def _collected(self, key):
        self._gone.append(key)

    def _forget_collected(self):
        while self._gone:
            key = self._gone.pop()
            self._keys.pop(key, None)
            self._open.pop(key, None)
            self._last_end.pop(key, None)
            self.rule.collected(key)

    # --- what the hooks call ---------------------------------------------------

    def created(self, optimizer):
        with self._lock:
            self._forget_collected()
            self.rule.created(self._key(optimizer), time.monotonic_ns())

    def entered(self, optimizer):
        now = time.monotonic_ns()
        with self._lock:
            calls = self._open.setdefault(self._key(optimizer), [])
            calls.append(now)
            if len(calls) > _MAX_OPEN_CALLS:
                del calls[0]

    def abandoned(self, optimizer):
        """step() raised: that call counts for nothing."""
        with self._lock:
            calls = self._open.get(self._key(optimizer))
            if calls:
                calls.pop()

    def left(self, optimizer):
        now = time.monotonic_ns()
        with self._lock:
            self._forget_collected()
            key = self._key(optimizer)
            calls = self._open.get(key)
            began = calls.pop() if calls else now
            if self._last_end.get(key, -1) > began:
                return  # the outer call around a step already counted
            self._last_end[key] = now
            if torchprof._user_steps.called:
                return
            self.rule.stepped(key, now)
            if not self._exit_registered:
                self._exit_registered = True
                atexit.register(self.flush)

    def flush(self):
        with self._lock:
            self._forget_collected()
            self.rule.flush()


_steps = _AutoSteps()


def _quietly(fn):
    """A hook that never raises into the program's step()."""

    def hook(optimizer, *_):
        try:
            fn(optimizer)
        except Exception as e:  # noqa: BLE001
            log("step hook: %s: %s" % (type(e).__name__, e))
        return None  # a pre hook returning something would replace step()'s arguments

    return hook


def _after_wrapper(fn):
    """torch >= 2.0 calls the post hooks inside its step wrapper's record_function
    (Optimizer.step#SGD.step), and torch.profiler's step() comes after the wrapper has
    returned: the step ends when that wrapper returns. A one-shot profile function on the
    wrapper's frame (the hook's caller) sees it return; a program with a profile function
    of its own (sys.getprofile()) keeps it, and the step ends at the hook."""
    quiet = _quietly(fn)

    def hook(optimizer, *_):
        try:
            caller = sys._getframe(1)
            code = caller.f_code
            if (sys.getprofile() is None and code.co_name == "wrapper"
                    and code.co_filename.endswith(os.path.join("optim", "optimizer.py"))):
                def one_shot(frame, event, _arg):
                    if event == "return" and frame is caller:
                        sys.setprofile(None)
                        quiet(optimizer)

                sys.setprofile(one_shot)
                return None
        except Exception as e:  # noqa: BLE001
            log("step hook: %s: %s" % (type(e).__name__, e))
        return quiet(optimizer)

    return hook


def _wrap_class_step(cls):
    """torch 1.x: our wrapper around cls.step, outside torch's profile_hook_step."""
    step = cls.step
    if getattr(step, "_torchprof_step", False):
        return

    entered, abandoned, left = _quietly(_steps.entered), _quietly(_steps.abandoned), _quietly(_steps.left)

    def wrapper(self, *args, **kwargs):
        entered(self)
        try:
            out = step(self, *args, **kwargs)
        except BaseException:
            abandoned(self)
            raise
        left(self)
        return out

    replace_attr(cls, "step", wrapper)
    wrapper._torchprof_step = True
    if hasattr(step, "hooked"):
        wrapper.hooked = step.hooked  # torch's own wrapper stays the only one it adds


def _hook_steps(opt_mod):
    """The version switch: "global hooks" (torch >= 2.0), "class step" (torch 1.x), or
    None when neither is there."""
    pre = getattr(opt_mod, "register_optimizer_step_pre_hook", None)
    post = getattr(opt_mod, "register_optimizer_step_post_hook", None)
    if pre is not None and post is not None:
        pre(_quietly(_steps.entered))
        post(_after_wrapper(_steps.left))
        return "global hooks"
    if hasattr(opt_mod.Optimizer, "step"):
        return "class step"
    return None


def _wrap_init(optimizer_cls, wrap_step):
    original = optimizer_cls.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            if wrap_step:
                _wrap_class_step(type(self))
            _steps.created(self)
        except Exception as e:  # noqa: BLE001
            log("optimizer hook: %s: %s" % (type(e).__name__, e))

    replace_attr(optimizer_cls, "__init__", __init__)


def install_steps(opt_mod):
    how = _hook_steps(opt_mod)
    if how is None:
        return None
    _wrap_init(opt_mod.Optimizer, wrap_step=how == "class step")
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_steps.reset)
    _steps.reset()
    return how


def install(torch):
    """Called once torch has been imported (sys.modules['torch'] is `torch`). Each part
    is on its own: one that fails leaves the others."""
    try:
        from torch.optim import optimizer as opt_mod

        install_steps(opt_mod)
    except Exception as e:  # noqa: BLE001
        log("no automatic steps: %s: %s" % (type(e).__name__, e))
    try:
        from torchprof import _data_loader

        _data_loader.install(torch, torchprof._get())
    except Exception as e:  # noqa: BLE001
        log("no DataLoader ranges: %s: %s" % (type(e).__name__, e))
    try:
        from torchprof import _allocator_stats

        _allocator_stats.install(torch)
    except Exception as e:  # noqa: BLE001
        log("no allocator counters: %s: %s" % (type(e).__name__, e))
    from torchprof import _pytorch_ops

    _pytorch_ops.install(torch)
    if _pytorch_ops.modules_wanted():
        try:
            from torchprof import _modules

            why = _modules.install(torch, torchprof._get())
        except Exception as e:  # noqa: BLE001
            why = "%s: %s" % (type(e).__name__, e)
        if why is not None:
            sys.stderr.write("torchprof: --with-modules: no module calls (%s)\n" % why)
