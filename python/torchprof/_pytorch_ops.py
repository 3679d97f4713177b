"""PyTorch operators as NVTX ranges (emit_nvtx) on CUDA builds of torch.

Opt-in through TORCHPROF_PYTORCH_OPS: "nvtx" (each op a range) or "shapes" (with
input sizes, as emit_nvtx(record_shapes=True)); anything else, a CPU build of torch
(which refuses emit_nvtx) or a program that profiles itself leaves torch alone.

emit_nvtx's __enter__ synchronises CUDA first; that would initialise CUDA at import
time, before the program picks its device (or forks workers that must not inherit a
CUDA context). Nothing is queued on a GPU at that point, so the synchronisation is
skipped while the profiler state is switched on.
"""

import os
import sys

_VAR = "TORCHPROF_PYTORCH_OPS"


def _log(message):
    if os.environ.get("TORCHPROF_LOG_LEVEL", "") in ("trace", "debug"):
        sys.stderr.write("torchprof: %s\n" % message)


def install(torch):
    mode = os.environ.get(_VAR, "")
    if mode not in ("nvtx", "shapes"):
        return None
    if getattr(torch.version, "cuda", None) is None:
        _log("%s=%s ignored: this torch has no CUDA (emit_nvtx needs it)" % (_VAR, mode))
        return None
    ctx = torch.autograd.profiler.emit_nvtx(record_shapes=(mode == "shapes"))
    real_sync = torch.cuda.synchronize
    torch.cuda.synchronize = lambda *args, **kwargs: None
    try:
        ctx.__enter__()
    except RuntimeError as e:  # e.g. a profiler already on in this thread
        _log("emit_nvtx not enabled: %s" % e)
        return None
    finally:
        torch.cuda.synchronize = real_sync
    return ctx
