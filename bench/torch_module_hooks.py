"""Cost of --with-modules: forward passes of a model of many small modules (a stack of
Linear(4, 4) and ReLU, 2 * LAYERS module calls and as many ops per forward, plus the
Sequential around them), timed inside the program on the calling thread's CPU time, in
three configurations run in turn, ROUNDS times: no tool, torchprof-run --pytorch-ops, and
torchprof-run --pytorch-ops --with-modules. The hooks' cost is the difference between the
last two, per module call.

    python3 bench/torch_module_hooks.py BUILD_DIR [LAYERS=50] [FORWARDS=400] [ROUNDS=5]
    python3 bench/torch_module_hooks.py --child LAYERS FORWARDS      (one measurement)

Prints `name value unit` lines: each configuration's median ns per forward (with its
range), and `module_call_ns`, the median over rounds of (with modules - ops only) per
module call."""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(layers, forwards):
    import torch
    from torch import nn

    torch.set_num_threads(1)
    parts = []
    for _ in range(layers):
        parts += [nn.Linear(4, 4), nn.ReLU()]
    model = nn.Sequential(*parts)
    x = torch.ones(2, 4)
    with torch.no_grad():
        for _ in range(20):
            model(x)
        best = None
        for _ in range(3):
            t0 = time.thread_time_ns()
            for _ in range(forwards):
                model(x)
            elapsed = time.thread_time_ns() - t0
            best = elapsed if best is None else min(best, elapsed)
    print("forward_ns %.0f" % (best / forwards))
    print("module_calls %d" % (2 * layers + 1))


def measure(argv):
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, timeout=600).stdout
    values = dict(line.split() for line in out.decode().splitlines() if line.count(" ") == 1)
    return float(values["forward_ns"]), int(values["module_calls"])


def main():
    if sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]))
        return
    build = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    forwards = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    run = os.path.join(build, "bin", "torchprof-run")
    me = [sys.executable, os.path.abspath(__file__), "--child", str(layers), str(forwards)]
    results = {"plain": [], "ops": [], "modules": []}
    calls = 0
    with tempfile.TemporaryDirectory() as work:
        for r in range(rounds):
            results["plain"].append(measure(me)[0])
            results["ops"].append(measure([run, "-q", "-o", os.path.join(work, "o%d" % r), "--pytorch-ops", "--"] + me)[0])
            ns, calls = measure([run, "-q", "-o", os.path.join(work, "m%d" % r), "--pytorch-ops", "--with-modules",
                                 "--"] + me)
            results["modules"].append(ns)
    for name, values in results.items():
        print("forward_%s %.0f ns (%.0f..%.0f)" % (name, statistics.median(values), min(values), max(values)))
    per_call = [(m - o) / calls for m, o in zip(results["modules"], results["ops"])]
    print("module_calls_per_forward %d" % calls)
    print("module_call_ns %.0f ns (%.0f..%.0f)" % (statistics.median(per_call), min(per_call), max(per_call)))


if __name__ == "__main__":
    main()
