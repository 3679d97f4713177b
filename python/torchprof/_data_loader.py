"""A range around each DataLoader fetch, named as torch.profiler names it.

torch's _BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py, 1.13 to 2.x)
runs its whole body inside record_function(self._profile_name), the name being
"enumerate(DataLoader)#<iterator class>.__next__", e.g.
enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ or
enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__. torch.profiler shows
that range; NVTX sees it only under emit_nvtx. The bootstrap wraps the same method
with an NVTX range of the same name (the default domain, a user_annotation, as
torch.profiler's trace has it), so a training loop's data-loading time shows on CPU
and CUDA builds alike: one range per __next__ call, the call that ends an epoch with
StopIteration included, as torch counts them.

While an NVTX profiler (emit_nvtx: the program's, or the bootstrap's own op capture on
a CUDA build) is on in the calling thread, torch's record_function already makes
that range (a cpu_op with an op_id), and the wrapper adds none. torch.profiler
(Kineto) keeps its ranges to itself, so ours stays under it. The wrapper returns what
__next__ returns and raises what it raises.
"""

from torchprof._util import replace_attr


def nvtx_profiler_check(torch):
    """A function telling whether torch's NVTX profiler is on in the calling thread;
    torch._C._autograd._profiler_type() is there in 1.13 and 2.x."""
    kind = getattr(getattr(torch._C, "_autograd", None), "_profiler_type", None)
    types = getattr(getattr(torch._C, "_profiler", None), "ActiveProfilerType", None)
    nvtx = getattr(types, "NVTX", None)
    if kind is None or nvtx is None:
        return lambda: False
    return lambda: kind() == nvtx


def install(torch, api):
    if api is None:
        return None
    from torch.utils.data import dataloader

    iter_cls = dataloader._BaseDataLoaderIter
    if getattr(iter_cls.__next__, "_torchprof_range", False):
        return iter_cls
    nvtx_on = nvtx_profiler_check(torch)
    from torchprof import _torch_ops

    def torch_records():
        # torch's record_function makes the range itself: under NVTX, and while the op
        # observer (RecordFunction callbacks) records.
        return nvtx_on() or _torch_ops.recording()

    wrapper = make_next(iter_cls.__next__, api.push, api.pop, torch_records)
    replace_attr(iter_cls, "__next__", wrapper)
    return iter_cls


def make_next(original, push, pop, nvtx_on):
    names = {}  # _profile_name -> its bytes

    def range_name(it):
        name = getattr(it, "_profile_name", None)
        if not isinstance(name, str):
            name = "enumerate(DataLoader)#%s.__next__" % type(it).__name__
        encoded = names.get(name)
        if encoded is None:
            encoded = name.encode("utf-8", "replace")
            names[name] = encoded
        return encoded

    def __next__(self):
        try:
            name = None if nvtx_on() else range_name(self)
        except Exception:  # noqa: BLE001 - a fetch without a range, never a failing one
            name = None
        if name is None:
            return original(self)
        push(name)
        try:
            return original(self)
        finally:
            pop()

    __next__._torchprof_range = True
    return __next__
