"""What --profile-memory (inject/torch_memory.cpp) costs, against references measured in
the same run, in alternating rounds (medians over the rounds, with min..max):

  alloc    a loop of torch.empty(256) (one CPU allocation and free, one op each):
           torchprof-run --pytorch-ops, and --profile-memory on top of it; and torch's
           own profiler without and with profile_memory. The figure is the time a mode adds
           to the loop itself (its start and stop, and torch's parsing, left out) over the
           plain loop, per allocation.
  resnet   ResNet-18 training steps (tests/programs/py/ops_models.py): the run's time
           under --pytorch-ops and --profile-memory, as a ratio to the plain run.
  malloc   a Python loop of bytearray(4096) (malloc and free, no torch): plain and under
           --profile-memory; nothing is interposed there, so the ratio is noise.

    python3 bench/torch_memory_bench.py BUILD_DIR [ROUNDS=5] [ALLOCS=200000] [STEPS=6]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "programs", "py", "ops_models.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

LOOP = r"""
import sys, time
mode, n = sys.argv[1], int(sys.argv[2])
import torch
torch.set_num_threads(1)
def loop(count):
    for _ in range(count):
        torch.empty(256)
loop(1000)
if mode.startswith("torch"):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=mode == "torch_memory"):
        t0 = time.perf_counter()
        loop(n)
        seconds = time.perf_counter() - t0
else:
    t0 = time.perf_counter()
    loop(n)
    seconds = time.perf_counter() - t0
print("seconds", seconds)
"""

MALLOC = r"""
import sys, time
n = int(sys.argv[1])
t0 = time.perf_counter()
for _ in range(n):
    bytearray(4096)
print("seconds", time.perf_counter() - t0)
"""


def env_plain(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPROF_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def seconds(argv, env):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(argv), done.stderr.decode()[-2000:]))
    for line in done.stdout.decode().splitlines():
        if line.startswith("seconds "):
            return float(line.split()[1])
    raise SystemExit("no seconds line from %s" % " ".join(argv))


def wall(argv, env):
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(argv), done.stderr.decode()[-2000:]))
    return time.perf_counter() - t0


def line(label, values, unit):
    print("%-44s median %9.2f %s  (min %.2f, max %.2f, %d rounds)" %
          (label, statistics.median(values), unit, min(values), max(values), len(values)))


def main():
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    allocs = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    tool = os.path.join(build, "bin", "torchprof-run")
    work = tempfile.mkdtemp(prefix="tp_mem_bench_")
    env = env_plain(XDG_CACHE_HOME=os.path.join(work, "cache"))
    loop = os.path.join(work, "loop.py")
    with open(loop, "w") as f:
        f.write(LOOP)
    malloc = os.path.join(work, "malloc.py")
    with open(malloc, "w") as f:
        f.write(MALLOC)
    out = os.path.join(work, "out")

    def under(options, argv, timer=seconds):
        shutil.rmtree(out, ignore_errors=True)
        return timer([tool, "-q", "-o", out] + options + ["--"] + argv, env)

    added = {k: [] for k in ("ops", "memory", "torch", "torch_memory")}
    ratios = {k: [] for k in ("resnet_ops", "resnet_memory", "malloc")}
    for k in range(rounds):
        none = seconds([PYTHON, loop, "none", str(allocs)], env)
        figures = {
            "ops": under(["--pytorch-ops"], [PYTHON, loop, "none", str(allocs)]),
            "memory": under(["--profile-memory"], [PYTHON, loop, "none", str(allocs)]),
            "torch": seconds([PYTHON, loop, "torch", str(allocs)], env),
            "torch_memory": seconds([PYTHON, loop, "torch_memory", str(allocs)], env),
        }
        for name, s in figures.items():
            added[name].append((s - none) / allocs * 1e9)
        plain = wall([PYTHON, MODELS, "resnet18", str(steps)], env)
        ratios["resnet_ops"].append(under(["--pytorch-ops"], [PYTHON, MODELS, "resnet18", str(steps)], wall) / plain)
        ratios["resnet_memory"].append(under(["--profile-memory"], [PYTHON, MODELS, "resnet18", str(steps)], wall) / plain)
        m_plain = seconds([PYTHON, malloc, str(allocs * 5)], env)
        ratios["malloc"].append(under(["--profile-memory"], [PYTHON, malloc, str(allocs * 5)]) / m_plain)
        print("round %d: empty loop %.3f s; +ns/alloc ops %.0f, memory %.0f, torch %.0f, torch memory %.0f; "
              "resnet %.2fx / %.2fx; malloc %.3fx" %
              (k + 1, none, added["ops"][-1], added["memory"][-1], added["torch"][-1], added["torch_memory"][-1],
               ratios["resnet_ops"][-1], ratios["resnet_memory"][-1], ratios["malloc"][-1]), flush=True)
    line("torch.empty loop: torchprof --pytorch-ops", added["ops"], "ns/alloc")
    line("torch.empty loop: torchprof --profile-memory", added["memory"], "ns/alloc")
    line("  of which the memory records", [m - o for m, o in zip(added["memory"], added["ops"])], "ns/alloc")
    line("torch.empty loop: torch.profiler", added["torch"], "ns/alloc")
    line("torch.empty loop: torch.profiler(profile_memory)", added["torch_memory"], "ns/alloc")
    line("  of which profile_memory", [m - o for m, o in zip(added["torch_memory"], added["torch"])], "ns/alloc")
    line("ResNet-18 run: --pytorch-ops / plain", ratios["resnet_ops"], "x")
    line("ResNet-18 run: --profile-memory / plain", ratios["resnet_memory"], "x")
    line("malloc loop (no torch): --profile-memory / plain", ratios["malloc"], "x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
