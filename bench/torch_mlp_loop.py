"""A tiny-op training loop for bench/torch_observer_bench.py: an MLP of small matmuls,
forward, backward and SGD, timed inside the program (the thread's CPU time).

    python3 bench/torch_mlp_loop.py MODE ITERATIONS [MODEL]

MODEL: mlp (the default) or resnet18 (tests/programs/py/ops_models.py's: torchvision's
when installed, else the same architecture written out; a batch of two 3x64x64 images,
cross-entropy, SGD).

MODE: none (the loop alone; also what runs under torchprof-run), floor (a global
RecordFunction callback that does nothing, registered through the injected library,
which must be preloaded), torch (torch.profiler around the loop), torch-shapes (the same
with record_shapes=True), torch-stack (with_stack=True). Prints `seconds S` and, for torch,
`ops N` (the RecordFunction events torch's profiler counted) and `op CALLS NAME` for each
name. The warm-up is WARMUP steps (20 for mlp, 2 for resnet18; an optimizer step ends
each), so that torchprof-run --schedule skip_first=WARMUP,... counts the timed loop's ops.
"""
import ctypes
import sys
import time

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)


def main():
    mode, iterations = sys.argv[1], int(sys.argv[2])
    which = sys.argv[3] if len(sys.argv) > 3 else "mlp"
    if which == "resnet18":
        import os

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "programs", "py"))
        import ops_models

        model, x, y, loss_fn, _ = ops_models.make("resnet18")
        warmup = 2
    else:
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
        x = torch.randn(4, 8)
        y = torch.randn(4, 1)
        loss_fn = lambda out, target: ((out - target) ** 2).mean()  # noqa: E731
        warmup = 20
    opt = torch.optim.SGD(model.parameters(), lr=0.001)

    def loop(n):
        for _ in range(n):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    loop(warmup)
    if mode == "floor":
        lib = ctypes.CDLL(None)
        start = lib.torchprof_torch_observer_start
        start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        why = ctypes.create_string_buffer(256)
        if not start(torch.__version__.encode(), 2, why, 256):
            raise SystemExit("no floor callback: " + why.value.decode())
    prof = None
    if mode in ("torch", "torch-shapes", "torch-stack"):
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=mode == "torch-shapes",
                       with_stack=mode == "torch-stack")
        prof.__enter__()
    t0 = time.thread_time()
    loop(iterations)
    seconds = time.thread_time() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
        names = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CPU:
                names[e.name] = names.get(e.name, 0) + 1
        print("ops %d" % sum(names.values()))
        for name in sorted(names):
            print("op %d %s" % (names[name], name))
    print("seconds %.6f" % seconds)


if __name__ == "__main__":
    main()
