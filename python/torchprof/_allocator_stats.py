"""--profile-memory: the CUDA caching allocator's cudaMalloc retries and out-of-memory
errors per device (torch.cuda.memory_stats()'s num_alloc_retries and num_ooms), read
once at exit when the program initialised CUDA, and handed to the injected library
(torchprof_allocator_stats). The allocator's reports, which carry the bytes, do not
carry these counters."""

import atexit
import os

from torchprof._util import log as _log

_VAR = "TORCHPROF_PYTORCH_OPS"


def install(torch):
    words = {w.strip() for w in os.environ.get(_VAR, "").split(",")}
    if "memory" not in words:
        return False
    atexit.register(_report, torch)
    return True


def _report(torch):
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return
        import ctypes

        fn = getattr(ctypes.CDLL(None), "torchprof_allocator_stats", None)
        if fn is None:
            return
        fn.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
        fn.restype = None
        for device in range(cuda.device_count()):
            stats = cuda.memory_stats(device)
            if not stats:  # a device the program never allocated on
                continue
            fn(device, int(stats.get("num_alloc_retries", 0)), int(stats.get("num_ooms", 0)))
    except Exception as e:  # noqa: BLE001 - the program's exit goes on whatever happens here
        _log("no allocator counters: %s: %s" % (type(e).__name__, e))
