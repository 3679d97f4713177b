"""PyTorch ops through torch's own RecordFunction callbacks, the mechanism torch.profiler's
observers hang on: the injected library registers one global callback
(inject/torch_observer.cpp), so every op on every thread (autograd's workers, the
program's own threads, forked DataLoader workers) is a range on its thread, nested as
torch nests them, with its sequence number, forward thread id and RecordFunction id.

The callback's layout is torch's C++ ABI, which changes between versions. The library
keeps a table of the layouts it knows; before one is used in the program it is tried in
a throwaway child process (import torch, register, run known ops, check their names,
nesting, scopes and sequence numbers, unregister). The verdict is kept per torch build
in a private cache directory ($XDG_CACHE_HOME/torchprof, else ~/.cache/torchprof), so
the trial runs once per build. A torch that is not in the table, or fails the trial,
is not instrumented this way: the caller takes the older path and says why in one line.
"""

import hashlib
import os
import stat
import subprocess
import sys

from torchprof._holds import Holds
from torchprof._util import log

# Bumped when the trial's checks change: verdicts of an older trial are not reused.
_TRIAL_VERSION = "4"
_TRIAL_TIMEOUT_S = 180

# Run by a fresh interpreter with the injected library preloaded but inert (no socket).
# Prints "ok", "ok no-flops <reason>" (ops and input shapes, not torch's FLOP counts),
# "ok no-shapes <reason>" (ops, but neither) or "fail <reason>" on its last line.
_TRIAL = r"""
import ctypes, sys
import torch
lib = ctypes.CDLL(None)
start = lib.torchprof_torch_observer_start
start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
start.restype = ctypes.c_int
stop = lib.torchprof_torch_observer_stop
stop.argtypes = []
stop.restype = None
log = lib.torchprof_torch_trial_log
log.argtypes = [ctypes.c_char_p, ctypes.c_int]
log.restype = ctypes.c_int
why = ctypes.create_string_buffer(256)
if not start(torch.__version__.encode(), 1, why, 256):
    print("fail " + why.value.decode("utf-8", "replace"))
    sys.exit(0)
x = torch.ones(4, 4, requires_grad=True)
y = torch.mm(x, x)
y.sum().backward()
enabled = torch.autograd._profiler_enabled()
stop()
buf = ctypes.create_string_buffer(1 << 16)
n = log(buf, 1 << 16)
rows = []
for line in buf.raw[:n].decode("utf-8", "replace").splitlines():
    kind, depth, scope, seq, fwd, handle, thread, sizes, flops, name = line.split(" ", 9)
    rows.append((kind, int(depth), int(scope), int(seq), int(fwd), int(handle), name, int(thread), sizes,
                 int(flops)))

def fail(reason):
    print("fail " + reason)
    sys.exit(0)

if enabled:
    fail("torch's profiler reads as enabled with the observer on")
if not rows:
    fail("no callback ran")
open_ = {}
for kind, depth, scope, seq, fwd, handle, name, thread, sizes, flops in rows:
    if depth < 0 or scope > 15:
        fail("nesting or scope out of range (%s depth %d scope %d)" % (name, depth, scope))
    if kind == "B":
        if handle == 0 or handle in open_:
            fail("RecordFunction handles are not unique (%s)" % name)
        open_[handle] = name
    elif open_.pop(handle, None) != name:
        fail("an end does not match its begin (%s)" % name)
if open_:
    fail("ops left open")
begins = [r for r in rows if r[0] == "B"]
def first(name):
    for r in begins:
        if r[6] == name:
            return r
    fail("%s was not seen" % name)
mm = first("aten::mm")
if mm[1] != 0 or mm[2] != 0 or mm[3] < 0:
    fail("aten::mm read as depth %d, scope %d, sequence number %d" % (mm[1], mm[2], mm[3]))
ones = begins.index(first("aten::ones"))
if ones + 1 >= len(begins) or begins[ones + 1][1] != 1 or begins[ones][1] != 0:
    fail("aten::ones has no op nested inside it")
node = first("MmBackward0")
if node[2] != 1 or node[3] != mm[3]:
    fail("MmBackward0 read as scope %d, sequence number %d (aten::mm's: %d)" % (node[2], node[3], mm[3]))
if mm[4] != 0 or mm[7] == 0 or node[4] != mm[7]:
    fail("MmBackward0's forward thread %d is not aten::mm's thread %d (aten::mm's forward thread: %d)"
         % (node[4], mm[7], mm[4]))
if mm[8] != "[[4,4],[4,4]]":
    print("ok no-shapes aten::mm's input shapes read as %s" % mm[8])
    sys.exit(0)
# torch's count for a 4x4 by 4x4 product: 2 * 4 * 4 * 4.
if mm[9] != 128:
    print("ok no-flops aten::mm's FLOPs read as %d, not 128" % mm[9])
    sys.exit(0)
print("ok")
"""


def _library_path():
    """The injected library's path, as the launcher passes it."""
    return os.environ.get("TORCHPROF_LIB", "")


def _loaded_file(fragment):
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if fragment in os.path.basename(path) and path.startswith("/"):
                    return path
    except OSError:
        pass
    return ""


def _identity(path):
    try:
        st = os.stat(path)
        return "%s:%d:%d" % (path, st.st_size, st.st_mtime_ns)
    except OSError:
        return path


def _build_key(torch):
    """What makes two runs the same torch build for the trial's verdict."""
    parts = [
        _TRIAL_VERSION,
        getattr(torch, "__version__", "?"),
        _identity(getattr(torch, "__file__", "")),
        _identity(_loaded_file("libtorch_cpu") or _loaded_file("libtorch.")),
        _identity(_library_path() or _loaded_file("libtorchprof_inject")),
        os.environ.get("TORCHPROF_TORCH_LAYOUT", ""),
        sys.executable,
    ]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:32]


def _cache_dir():
    """A directory only this user can write, or None."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "torchprof")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        return path
    except OSError:
        return None


def _read_verdict(path):
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        with open(path) as f:
            text = f.read(512).strip()
        return text if text == "ok" or text.startswith(("ok no-shapes ", "ok no-flops ", "fail ")) else None
    except OSError:
        return None


def _write_verdict(path, verdict):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(verdict + "\n")
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _run_trial():
    # Empty, not removed: the injected library puts removed variables back at exec (so
    # that programs scrubbing their environment stay profiled); an empty socket leaves
    # it inert and an empty op setting leaves the bootstrap's op capture off.
    env = dict(os.environ, TORCHPROF_SOCKET="", TORCHPROF_PYTORCH_OPS="")
    try:
        done = subprocess.run([sys.executable, "-c", _TRIAL], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=_TRIAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "fail the trial did not finish in %d s" % _TRIAL_TIMEOUT_S
    except OSError as e:
        return "fail the trial could not start: %s" % e
    if done.returncode < 0:
        return "fail the trial process died of signal %d" % -done.returncode
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    last = lines[-1] if lines else ""
    if done.returncode != 0 or not (last == "ok" or last.startswith(("ok no-shapes ", "ok no-flops ", "fail "))):
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return "fail the trial exited with %d%s" % (done.returncode, (": " + err[-1][:120]) if err else "")
    return last


def verdict(torch):
    """"ok", "ok no-flops <reason>", "ok no-shapes <reason>" or "fail <reason>": the
    trial's verdict for this torch build, cached."""
    cache = _cache_dir()
    path = os.path.join(cache, "observer-" + _build_key(torch)) if cache is not None else None
    if path is not None:
        known = _read_verdict(path)
        if known is not None:
            return known
    result = _run_trial()
    if path is not None:
        _write_verdict(path, result)
    return result


_active = None  # the ObserverCapture once started


def recording():
    """Whether the observer is recording ops now (registered, and not stepped aside for
    a profiler of the program's)."""
    return _active is not None and _active._on


class ObserverCapture(Holds):
    """The registered observer; off while the program runs a profiler of its own."""

    def __init__(self, torch, lib, ctypes, shapes, stack, flops=False):
        super().__init__()
        self._torch = torch
        # torch_observer.h: kObserverRecord, kObserverShapes, kObserverStack, kObserverShapesStack
        self._mode = {(False, False): 0, (True, False): 3, (False, True): 4, (True, True): 5}[(bool(shapes), bool(stack))]
        self._stack = stack
        self._flops = flops
        self._lib = lib
        self._start = lib.torchprof_torch_observer_start
        self._start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self._start.restype = ctypes.c_int
        self._enable = lib.torchprof_torch_observer_enable
        self._enable.argtypes = [ctypes.c_int]
        self._enable.restype = None
        self._ctypes = ctypes

    def start(self):
        why = self._ctypes.create_string_buffer(256)
        if self._stack:
            skip = self._lib.torchprof_torch_observer_stack_skip
            skip.argtypes = [self._ctypes.c_char_p]
            skip.restype = None
            here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            torch_dir = os.path.dirname(os.path.abspath(self._torch.__file__))
            skip(("%s\n%s" % (torch_dir + os.sep, here + os.sep)).encode("utf-8", "surrogateescape"))
        if self._flops:
            wanted = self._lib.torchprof_torch_observer_flops
            wanted.argtypes = [self._ctypes.c_int]
            wanted.restype = None
            wanted(1)
        if not self._start(self._torch.__version__.encode(), self._mode, why, 256):
            raise RuntimeError(why.value.decode("utf-8", "replace"))
        if self._stack:
            # No GIL may be asked for once the interpreter finalizes.
            import atexit

            off = self._lib.torchprof_torch_observer_stack_off
            off.argtypes = []
            off.restype = None
            atexit.register(off)
        global _active
        _active = self
        self._on = True
        self.hook_profiler_class(self._torch.autograd.profiler.profile)
        for name in ("emit_nvtx", "emit_itt"):
            cls = getattr(self._torch.autograd.profiler, name, None)
            if cls is not None and hasattr(cls, "__enter__"):
                self.hook_context_class(cls, lambda ctx: False)
        return self

    def _enter(self):
        self._enable(1)
        self._on = True

    def _leave(self):
        self._enable(0)
        self._on = False


def start(torch, shapes=False, stack=False, flops=False):
    """The running observer, or (None, reason) when this torch cannot have one. With
    `shapes`, each op's name carries its input shapes (torch's record_shapes); with
    `flops`, torch's FLOP count of it (with_flops); with `stack`, the program's Python
    frames at the op."""
    import ctypes

    try:
        lib = ctypes.CDLL(None)
        getattr(lib, "torchprof_torch_observer_start")
    except (OSError, AttributeError):
        return None, "the injected library has no op observer"
    result = verdict(torch)
    if result.startswith("fail "):
        return None, result[len("fail "):]
    if shapes and result.startswith("ok no-shapes "):
        return None, "no input shapes: " + result[len("ok no-shapes "):]
    if flops and result != "ok":
        return None, "no FLOPs: " + result.split(" ", 2)[2]
    try:
        return ObserverCapture(torch, lib, ctypes, shapes, stack, flops).start(), None
    except Exception as e:  # noqa: BLE001 - the program runs whatever happens here
        log("op observer: %s: %s" % (type(e).__name__, e))
        return None, str(e)
