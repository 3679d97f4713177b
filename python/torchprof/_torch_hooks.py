"""Step markers for unmodified PyTorch programs: one step per optimizer.step().

The hook is installed when the program itself imports torch; importing torch from
here would slow every Python start-up and could initialise CUDA too early.
"""

import importlib.abc
import importlib.machinery
import sys


def _after_torch_import(torch_module):
    import torchprof

    try:
        from torch.optim import optimizer as opt_mod
    except Exception:
        return
    torchprof._restart_steps()
    hook = getattr(opt_mod, "register_optimizer_step_post_hook", None)
    if hook is not None:  # torch >= 2.0
        hook(lambda *args, **kwargs: torchprof._auto_step())
        return
    # torch < 2.0 calls Optimizer._optimizer_step_code() after every step(); it is
    # an empty method kept for profilers.
    original = opt_mod.Optimizer._optimizer_step_code

    def _optimizer_step_code(self):
        original(self)
        torchprof._auto_step()

    opt_mod.Optimizer._optimizer_step_code = _optimizer_step_code


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            _after_torch_import(module)
        except Exception:
            pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install():
    if "torch" in sys.modules:
        _after_torch_import(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _Finder())
