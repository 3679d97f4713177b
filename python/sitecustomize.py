"""torchprof's start-up hook for Python programs run under torchprof-run.

Python imports the first ``sitecustomize`` on its path; torchprof-run puts this
directory first on PYTHONPATH. This module prints nothing and imports nothing that a
bare interpreter has not already loaded: it only arranges to be told when the
program imports torch (to mark one step per optimizer.step()), then runs the
sitecustomize that Python would have run without us.
"""

import os
import sys


def _log(message):
    if os.environ.get("TORCHPROF_LOG_LEVEL", "") in ("trace", "debug"):
        sys.stderr.write("torchprof: %s\n" % message)


class _TorchImportHook:
    """A meta path finder that answers for ``torch`` once and wraps its loader, so
    torchprof's hooks run right after torch has finished importing."""

    def __init__(self):
        self._done = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or self._done:
            return None
        self._done = True  # the search below must not find this hook again
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _LoaderAfterTorch(spec.loader, spec, self)
                return spec
        return None


class _LoaderAfterTorch:
    def __init__(self, inner, spec, hook):
        self._inner = inner
        self._spec = spec
        self._hook = hook

    def __getattr__(self, name):  # get_filename, get_resource_reader, …
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        # torch sees its real loader; nothing of ours stays on the module.
        self._spec.loader = self._inner
        module.__loader__ = self._inner
        self._inner.exec_module(module)
        # No import is searching sys.meta_path now: leaving it is safe.
        if self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        try:
            from torchprof import _torch_hooks

            _torch_hooks.install(module)
        except Exception as e:  # noqa: BLE001 - the program runs whatever happens here
            _log("no automatic steps: %s: %s" % (type(e).__name__, e))


def _wants_python_hooks():
    if not os.environ.get("TORCHPROF_SOCKET"):
        return False
    trace = os.environ.get("TORCHPROF_TRACE", "")
    return not trace or "python" in trace.split(",")


def _run_next_sitecustomize():
    """Runs the sitecustomize that comes after this directory on sys.path, as Python
    would have run it; its errors reach site.py, which reports them as usual."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    # The import system's own classes, already loaded: importlib.util would cost
    # milliseconds at every start-up.
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    if bootstrap is None or external is None:
        import importlib.machinery as external
        import importlib.util as bootstrap
    spec = external.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["sitecustomize"]
        raise


if _wants_python_hooks():
    if "torch" in sys.modules:  # cannot happen at start-up, but costs nothing to handle
        try:
            from torchprof import _torch_hooks

            _torch_hooks.install(sys.modules["torch"])
        except Exception as _e:  # noqa: BLE001
            _log("no automatic steps: %s" % _e)
    else:
        sys.meta_path.insert(0, _TorchImportHook())
_run_next_sitecustomize()
