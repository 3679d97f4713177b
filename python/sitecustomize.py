"""torchprof's bootstrap for Python programs run under torchprof-run.

Python imports the first ``sitecustomize`` on its path at start-up; the launcher puts
this directory first. The bootstrap stays silent, keeps the program's behaviour, runs
any sitecustomize the user already had, and arranges for step markers once torch is
imported.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_next_sitecustomize():
    # Look for another sitecustomize on the path after this directory and run it in
    # place of this module, as Python would have done without us.
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _install():
    if not os.environ.get("TORCHPROF_SOCKET"):
        return
    try:
        from torchprof import _torch_hooks
        _torch_hooks.install()
    except Exception:  # the program must run whatever happens here
        pass


_install()
_run_next_sitecustomize()
