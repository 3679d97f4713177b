"""PyTorch operators as ranges, for torchprof-run --pytorch-ops, --record-shapes,
--with-flops and --with-stack, with no change to the program.

TORCHPROF_PYTORCH_OPS (set by torchprof-run) is a comma list: "ops" turns the capture
on, "shapes" adds each op's input shapes, "flops" torch's FLOP count of it (the
observer's path only), "stack" its Python source location, "modules" each nn.Module
call (_modules.py). Unset or empty: torch is
left alone. Each op becomes a range whose message has emit_nvtx's format
(analysis/op_message.h parses it):

    aten::addmm[, sizes = [[4], [8, 3], [3, 4], [], []]][, flops = 192][, stack = f.py(12): fwd; f.py(30): <module>]

First choice, for every build without "stack": torch's own RecordFunction callbacks,
registered from the injected library (_torch_ops.py): every op on every thread, nested
as torch nests them; with "shapes", torch keeps each op's inputs for the callback and
its exported inputSizes() gives the sizes, as torch.profiler's record_shapes lists them.
When this torch's layout is unknown or fails its
trial, one line on stderr says why and one of the two older ways takes over:

- CUDA builds of torch, without "stack": torch's own NVTX profiler, switched on as
  emit_nvtx(record_shapes=...) switches it on but without its CUDA synchronisation
  (_nvtx_ops.py). Every op is an NVTX range from C++, which the injected library
  records like any other.
- Otherwise (CPU builds, which refuse emit_nvtx, and "stack", which emit_nvtx
  cannot give): a TorchDispatchMode entered on the thread that imported torch. It
  sees the ops that reach the dispatcher below autograd (aten::addmm, aten::mm in
  backward, ...; composite ops such as aten::linear are already decomposed), on that
  thread and on the threads torch hands its thread-local state to. Each op costs a
  Python call; the range goes through torchprof_op_push/pop into the "torchprof.ops"
  domain. Forked children (DataLoader workers) inherit the mode and record into their
  own process.

Either way the capture steps aside (_holds.py) while the program runs torch.profiler
or an emit_nvtx of its own (torch allows one profiler per thread; a dispatch mode of
ours would make torch's profiler count some ops twice), and the dispatch mode while
the program has a dispatch mode of its own entered: those ops are not recorded.

Nothing here may change what the program computes, prints or returns: any failure
while building a message records nothing and runs the op as it is.
"""

import os
import sys
import threading

from torchprof._holds import Holds
from torchprof._nvtx_ops import NvtxCapture
from torchprof._util import log as _log
from torchprof._util import replace_attr as _replace

_VAR = "TORCHPROF_PYTORCH_OPS"
# Frames beyond these are left off the stack (the message stays far below the
# injected library's longest string).
_MAX_FRAMES = 32
_MAX_STACK_CHARS = 4000
# Programs whose shapes keep changing (variable lengths) start the cache afresh.
_MAX_CACHED_SHAPES = 4096


def settings(value):
    """(enabled, shapes, stack, flops) from a TORCHPROF_PYTORCH_OPS value."""
    words = {w.strip() for w in value.split(",") if w.strip()}
    shapes = "shapes" in words
    stack = "stack" in words
    flops = "flops" in words
    return bool(words & {"ops", "shapes", "stack", "memory", "flops"}), shapes, stack, flops


def modules_wanted():
    """Whether TORCHPROF_PYTORCH_OPS asks for nn.Module calls (--with-modules)."""
    return "modules" in {w.strip() for w in os.environ.get(_VAR, "").split(",")}


def install(torch):
    enabled, shapes, stack, flops = settings(os.environ.get(_VAR, ""))
    if not enabled:
        return None
    from torchprof import _torch_ops

    try:
        observer, why = _torch_ops.start(torch, shapes, stack, flops)
        if observer is None and flops and why.startswith("no FLOPs: "):
            # Only the observer gives torch's FLOP counts: the ops without them.
            sys.stderr.write("torchprof: --with-flops: no FLOP counts (%s)\n" % why[len("no FLOPs: "):])
            observer, why = _torch_ops.start(torch, shapes, stack)
    except Exception as e:  # noqa: BLE001 - the program runs whatever happens here
        observer, why = None, "%s: %s" % (type(e).__name__, e)
    if observer is not None:
        return observer
    sys.stderr.write("torchprof: ops through torch's RecordFunction callbacks are off (%s); "
                     "using the %s capture\n" % (why, "emit_nvtx" if getattr(torch.version, "cuda", None) is not None
                                                  and not stack else "dispatch-mode"))
    try:
        if getattr(torch.version, "cuda", None) is not None and not stack:
            return NvtxCapture(torch, shapes).start()
        return _DispatchCapture(torch, shapes, stack).start()
    except Exception as e:  # noqa: BLE001 - the program runs whatever happens here
        _log("no op capture: %s: %s" % (type(e).__name__, e))
        return None


class _DispatchCapture(Holds):
    """The dispatch mode, the caches its messages are built from, and the hooks that
    take it off the mode stack while the program uses modes or profilers of its own."""

    def __init__(self, torch, shapes, stack):
        super().__init__()
        import torchprof
        from torch.utils import _python_dispatch as dispatch

        api = torchprof._get()
        if api is None or api.op_push is None:
            raise RuntimeError("the injected library has no op ranges")
        self._push = api.op_push
        self._pop = api.op_pop
        self._dispatch = dispatch
        self._torch = torch
        self._tensor = torch.Tensor
        self._shapes = shapes
        self._stack = stack
        self._profiler_on = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
        self._heads = {}       # op overload -> (b"name", argument names or None)
        self._own_code = {}    # code object -> True when it is torch's or torchprof's
        self._frames = {}      # code -> b"file(line): function", line its first
        # Frames running when the capture starts, and the line each is at then (kept alive).
        self._start_frames = {}
        self._shape_texts = {}  # torch.Size -> "[2, 3]"
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self._skip_dirs = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, here + os.sep)
        self.mode = self._make_mode(dispatch.TorchDispatchMode)

    def start(self):
        f = sys._getframe(1)
        while f is not None:
            self._start_frames[id(f)] = (f, ("%s(%d): %s" % (f.f_code.co_filename.replace(";", ","), f.f_lineno,
                                                              f.f_code.co_name)).encode("utf-8", "replace"))
            f = f.f_back
        self._hook_mode_class(self._dispatch.TorchDispatchMode)
        self.hook_profiler_class(self._torch.autograd.profiler.profile)
        self._enter()
        return self

    # --- the mode on the stack -------------------------------------------------

    def _make_mode(self, base):
        capture = self

        class TorchprofOpRanges(base):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if kwargs is None:
                    kwargs = {}
                message = capture._message(func, args, kwargs)
                if message is None:
                    return func(*args, **kwargs)
                capture._push(message)
                try:
                    return func(*args, **kwargs)
                finally:
                    capture._pop()

        return TorchprofOpRanges()

    # The hooked __enter__/__exit__ pass our own mode straight through.
    def _enter(self):
        self.mode.__enter__()
        self._on = True

    def _leave(self):
        # Only when ours is the innermost mode: anything else would pop a mode that is
        # not ours.
        if self._on and self._dispatch._get_current_dispatch_mode() is self.mode:
            self.mode.__exit__(None, None, None)
            self._on = False

    def _can_come_back(self):
        return self._dispatch._get_current_dispatch_mode() is None

    def _hook_mode_class(self, mode_cls):
        """While the program enters a dispatch mode of its own (on the thread ours is
        on), ours is off the stack, so the program's modes see the stack they would
        see without torchprof."""
        capture = self
        enter, leave = mode_cls.__enter__, mode_cls.__exit__

        def __enter__(mode):
            if mode is capture.mode or not capture.hold():
                return enter(mode)
            try:
                return enter(mode)
            except BaseException:
                capture.release()
                raise

        def __exit__(mode, *exc):
            if mode is capture.mode or threading.get_ident() != capture._thread:
                return leave(mode, *exc)
            try:
                return leave(mode, *exc)
            finally:
                capture.release()

        _replace(mode_cls, "__enter__", __enter__)
        _replace(mode_cls, "__exit__", __exit__)

    # --- messages --------------------------------------------------------------

    def _message(self, func, args, kwargs):
        try:
            if self._profiler_on is not None and self._profiler_on():
                return None  # a profiler switched on some other way records them itself
            head = self._heads.get(func)
            if head is None:
                head = self._head(func)
            name, arg_names = head
            if name is None:
                return None
            parts = [name]
            if self._shapes:
                parts.append(b", sizes = " + self._sizes(arg_names, args, kwargs))
            if self._stack:
                frames = self._python_stack()
                if frames:
                    parts.append(b", stack = " + frames)
            return b"".join(parts)
        except Exception:  # noqa: BLE001 - an op without a range, never a failing op
            return None

    def _head(self, func):
        schema = getattr(func, "_schema", None)
        name = getattr(schema, "name", None) or str(func)
        if name.startswith("profiler::"):
            head = (None, None)  # record_function's own machinery, not an operator
        else:
            arguments = getattr(schema, "arguments", None)
            head = (name.encode("utf-8", "replace"),
                    [a.name for a in arguments] if arguments is not None else None)
        self._heads[func] = head
        return head

    def _sizes(self, arg_names, args, kwargs):
        # One entry per schema argument, defaults included, as torch's record_shapes.
        shape_text = self._shape_text
        shapes = [shape_text(a) for a in args]
        if arg_names is not None:
            for name in arg_names[len(args):]:
                shapes.append(shape_text(kwargs.get(name)))
        else:
            shapes.extend(shape_text(v) for v in kwargs.values())
        return ("[" + ", ".join(shapes) + "]").encode()

    def _shape_text(self, value):
        """"[2, 3]" for a tensor of that shape, "[]" for anything else."""
        if not isinstance(value, self._tensor):
            return "[]"
        try:
            shape = value.shape
        except Exception:  # noqa: BLE001 - tensors without sizes (sparse, nested, ...)
            return "[]"
        text = self._shape_texts.get(shape)
        if text is None:
            if len(self._shape_texts) >= _MAX_CACHED_SHAPES:
                self._shape_texts.clear()
            text = str(list(shape))
            self._shape_texts[shape] = text
        return text

    def _python_stack(self):
        """The program's frames, innermost first, as "file(line): function"; torch's
        and torchprof's own frames are left out. The line is torch's tracer's: the
        function's first line, or for a frame already running when the capture started,
        the line it was at then."""
        frames = []
        size = 0
        f = sys._getframe(1)
        while f is not None and len(frames) < _MAX_FRAMES:
            code = f.f_code
            own = self._own_code.get(code)
            if own is None:
                own = code.co_filename.startswith(self._skip_dirs)
                self._own_code[code] = own
            if not own:
                started = self._start_frames.get(id(f))
                if started is not None and started[0] is f:
                    text = started[1]
                else:
                    text = self._frames.get(code)
                    if text is None:
                        text = "%s(%d): %s" % (code.co_filename.replace(";", ","), code.co_firstlineno, code.co_name)
                        text = text.encode("utf-8", "replace")
                        self._frames[code] = text
                size += len(text) + 2
                if size > _MAX_STACK_CHARS:
                    break
                frames.append(text)
            f = f.f_back
        return b"; ".join(frames)
