"""The Python bootstrap's logic without torchprof-run: the step rule driven by tables,
and the torch version switches driven by stand-ins shaped like torch 1.13 and 2.x
(the parts of torch/autograd/profiler.py, torch/optim/optimizer.py and
torch/utils/data/dataloader.py the bootstrap touches, as those versions have them),
plus the real torch of this interpreter where it can run them (a CPU build: its NVTX
profiler refuses to start, but only after the arguments were accepted).

Run as `python3 test_python_units.py SCENARIO` (ctest does); stdlib only besides the
bootstrap's own modules from python/."""

import os
import sys
import threading
import types

import tp
from tp import check, check_eq

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")))

from torchprof import _data_loader, _nvtx_ops, _step_rule  # noqa: E402


# ---------------------------------------------------------------------------
# The step rule


def run_rule(script, limit=_step_rule.LIMIT, live=()):
    """script: a string of optimizer names, one per step (time = position + 1), with
    '+x' creating x, '-x' collecting x, '!' exit. Returns [(index, start, end)]."""
    steps = []
    rule = _step_rule.StepRule(lambda i, s, e: steps.append((i, s, e)), 0, limit=limit)
    for key in live:
        rule.created(key, 0)
    t = 0
    for token in script.split():
        t += 1
        if token == "!":
            rule.flush()
        elif token[0] == "+":
            rule.created(token[1:], t)
        elif token[0] == "-":
            rule.collected(token[1:])
        else:
            rule.stepped(token, t)
    return steps


def ends(steps):
    return [e for _, _, e in steps]


def step_rule():
    # One optimizer: held until its second step, then every step.
    check_eq(run_rule("a"), [], "one step, before exit")
    check_eq(run_rule("a !"), [(0, 0, 1)], "one step, at exit")
    check_eq(run_rule("a a a"), [(0, 0, 1), (1, 1, 2), (2, 2, 3)], "one optimizer")
    # GAN: D then G each iteration: a step ends at G's, D's first step is inside step 0.
    check_eq(run_rule("d g d g d g", live="dg"), [(0, 0, 2), (1, 2, 4), (2, 4, 6)], "gan")
    # G steps first in the loop: then it is D's.
    check_eq(ends(run_rule("g d g d", live="dg")), [2, 4], "gan, G first")
    # A critic: three D steps per G step; the step is the round, not each D step.
    check_eq(ends(run_rule("d d d g d d d g d d d g", live="dg")), [4, 8, 12], "critic")
    # Before G's first step nothing is decided (G is alive): no step per D step.
    check_eq(run_rule("d d d", live="dg"), [], "critic, G not yet stepped")
    # An inner optimizer stepped by an outer one: the outer's step ends last.
    check_eq(ends(run_rule("i o i o i o", live="io")), [2, 4, 6], "wrapped")
    # Step 0 starts at the last creation before the first optimizer step.
    check_eq(run_rule("+a +b a b a b")[0], (0, 2, 4), "step 0 after the optimizers exist")
    check_eq(run_rule("+a a +b b a b")[0][1], 1, "an optimizer made after the first step")


def step_rule_changes():
    # The driver collected: learned again from what stepped since its last step.
    got = ends(run_rule("a a a -a b b b", live="a"))
    check_eq(got, [1, 2, 3, 5, 6, 7], "driver collected, a new optimizer")
    # A second stage: a's optimizer still referenced but idle, b steps on its own.
    # a drives while it steps; b's steps are held until a has missed three rounds, then
    # each b step is a step, the first one closing the step a's last one opened.
    check_eq(ends(run_rule("a a a b b b b b", live="ab")), [1, 2, 3, 4, 5, 6, 7, 8], "two stages")
    check_eq(ends(run_rule("a a a b b", live="ab")), [1, 2, 3], "second stage not yet settled")
    # A skipped step (GradScaler found inf in G's grads): the round stretches, a stays.
    check_eq(ends(run_rule("d g d d g d g", live="dg")), [2, 5, 7], "one G step skipped")
    # An optimizer alive that never steps: decided after LIMIT steps, none lost.
    got = ends(run_rule(" ".join(["a"] * 10), limit=4, live="az"))
    check_eq(got, list(range(1, 11)), "an idle optimizer delays, loses nothing")
    # At exit with several optimizers that stepped once each: the round is all of them.
    check_eq(run_rule("d g !", live="dg"), [(0, 0, 2)], "one round, at exit")


# ---------------------------------------------------------------------------
# Optimizer hooks, torch 2.x: global pre/post hooks around every step


def fake_optim_2x():
    """torch/optim/optimizer.py of 2.x, as far as the bootstrap sees it: global
    pre/post hooks called by the step wrapper, patched onto each class's step."""
    mod = types.SimpleNamespace(pre={}, post={})

    def register_pre(hook):
        mod.pre[len(mod.pre)] = hook

    def register_post(hook):
        mod.post[len(mod.post)] = hook

    def profile_hook_step(func):
        def wrapper(*args, **kwargs):
            self = args[0]
            for hook in list(mod.pre.values()):
                result = hook(self, args, kwargs)
                check(result is None, "a pre hook must return None (else it replaces step()'s arguments)")
            out = func(*args, **kwargs)
            self._optimizer_step_code()
            for hook in list(mod.post.values()):
                hook(self, args, kwargs)
            return out

        wrapper.hooked = True
        return wrapper

    class Optimizer:
        def __init__(self, params, defaults):
            if not getattr(type(self).step, "hooked", False):
                type(self).step = profile_hook_step(type(self).step)

        def _optimizer_step_code(self):
            pass

        def step(self):
            pass

    mod.Optimizer = Optimizer
    mod.register_optimizer_step_pre_hook = register_pre
    mod.register_optimizer_step_post_hook = register_post
    return mod


def capture_steps():
    import torchprof
    from torchprof import _torch_hooks

    got = []
    torchprof._emit_step = lambda index, start, end: got.append(index)
    return _torch_hooks, got


def optimizer_hooks_2x():
    hooks, got = capture_steps()
    mod = fake_optim_2x()
    check_eq(hooks.install_steps(mod), "global hooks", "the switch on a 2.x optimizer module")

    class SGD(mod.Optimizer):
        def step(self):
            pass

    class SubclassSGD(SGD):
        def step(self):
            return super().step()  # SGD.step hooked too: two pre and two post hooks

    SGD([], {})  # hooks SGD.step
    d, g = SGD([], {}), SubclassSGD([], {})
    check(getattr(SubclassSGD.step, "_torchprof_step", False) is False, "2.x: the class step is torch's alone")
    for _ in range(4):
        d.step()
        g.step()
    hooks._steps.flush()
    check_eq(got, [0, 1, 2, 3], "one step per iteration: two optimizers, one of them stepping through super()")


# torch 2.x's step wrapper as torch/optim/optimizer.py has it: the hooks inside a
# record_function named for the step. Compiled under that file name, as the bootstrap
# tells torch's wrapper frame by its code's name and file.
WRAPPER_2X = """
def profile_hook_step(mod, func):
    def wrapper(*args, **kwargs):
        self, *_ = args
        with mod.record_function("Optimizer.step#%s.step" % type(self).__name__):
            for hook in list(mod.pre.values()):
                hook(self, args, kwargs)
            out = func(*args, **kwargs)
            for hook in list(mod.post.values()):
                hook(self, args, kwargs)
            return out
    wrapper.hooked = True
    return wrapper
"""


def fake_optim_2x_ranges():
    import time

    mod = fake_optim_2x()
    mod.range_ends = []

    class record_function:  # noqa: N801 - torch's name
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            return self

        def __exit__(self, *_):
            mod.range_ends.append(time.monotonic_ns())
            return False

    mod.record_function = record_function
    code = {}
    exec(compile(WRAPPER_2X, os.path.join("/stand-in", "torch", "optim", "optimizer.py"), "exec"), code)

    class Optimizer:
        def __init__(self, params, defaults):
            if not getattr(type(self).step, "hooked", False):
                type(self).step = code["profile_hook_step"](mod, type(self).step)

        def step(self):
            pass

    mod.Optimizer = Optimizer
    return mod


def optimizer_hooks_2x_ranges():
    """torch 2.x: a step ends after the step wrapper's Optimizer.step# range closes (where
    torch.profiler's step() comes), not at the post hook inside it; a program's own
    profile function is left alone, and then the step ends at the hook."""
    import torchprof
    from torchprof import _torch_hooks as hooks

    got = []
    torchprof._emit_step = lambda index, start, end: got.append((index, end))
    mod = fake_optim_2x_ranges()
    check_eq(hooks.install_steps(mod), "global hooks", "the switch on a 2.x optimizer module")

    class SGD(mod.Optimizer):
        def step(self):
            pass

    opt = SGD([], {})
    for _ in range(4):
        opt.step()
    hooks._steps.flush()
    check_eq([i for i, _ in got], [0, 1, 2, 3], "a step per optimizer step")
    check_eq(len(mod.range_ends), 4, "the wrapper's ranges")
    for (i, end), closed in zip(got, mod.range_ends):
        check(end >= closed, f"step {i} ends at {end}, after its Optimizer.step# range closed at {closed}")
    check(sys.getprofile() is None, "no profile function left behind")

    def own(frame, event, arg):
        return None

    got.clear()
    mod.range_ends.clear()
    hooks._steps.reset()
    sys.setprofile(own)
    try:
        for _ in range(4):
            opt.step()
    finally:
        kept = sys.getprofile()
        sys.setprofile(None)
    hooks._steps.flush()
    check(kept is own, "the program's profile function is kept")
    check_eq([i for i, _ in got], [0, 1, 2, 3], "a step per optimizer step with a profile function of the program's")
    check(all(end < closed for (_, end), closed in zip(got, mod.range_ends)),
          f"then a step ends at the hook, inside the range: {got} {mod.range_ends}")


def fake_optim_1x():
    """torch/optim/optimizer.py of 1.13: no global hooks; _hook_for_profile wraps the
    class's step, which calls _optimizer_step_code()."""
    mod = types.SimpleNamespace()

    class Optimizer:
        def __init__(self, params, defaults):
            cls = type(self)
            if not getattr(cls.step, "hooked", False):
                func = cls.step

                def wrapper(*args, **kwargs):
                    out = func(*args, **kwargs)
                    args[0]._optimizer_step_code()
                    return out

                wrapper.hooked = True
                cls.step = wrapper

        def _optimizer_step_code(self):
            pass

        def step(self):
            pass

    mod.Optimizer = Optimizer
    return mod


def optimizer_hooks_1x():
    hooks, got = capture_steps()
    mod = fake_optim_1x()
    check_eq(hooks.install_steps(mod), "class step", "the switch on a 1.x optimizer module")

    class SGD(mod.Optimizer):
        def step(self):
            pass

    class Raises(mod.Optimizer):
        def step(self):
            raise ValueError("deliberate")

    class SubclassSGD(SGD):
        def step(self):
            return super().step()

    SGD([], {})
    g, bad = SubclassSGD([], {}), Raises([], {})
    check(SubclassSGD.step.hooked is True, "torch's marker stays on the class step (no second torch wrapper)")
    for _ in range(3):
        try:
            bad.step()
        except ValueError:
            pass
        g.step()
    hooks._steps.flush()
    check_eq(got, [0, 1, 2], "one step per step() call through super(); a raising step() counts for nothing")


# ---------------------------------------------------------------------------
# The NVTX profiler switch (CUDA builds): emit_nvtx's calls without its synchronize


class FakeProfilerState:
    """One profiler state per thread, as torch's ProfilerStateBase."""

    def __init__(self):
        self.tls = threading.local()
        self.calls = []


def fake_torch(version):
    """A CUDA build of torch as far as _nvtx_ops sees it: autograd/profiler.py of 1.13
    ("1.13": no _run_on_profiler_start), 2.x ("2.x"), or older than 1.13 ("1.12": no
    _ExperimentalConfig, a ProfilerConfig of another shape)."""
    state = FakeProfilerState()
    torch = types.SimpleNamespace(version=types.SimpleNamespace(cuda="12.4"))
    torch.cuda = types.SimpleNamespace(synchronize=lambda: state.calls.append("synchronize"))
    prof = types.SimpleNamespace()
    none, nvtx, kineto = "NONE", "NVTX", "KINETO"

    def current():
        return getattr(state.tls, "kind", none)

    def enable(config, activities, scopes=None):
        if current() != none:
            raise RuntimeError("Profiler is already enabled on this thread.")
        state.tls.kind = config[0]
        state.calls.append(("enable", config))

    def disable():
        if current() == none:
            raise RuntimeError("Can't disable Kineto profiler when it's not running")
        state.tls.kind = none
        state.calls.append("disable")

    def config(*args):
        if version == "1.12" and len(args) != 4:
            raise TypeError("__init__(): incompatible constructor arguments")
        return args

    prof._enable_profiler, prof._disable_profiler, prof.ProfilerConfig = enable, disable, config
    prof.ProfilerState = types.SimpleNamespace(NVTX=nvtx, KINETO=kineto)
    if version != "1.12":
        prof._ExperimentalConfig = lambda: "experimental"
    if version == "2.x":
        prof._run_on_profiler_start = lambda: state.calls.append("start")
        prof._run_on_profiler_stop = lambda: state.calls.append("stop")

    class emit_nvtx:  # noqa: N801 - torch's name
        def __init__(self, enabled=True, record_shapes=False):
            self.enabled, self.entered, self.record_shapes = enabled, False, record_shapes

        def __enter__(self):
            if self.entered:
                raise RuntimeError("NVTX annotation context manager is not reentrant")
            self.entered = True
            torch.cuda.synchronize()
            enable((nvtx, self.record_shapes), set())
            return self

        def __exit__(self, *exc):
            torch.cuda.synchronize()
            disable()
            return False

    class profile:  # noqa: N801
        def __init__(self):
            self.enabled = True

        def __enter__(self):
            self._start_trace()
            return self

        def _start_trace(self):
            enable((kineto,), {"cpu"})

        def __exit__(self, *exc):
            disable()
            return False

    prof.emit_nvtx, prof.profile = emit_nvtx, profile
    torch.autograd = types.SimpleNamespace(profiler=prof)
    kinds = types.SimpleNamespace(NONE=none, NVTX=nvtx, KINETO=kineto)
    torch._C = types.SimpleNamespace(_autograd=types.SimpleNamespace(_profiler_type=current),
                                     _profiler=types.SimpleNamespace(ActiveProfilerType=kinds))
    return torch, state


def nvtx_switch_versions():
    for version, expected in [
        ("1.13", [("enable", ("NVTX", True, False, False, False, False, "experimental"))]),
        ("2.x", ["start", ("enable", ("NVTX", True, False, False, False, False, "experimental"))]),
        ("1.12", [("enable", ("NVTX", True))]),  # emit_nvtx itself, its synchronize skipped
    ]:
        torch, state = fake_torch(version)
        switch = _nvtx_ops.Switch(torch)
        switch.on(True)
        check_eq(state.calls, expected, f"torch {version}: switching NVTX on")
        check_eq(torch._C._autograd._profiler_type(), "NVTX", f"torch {version}: NVTX on")
        switch.off()
        check("synchronize" not in state.calls, f"torch {version}: no CUDA synchronisation, got {state.calls}")
        check_eq(torch._C._autograd._profiler_type(), "NONE", f"torch {version}: NVTX off")
        check(torch.cuda.synchronize is not None and "synchronize" not in state.calls,
              f"torch {version}: torch.cuda.synchronize given back")
        torch.cuda.synchronize()
        check_eq(state.calls[-1], "synchronize", f"torch {version}: the program's synchronize still works")


def nvtx_switch_real_torch():
    # This interpreter's torch: its ProfilerConfig binding takes the seven arguments,
    # and _enable_profiler refuses NVTX only because it is a CPU build.
    import torch

    switch = _nvtx_ops.Switch(torch)
    check(switch.direct, f"torch {torch.__version__}: the direct switch is chosen")
    check(type(switch.config(True)).__name__ == "ProfilerConfig", "a real ProfilerConfig is made")
    try:
        switch.on(True)
    except RuntimeError as e:
        check("compiled without CUDA" in str(e), f"refused for the build, not the arguments: {e}")
    else:
        switch.off()
        check(torch.version.cuda is not None, "NVTX came on in a CPU build")
    check_eq(str(torch._C._autograd._profiler_type()), "ActiveProfilerType.NONE", "nothing left on")
    if hasattr(torch.autograd.profiler, "_is_profiler_enabled"):
        check(not torch.autograd.profiler._is_profiler_enabled, "_is_profiler_enabled put back after the refusal")


def nvtx_capture_holds():
    for version in ("1.13", "2.x", "1.12"):
        torch, state = fake_torch(version)
        capture = _nvtx_ops.NvtxCapture(torch, shapes=False).start()
        kind = torch._C._autograd._profiler_type
        check_eq(kind(), "NVTX", f"torch {version}: capture on")
        prof = torch.autograd.profiler
        with prof.profile():  # raised "already enabled" before the capture stepped aside
            check_eq(kind(), "KINETO", f"torch {version}: the program's profiler is on")
        check_eq(kind(), "NVTX", f"torch {version}: capture back after the program's profiler")
        with prof.emit_nvtx(record_shapes=True):
            check_eq(kind(), "NVTX", f"torch {version}: the program's emit_nvtx")
        check_eq(kind(), "NVTX", f"torch {version}: capture back after the program's emit_nvtx")
        check_eq(state.calls.count("synchronize"), 2, f"torch {version}: only the program's emit_nvtx synchronised")
        # Another thread has no profiler of ours: its profiler runs beside it.
        seen = []
        thread = threading.Thread(target=lambda: seen.append(prof.profile().__enter__() is not None))
        thread.start()
        thread.join()
        check_eq(seen, [True], f"torch {version}: a profiler on another thread")
        check_eq(kind(), "NVTX", f"torch {version}: still on in its thread")
        capture._leave()


# ---------------------------------------------------------------------------
# DataLoader ranges


def data_loader_range():
    events = []
    nvtx = [False]

    class It:
        _profile_name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"

        def __init__(self, n):
            self.n = n

        def next(self):
            events.append("fetch")
            if self.n == 0:
                raise StopIteration
            self.n -= 1
            return self.n

    wrapped = _data_loader.make_next(It.next, lambda name: events.append(("push", name)),
                                     lambda: events.append("pop"), lambda: nvtx[0])
    it = It(1)
    check_eq(wrapped(it), 0, "the batch comes back")
    try:
        wrapped(it)
    except StopIteration:
        pass
    else:
        check(False, "StopIteration goes through")
    name = b"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    check_eq(events, [("push", name), "fetch", "pop"] * 2, "a range around each __next__, the last one included")
    events.clear()
    nvtx[0] = True  # torch's record_function range is an NVTX range already
    check_eq(wrapped(It(1)), 0, "under emit_nvtx")
    check_eq(events, ["fetch"], "no second range under torch's NVTX profiler")
    nvtx[0] = False
    del It._profile_name
    events.clear()
    wrapped(It(1))
    check_eq(events[0], ("push", b"enumerate(DataLoader)#It.__next__"), "the name without _profile_name")


def data_loader_real_torch():
    # The real _BaseDataLoaderIter: _profile_name as torch names it, and the NVTX check
    # torch's profiler state answers (KINETO under torch.profiler, not NVTX).
    import torch
    from torch.utils.data import DataLoader

    it = iter(DataLoader(list(range(4)), batch_size=2))
    check_eq(it._profile_name, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "torch's name")
    nvtx_on = _data_loader.nvtx_profiler_check(torch)
    check(not nvtx_on(), "no NVTX profiler")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        check(not nvtx_on(), "torch.profiler is not NVTX")
    api = types.SimpleNamespace(push=lambda name: pushed.append(name), pop=lambda: pushed.append(None))
    pushed = []
    _data_loader.install(torch, api)
    check_eq([b.tolist() for b in DataLoader(list(range(4)), batch_size=2)], [[0, 1], [2, 3]], "same batches")
    check_eq(len(pushed), 6, f"three __next__ calls, a range each: {pushed}")


SCENARIOS = [step_rule, step_rule_changes, optimizer_hooks_2x, optimizer_hooks_2x_ranges, optimizer_hooks_1x,
             nvtx_switch_versions,
             nvtx_switch_real_torch, nvtx_capture_holds, data_loader_range, data_loader_real_torch]

if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in SCENARIOS}))
