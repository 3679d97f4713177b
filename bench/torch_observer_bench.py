"""What torchprof's op capture (torch's RecordFunction callbacks, inject/torch_observer.cpp)
adds per op, against two references measured in the same run, in alternating rounds:

  floor   a global callback that does nothing: RecordFunction's own cost once any
          callback is on (what no observer can go below)
  torch   torch.profiler (CPU activities)
  ours    torchprof-run --pytorch-ops

and the shapes path, against torch's own (each against the same round's "none"):

  torch shapes   torch.profiler(record_shapes=True)
  ours shapes    torchprof-run --record-shapes
  torch stack    torch.profiler(with_stack=True)
  ours stack     torchprof-run --with-stack

on bench/torch_mlp_loop.py (an MLP of small matmuls, forward/backward/SGD). Each round
runs the loop alone ("none") and each mode once, in turn; the figure of a mode is
(its time - none's time of the same round) / ops, where ops is the number of ops
torch's profiler counted for the loop. Medians over the rounds, with the spread
(min..max), are printed, then each mode's fastest round against the fastest plain one
(a shared machine's load only adds time), and the ops torchprof recorded in the timed loop's steps
(--schedule skip_first=<the warm-up's steps>, which changes nothing in what is recorded)
beside torch's count, name by name.

Where bench/observer_pairs was built (TORCHPROF_BUILD_BENCH), each round also times the
observer's callbacks alone, without torch (no callback, the do-nothing ones, the
recording ones under torchprof-run), and the machine's clock read, which each recorded
op's begin and end pays once (clock_gettime, unless the kernel's clocksource is the TSC).

    [BASELINE=OTHER_BUILD_DIR] python3 bench/torch_observer_bench.py BUILD_DIR [ROUNDS=9] [ITERATIONS=1000] [MODEL=mlp]

BASELINE: another build (the commit before, say) whose torchprof-run --pytorch-ops runs
in each round too, for a before/after figure measured in the same rounds.

MODEL resnet18 times a ResNet-18 training loop instead (torch_mlp_loop.py); each
figure is then also printed as the loop's time against the plain loop's.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "torch_mlp_loop.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def env_plain():
    return {k: v for k, v in os.environ.items() if not k.startswith("TORCHPROF_") and k != "PYTHONPATH"}


def run(argv, env):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=900)
    if done.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(argv), done.stderr.decode()[-2000:]))
    out = {}
    for line in done.stdout.decode().splitlines():
        key, _, value = line.partition(" ")
        if key in ("seconds", "ops"):
            out[key] = float(value)
        elif key == "op":
            calls, _, name = value.partition(" ")
            out.setdefault("names", {})[name] = int(calls)
    return out


def observer_pairs(build, tool, work, k):
    """The callbacks alone (bench/observer_pairs): ns per op of the do-nothing and the
    recording callbacks above the bare loop, and one clock read; None when not built."""
    prog = os.path.join(build, "bench", "observer_pairs")
    if not os.path.exists(prog):
        return None
    ops = "2000000"
    lib = os.path.join(build, "lib", "libtorchprof_inject.so")
    figures = {}
    for mode, argv, env in (("none", [prog, ops, "none"], env_plain()),
                            ("floor", [prog, ops, "floor"], dict(env_plain(), LD_PRELOAD=lib)),
                            ("record", [tool, "-q", "-o", os.path.join(work, "pairs%d" % k), "--", prog, ops, "record"],
                             env_plain())):
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=300)
        if done.returncode != 0:
            raise SystemExit("failed: %s\n%s" % (" ".join(argv), done.stderr.decode()[-2000:]))
        for line in done.stdout.decode().splitlines():
            key, _, rest = line.partition(" ")
            if key in ("op_ns", "clock_ns"):
                figures[mode + "_" + key] = float(rest.split()[0])
    shutil.rmtree(os.path.join(work, "pairs%d" % k), ignore_errors=True)
    return figures


def clocksource():
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def main():
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    model = sys.argv[4] if len(sys.argv) > 4 else "mlp"
    baseline = os.environ.get("BASELINE")  # another build's directory, run in each round too
    lib = os.path.join(build, "lib", "libtorchprof_inject.so")
    tool = os.path.join(build, "bin", "torchprof-run")
    work = tempfile.mkdtemp(prefix="tp_obs_bench_")
    cache = os.path.join(work, "cache")
    floor_env = dict(env_plain(), LD_PRELOAD=lib)
    ours_env = dict(env_plain(), XDG_CACHE_HOME=cache)
    torch_ops = None
    ours_ops = None
    torch_names = {}
    ours_names = {}
    pairs = []
    times = {}  # mode ("none" too) -> its loop time in each round
    round_ops = []  # the ops torch.profiler counted in each round
    warmup = 2 if model == "resnet18" else 20  # torch_mlp_loop.py's warm-up steps
    schedule = "skip_first=%d,wait=0,warmup=0,active=%d" % (warmup, iterations)
    for k in range(rounds):
        none = run([PYTHON, LOOP, "none", str(iterations), model], env_plain())["seconds"]
        floor = run([PYTHON, LOOP, "floor", str(iterations), model], floor_env)["seconds"]
        t = run([PYTHON, LOOP, "torch", str(iterations), model], env_plain())
        out = os.path.join(work, "out%d" % k)
        ours = run([tool, "-q", "-o", out, "--pytorch-ops", "--schedule", schedule, "--", PYTHON, LOOP, "none",
                    str(iterations), model], ours_env)["seconds"]
        ts = run([PYTHON, LOOP, "torch-shapes", str(iterations), model], env_plain())["seconds"]
        out_shapes = os.path.join(work, "shapes%d" % k)
        ours_shapes = run([tool, "-q", "-o", out_shapes, "--record-shapes", "--", PYTHON, LOOP, "none", str(iterations), model],
                          ours_env)["seconds"]
        shutil.rmtree(out_shapes, ignore_errors=True)
        tk = run([PYTHON, LOOP, "torch-stack", str(iterations), model], env_plain())["seconds"]
        out_stack = os.path.join(work, "stack%d" % k)
        ours_stack = run([tool, "-q", "-o", out_stack, "--with-stack", "--", PYTHON, LOOP, "none", str(iterations), model],
                         ours_env)["seconds"]
        shutil.rmtree(out_stack, ignore_errors=True)
        if baseline:
            out_base = os.path.join(work, "base%d" % k)
            base = run([os.path.join(baseline, "bin", "torchprof-run"), "-q", "-o", out_base, "--pytorch-ops", "--",
                        PYTHON, LOOP, "none", str(iterations), model], dict(ours_env, XDG_CACHE_HOME=cache + "-base"))
            shutil.rmtree(out_base, ignore_errors=True)
            times.setdefault("base", []).append(base["seconds"])
        torch_ops = t["ops"]
        torch_names = t["names"]
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        ours_names = {o["name"]: o["calls"] for o in summary["ops"] if o.get("kind") == "cpu_op"}
        ours_ops = sum(ours_names.values())
        p = observer_pairs(build, tool, work, k)
        if p is not None:
            pairs.append(p)
        for name, seconds in (("none", none), ("floor", floor), ("torch", t["seconds"]), ("ours", ours),
                              ("torch_shapes", ts), ("ours_shapes", ours_shapes), ("torch_stack", tk),
                              ("ours_stack", ours_stack)):
            times.setdefault(name, []).append(seconds)
        round_ops.append(torch_ops)
        added = {name: [(s - n) / ops * 1e9 for s, n, ops in zip(v, times["none"], round_ops)]
                 for name, v in times.items()}
        print("round %d: none %.3f s, floor %+.0f ns/op, torch %+.0f ns/op, torchprof %+.0f ns/op, "
              "torch shapes %+.0f ns/op, torchprof shapes %+.0f ns/op, torch stack %+.0f ns/op, "
              "torchprof stack %+.0f ns/op" %
              (k + 1, none, added["floor"][-1], added["torch"][-1], added["ours"][-1], added["torch_shapes"][-1],
               added["ours_shapes"][-1], added["torch_stack"][-1], added["ours_stack"][-1]), flush=True)
        shutil.rmtree(out, ignore_errors=True)
    print("ops in the timed loop (the last round): torch.profiler counts %d, torchprof recorded %d in its %d steps" %
          (torch_ops, ours_ops, iterations))
    differ = sorted(n for n in set(torch_names) | set(ours_names) if torch_names.get(n, 0) != ours_names.get(n, 0))
    print("  names with other counts: %d of %d%s" %
          (len(differ), len(set(torch_names) | set(ours_names)),
           "".join("\n    %s: torch.profiler %d, torchprof %d" % (n, torch_names.get(n, 0), ours_names.get(n, 0))
                   for n in differ)))
    for name, label in (("floor", "do-nothing callback (floor)"), ("torch", "torch.profiler"),
                        ("ours", "torchprof --pytorch-ops"), ("torch_shapes", "torch.profiler record_shapes"),
                        ("ours_shapes", "torchprof --record-shapes"), ("torch_stack", "torch.profiler with_stack"),
                        ("ours_stack", "torchprof --with-stack")):
        v = added[name]
        r = [s / n for s, n in zip(times[name], times["none"])]
        print("%-30s median %+7.0f ns/op  (min %+.0f, max %+.0f, %d rounds); loop time %.3fx (%.3f..%.3fx)" %
              (label, statistics.median(v), min(v), max(v), len(v), statistics.median(r), min(r), max(r)))
    print("torchprof above the floor: median %+.0f ns/op" %
          statistics.median([o - f for o, f in zip(added["ours"], added["floor"])]))
    # Another machine's load only ever adds time: each mode's fastest round against the
    # fastest plain one resolves what a shared machine's medians cannot.
    best = {name: (min(v) - min(times["none"])) / torch_ops * 1e9 for name, v in times.items() if name != "none"}
    if baseline:
        v = added["base"]
        print("%-30s median %+7.0f ns/op  (min %+.0f, max %+.0f); fastest round %+.0f ns/op; this build's "
              "torchprof above it: median %+.0f ns/op" %
              ("baseline --pytorch-ops", statistics.median(v), min(v), max(v), best["base"],
               statistics.median([o - b for o, b in zip(added["ours"], v)])))
    print("fastest rounds (each mode's against the plain loop's, %d rounds): floor %+.0f, torch.profiler %+.0f, "
          "torchprof %+.0f (floor %+.0f), torch.profiler record_shapes %+.0f, torchprof --record-shapes %+.0f, "
          "torch.profiler with_stack %+.0f, torchprof --with-stack %+.0f ns/op" %
          (len(times["none"]), best["floor"], best["torch"], best["ours"], best["ours"] - best["floor"],
           best["torch_shapes"], best["ours_shapes"], best["torch_stack"], best["ours_stack"]))
    if pairs:
        floor_cb = [p["floor_op_ns"] - p["none_op_ns"] for p in pairs]
        ours_cb = [p["record_op_ns"] - p["floor_op_ns"] for p in pairs]
        clock = [p["record_clock_ns"] for p in pairs]
        print("the callbacks alone (bench/observer_pairs, no torch), per op: do-nothing %+.1f ns, recording %+.1f ns "
              "above them (min %+.1f, max %+.1f), of which two clock reads at %.1f ns each (clocksource %s)" %
              (statistics.median(floor_cb), statistics.median(ours_cb), min(ours_cb), max(ours_cb),
               statistics.median(clock), clocksource()))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
