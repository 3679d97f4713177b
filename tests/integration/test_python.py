"""Python targets under torchprof-run: the start-up bootstrap (PYTHONPATH,
sitecustomize chaining, no cost, no change in behaviour), one step per round of
optimizer steps for an unmodified torch training loop, DataLoader ranges, the
torchprof module, and multiprocessing pools. The programs are in tests/programs/py;
the interpreter is the one running this script (Debian's /usr/bin/python3 with torch through ctest)."""

import os
import subprocess
import sys
import tempfile

import tp
from tp import check, check_eq, check_close, check_timing, ms

PY_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs", "py"))
PYTHON = sys.executable
SLEEP_MS = 5.0  # train_loop's sleep per iteration


def script(name):
    return os.path.join(PY_DIR, name)


def bootstrap_dir():
    return os.path.realpath(os.path.join(tp.bin_path(""), "..", "share", "torchprof", "python"))


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPROF_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def run_py(args, options=(), env=None, expect_rc=0, timeout=120):
    """torchprof-run -o <fresh dir> [options] -- python args (or a program given in full)."""
    out_dir = os.path.join(tp.fresh_dir("py"), "out")
    command = args if os.path.isabs(args[0]) and not args[0].endswith(".py") else [PYTHON] + args
    argv = [tp.bin_path("torchprof-run"), "-o", out_dir] + list(options) + ["--"] + command
    tp.require_tool()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          timeout=timeout, env=env if env is not None else clean_env())
    result = tp.Result(argv, proc, out_dir, 0.0)
    tp._last_result = result
    if expect_rc is not None:
        check_eq(result.rc, expect_rc, f"exit code of {' '.join(argv)}")
    return result


def run_plain(args, env=None, timeout=120):
    return subprocess.run([PYTHON] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=timeout, env=env if env is not None else clean_env())


def steps_of(summary, pid=None):
    procs = tp.processes_with_events(summary)
    if pid is None:
        check_eq(len(procs), 1, "processes with events")
        pid = procs[0]["pid"]
    return sorted((s for s in summary.get("steps", []) if s.get("pid") == pid), key=lambda s: s["index"])


def step_events(result):
    """ProfilerStep# X events of all traces."""
    return [ev for ev in tp.all_trace_events(result, ph="X") if ev.get("name", "").startswith("ProfilerStep#")]


def domain_of(event):
    return (event.get("args") or {}).get("domain")


def check_steps(result, count, actions=None):
    rows = steps_of(result.summary)
    check_eq([s["name"] for s in rows], [f"ProfilerStep#{k}" for k in range(count)], "step names")
    if actions is not None:
        check_eq([s["action"] for s in rows], actions, "step actions")
    for s in rows:
        # Each step holds one iteration: its sleep plus a little torch work.
        check(ms(SLEEP_MS) <= s["dur_ns"] <= ms(2000), f"{s['name']} lasts {s['dur_ns']} ns")
    return rows


# ---------------------------------------------------------------------------
# Steps


def auto_steps():
    r = run_py([script("train_loop.py"), "6"])
    rows = check_steps(r, 6)
    check(all(s["action"] in ("record", "record_and_save") for s in rows), "without --schedule all are recorded")
    for a, b in zip(rows, rows[1:]):  # back to back: each ends where the next begins, never after
        check_close(b["start_ns"], a["start_ns"] + a["dur_ns"], f"start of {b['name']}", rel=1e-6)
    tp.check_steps_apart(r)
    check_eq(tp.op(r.summary, "ProfilerStep*")["calls"], 6, "ProfilerStep* calls")
    events = step_events(r)
    check_eq(sorted(ev["name"] for ev in events), sorted(f"ProfilerStep#{k}" for k in range(6)),
             "step ranges in the traces")
    check(all(ev.get("cat") == "user_annotation" for ev in events), "steps are user_annotation")
    check(all(domain_of(ev) == "torchprof" for ev in events), "automatic steps are in the torchprof domain")
    check_eq(r.stdout, run_plain([script("train_loop.py"), "6"]).stdout, "stdout with and without torchprof")
    # The steps are start/end ranges written once they ended; the table alone streams them.
    tp.check_streamed_table(r.out_dir)


def steps_apart():
    """The bootstrap's steps, 30 of them: each is turned to our clock on its own, so a
    step could end a fraction of a microsecond after the next began; none does, in
    summary.json or in the trace (TensorBoard drops a step whose range intersects another)."""
    r = run_py([script("train_loop.py"), "30"])
    check_steps(r, 30)
    tp.check_steps_apart(r)


def schedule():
    r = run_py([script("train_loop.py"), "8"], options=["--schedule", "wait=1,warmup=1,active=2"])
    check_steps(r, 8, ["none", "warmup", "record", "record_and_save"] * 2)
    per_trace = []
    for _, trace in r.traces:
        names = {ev["name"] for ev in tp.trace_events(trace, ph="X") if ev.get("name", "").startswith("ProfilerStep#")}
        per_trace.append(sorted(names))
    check_eq(sorted(per_trace), [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]],
             "steps per trace file (one file per cycle)")
    check_eq(tp.op(r.summary, "ProfilerStep*")["calls"], 4, "recorded steps in ops")
    tp.check_streamed_table(r.out_dir, ["--schedule", "wait=1,warmup=1,active=2"])


def user_steps():
    r = run_py([script("train_loop.py"), "5", "--mode", "user"])
    check_steps(r, 5)
    check_eq(tp.op(r.summary, "ProfilerStep*")["calls"], 5, "ProfilerStep* calls (no automatic steps mixed in)")


def own_markers():
    r = run_py([script("train_loop.py"), "5", "--mode", "own_markers"])
    check_steps(r, 5)
    events = step_events(r)
    check_eq(sorted(ev["name"] for ev in events), sorted(f"ProfilerStep#{k}" for k in range(5)),
             "ProfilerStep ranges in the traces")
    auto = [ev["name"] for ev in events if domain_of(ev) == "torchprof"]
    check_eq(auto, [], "automatic steps next to the program's own markers")


def one_step():
    # Step 0 is held until the next optimizer.step(); with none, exit releases it.
    r = run_py([script("train_loop.py"), "1"])
    check_steps(r, 1)


def two_optimizers():
    r = run_py([script("train_loop.py"), "4", "--optimizers", "2"])
    check_steps(r, 4)


def phases_per_step(result, count):
    """Each step holds the start of exactly one "first" and one "second" range of
    multi_optim.py (one iteration: the ranges close just after their optimizer steps,
    which end the step)."""
    steps = sorted(step_events(result), key=lambda ev: float(ev["ts"]))
    check_eq([ev["name"] for ev in steps], [f"ProfilerStep#{k}" for k in range(count)], "steps in the traces")
    for phase in ("first", "second"):
        ranges = tp.all_trace_events(result, ph="X", name=phase)
        check_eq(len(ranges), count, f"'{phase}' ranges")
        for step in steps:
            lo, hi = float(step["ts"]), float(step["ts"]) + float(step["dur"])
            inside = [ev for ev in ranges if lo <= float(ev["ts"]) < hi]
            check_eq(len(inside), 1, f"'{phase}' ranges starting in {step['name']} [{lo}, {hi}) us")


def gan_steps():
    # D.step() then G.step() each iteration: one step per iteration, ending at G's.
    r = run_py([script("multi_optim.py"), "gan", "5"])
    check_steps(r, 5)
    phases_per_step(r, 5)
    plain = run_plain([script("multi_optim.py"), "gan", "5"], env=clean_env(PYTHONPATH=bootstrap_dir()))
    check_eq(r.stdout, plain.stdout, "stdout with and without torchprof")


def critic_steps():
    # Three critic steps per generator step: one step per generator step.
    r = run_py([script("multi_optim.py"), "critic", "4"])
    check_steps(r, 4)
    phases_per_step(r, 4)


def nested_step():
    # One optimizer whose step() calls super().step(), the base class's step hooked too.
    r = run_py([script("multi_optim.py"), "nested", "4"])
    check_steps(r, 4)
    phases_per_step(r, 4)


def wrapped_optimizer():
    # An optimizer whose step() steps an inner one: one step per iteration.
    r = run_py([script("multi_optim.py"), "wrapped", "4"])
    check_steps(r, 4)
    phases_per_step(r, 4)


def no_bootstrap():
    r = run_py([script("train_loop.py"), "4"], options=["--no-python"])
    rows = steps_of(r.summary) if tp.processes_with_events(r.summary) else []
    check(not any(s.get("name", "").startswith("ProfilerStep#") for s in rows),
          f"--no-python: no automatic steps, got {rows}")


# ---------------------------------------------------------------------------
# DataLoader ranges

LOADER_ARGS = ["--epochs", "2", "--samples", "6", "--batch", "2", "--sample-ms", "10"]
LOADER_BATCHES, LOADER_EPOCHS, BATCH_MS = 6, 2, 20.0
# The whole run as one step: the automatic steps end at the last optimizer.step(), and
# the loop's last __next__ call (the one that ends it) comes after.
WHOLE_RUN = ["--step-marker", "^no step marker$"]


def loader_ranges(result, iterator):
    name = f"enumerate(DataLoader)#{iterator}.__next__"
    ranges = tp.all_trace_events(result, ph="X", name=name)
    # One per __next__ call: each batch, and the call that ends each epoch.
    check_eq(len(ranges), LOADER_BATCHES + LOADER_EPOCHS, f"'{name}' ranges")
    check(all(ev.get("cat") == "user_annotation" for ev in ranges), "DataLoader ranges are user_annotation")
    check_eq(tp.op(result.summary, name)["calls"], LOADER_BATCHES + LOADER_EPOCHS, f"calls of {name}")
    return name, sorted(tp.dur_ns(ev) for ev in ranges)


def torch_profiler_counts(stdout):
    return {line.split()[1]: int(line.split()[2]) for line in stdout.decode().splitlines()
            if line.startswith("torch.profiler ")}


def data_loader_ranges():
    r = run_py([script("data_loader.py")] + LOADER_ARGS, options=WHOLE_RUN)
    name, durations = loader_ranges(r, "_SingleProcessDataLoaderIter")
    # The fetches cover the samples' sleeps (2 x 10 ms a batch); the epoch ends do not.
    fetches = durations[-LOADER_BATCHES:]
    check(fetches[0] >= ms(BATCH_MS), f"every batch fetch covers its {BATCH_MS} ms of loading: {durations}")
    if durations[LOADER_EPOCHS - 1] >= ms(BATCH_MS / 2):  # a preempted call: run again
        raise tp.TimingCheckFailed(f"the epoch-ending calls load nothing: {durations}")
    # torch.profiler counts the same calls under the same name.
    plain = run_plain([script("data_loader.py"), "--profiler"] + LOADER_ARGS)
    check_eq(torch_profiler_counts(plain.stdout), {name: LOADER_BATCHES + LOADER_EPOCHS},
             "torch.profiler's rows for the same loop")


def loader_advice():
    """The DataLoader advice from the steady steps of 15 ms of compute each: a loader whose
    first sample takes 100 ms (a dataset opening its files) and the rest nothing draws no
    advice, though its whole run is over a third DataLoader; one that takes 2 ms a sample
    is still flagged, the line saying what it was judged on."""
    common = ["--epochs", "1", "--samples", "12", "--batch", "1", "--compute-ms", "15", "--first-ms", "100"]
    fast = run_py([script("data_loader.py"), "--sample-ms", "0"] + common)
    b = fast.summary["overview"]["breakdown"]
    check(b["steps"][0]["warmup"] and not any(s["warmup"] for s in b["steps"][1:]),
          f"step 0 is warm-up, the rest steady: {[(s['dur_ns'], s['warmup']) for s in b['steps']]}")
    check_timing(b["pct"]["dataloader"] > 5 >= b["steady"]["pct"]["dataloader"],
                 f"DataLoader over 5% of the whole run, not of the steady steps: {b['pct']} {b['steady']['pct']}")
    ids = [r["id"] for r in fast.summary["overview"]["recommendations"]]
    check("dataloader" not in ids, f"no DataLoader advice for a fast loader: {ids}")
    slow = run_py([script("data_loader.py"), "--sample-ms", "2"] + common)
    texts = [r["text"] for r in slow.summary["overview"]["recommendations"] if r["id"] == "dataloader"]
    check_timing(len(texts) == 1, f"the slow loader is flagged: {slow.summary['overview']['recommendations']}")
    check("over 11 steady steps after 1 of warm-up" in texts[0], f"what the advice was judged on: {texts[0]}")


def data_loader_workers():
    r = run_py([script("data_loader.py"), "--workers", "2"] + LOADER_ARGS, options=WHOLE_RUN)
    _, durations = loader_ranges(r, "_MultiProcessingDataLoaderIter")
    # Two workers load in parallel: the main process waits at least half the loading.
    check(sum(durations) >= ms(LOADER_BATCHES * BATCH_MS / 2), f"waits for the workers' batches: {durations}")


def data_loader_own_profiler():
    # The program runs torch.profiler itself: one range per call still, and the
    # program's own profiler sees what it sees alone.
    args = [script("data_loader.py"), "--profiler"] + LOADER_ARGS
    r = run_py(args, options=WHOLE_RUN)
    loader_ranges(r, "_SingleProcessDataLoaderIter")
    check_eq(r.stdout, run_plain(args).stdout, "stdout (torch.profiler's counts included) with and without torchprof")


def data_loader_ops():
    # With the op capture on (a dispatch mode on this CPU build): one range per call.
    r = run_py([script("data_loader.py")] + LOADER_ARGS, options=["--pytorch-ops"] + WHOLE_RUN)
    loader_ranges(r, "_SingleProcessDataLoaderIter")


# ---------------------------------------------------------------------------
# The torchprof module


def annotations():
    r = run_py([script("annotations.py")])
    check_eq(r.stdout.decode(), "active True\nbare returned 42\n", "stdout")
    s = r.summary
    tp.check_op(s, "inner", calls=2, self_ns=ms(60), total_ns=ms(60))
    tp.check_op(s, "outer", calls=1, self_ns=ms(20), total_ns=ms(80))
    tp.check_op(s, "bare", calls=1, self_ns=ms(10), total_ns=ms(10))
    inner = tp.all_trace_events(r, ph="X", name="inner")
    check_eq(len(inner), 2, "inner ranges in the traces")
    for k in range(2):
        marks = [ev for ev in tp.all_trace_events(r) if ev.get("name") == f"inner mark {k}" and ev.get("ph") == "i"]
        check_eq(len(marks), 1, f"instant events 'inner mark {k}'")
        ts = float(marks[0]["ts"])
        check(any(float(ev["ts"]) <= ts <= float(ev["ts"]) + float(ev["dur"]) for ev in inner),
              f"'inner mark {k}' lies inside an inner range")
    outer = tp.all_trace_events(r, ph="X", name="outer")[0]
    for ev in inner:
        check(float(outer["ts"]) <= float(ev["ts"]) and
              float(ev["ts"]) + float(ev["dur"]) <= float(outer["ts"]) + float(outer["dur"]) + 0.001,
              "inner ranges nest in outer")


def noop_outside():
    # The module imported without torchprof-run (bootstrap on the path, no socket).
    env = clean_env(PYTHONPATH=bootstrap_dir())
    proc = run_plain([script("annotations.py")], env=env)
    check_eq(proc.returncode, 0, f"exit code outside torchprof-run; stderr: {proc.stderr[-2000:]!r}")
    check_eq(proc.stdout.decode(), "active False\nbare returned 42\n", "stdout outside torchprof-run")
    check_eq(proc.stderr, b"", "stderr outside torchprof-run")


# ---------------------------------------------------------------------------
# Processes


def pool(method):
    workers, tasks = 2, 6
    r = run_py([script("mp_pool.py"), method, str(workers), str(tasks)])
    check_eq(r.stdout.decode().strip(), str([x * x for x in range(tasks)]), "pool results")
    procs = tp.processes_with_events(r.summary)
    check_eq(len(procs), workers + 1, f"processes with events ({method}: parent + workers)")
    for p in procs:
        check(p["events"] > 0, f"process {p['pid']} has events")
    tp.check_op(r.summary, "task", calls=tasks)
    tp.check_op(r.summary, "main", calls=1)
    main_pid = tp.all_trace_events(r, ph="X", name="main")[0]["pid"]
    worker_pids = {p["pid"] for p in procs} - {main_pid}
    check_eq(len(worker_pids), workers, "worker processes")
    marks = [ev for ev in tp.all_trace_events(r, ph="i") if ev.get("name") == "worker start"]
    check_eq({ev["pid"] for ev in marks}, worker_pids, "processes with a 'worker start' mark")
    task_pids = {ev["pid"] for ev in tp.all_trace_events(r, ph="X", name="task")}
    check(task_pids <= worker_pids, f"tasks ran in the workers only: {task_pids} vs {worker_pids}")


def pool_fork():
    pool("fork")


def pool_spawn():
    pool("spawn")


def pool_forkserver():
    pool("forkserver")


# ---------------------------------------------------------------------------
# Start-up: environment, sitecustomize, cost


def own_sitecustomize():
    user_site = os.path.join(PY_DIR, "user_site")
    env = clean_env(PYTHONPATH=user_site)
    plain = run_plain([script("site_check.py")], env=env).stdout.decode()
    check("user sitecustomize ran yes" in plain, f"the test's sitecustomize runs without the tool: {plain}")
    r = run_py([script("site_check.py")], env=env)
    check_eq(r.stdout.decode(), plain, "start-up as seen by the program, with and without torchprof-run")


def system_sitecustomize():
    # With no sitecustomize of the program's own, the system's one (Debian's) still runs.
    plain = run_plain([script("site_check.py")]).stdout.decode()
    r = run_py([script("site_check.py")])
    check_eq(r.stdout.decode(), plain, "sitecustomize the program ends up with")


def no_extra_modules():
    # The bootstrap imports nothing a bare interpreter has not loaded (torch, ctypes,
    # importlib.util would cost start-up time): same module list with and without it.
    plain = run_plain([script("site_check.py"), "--modules"]).stdout.decode()
    env = clean_env(PYTHONPATH=bootstrap_dir(), TORCHPROF_SOCKET="/nonexistent/torchprof.sock")
    boot = run_plain([script("site_check.py"), "--modules"], env=env).stdout.decode()
    def modules(text):
        return set(next(l for l in text.splitlines() if l.startswith("modules ")).split()[1:])
    check_eq(sorted(modules(boot) - modules(plain)), [], "modules loaded only with the bootstrap")
    check("torch imported False" in boot, "torch is not imported at start-up")


def pythonpath():
    probe = "import os; print(os.environ.get('PYTHONPATH'))"
    boot = bootstrap_dir()
    r = run_py(["-c", probe], env=clean_env(PYTHONPATH="/tp/a:/tp/b"))
    check_eq(r.stdout.decode().strip(), boot + ":/tp/a:/tp/b", "PYTHONPATH of a Python target")
    r = run_py(["-c", probe], env=clean_env(PYTHONPATH=""))
    check_eq(r.stdout.decode().strip(), boot, "PYTHONPATH when it was empty")
    r = run_py(["/usr/bin/printenv", "PYTHONPATH"], env=clean_env(PYTHONPATH="/tp/a"))
    check_eq(r.stdout.decode().strip(), "/tp/a", "PYTHONPATH of a program that is not Python")
    r = run_py(["/usr/bin/printenv", "PYTHONPATH"], options=["--python"], env=clean_env(PYTHONPATH="/tp/a"))
    check_eq(r.stdout.decode().strip(), boot + ":/tp/a", "PYTHONPATH with --python")
    r = run_py(["-c", probe], options=["--no-python"], env=clean_env(PYTHONPATH="/tp/a"))
    check_eq(r.stdout.decode().strip(), "/tp/a", "PYTHONPATH with --no-python")


def shebang():
    d = tp.fresh_dir("shebang")
    path = os.path.join(d, "tool")
    with open(path, "w") as f:
        f.write("#!/usr/bin/env -S python3 -u\nimport os\nprint(os.environ.get('PYTHONPATH'))\n")
    os.chmod(path, 0o755)
    r = run_py([path], env=clean_env(PATH="/usr/bin:/bin"))
    check_eq(r.stdout.decode().strip(), bootstrap_dir(), "PYTHONPATH of a #!/usr/bin/env python3 script")


# ---------------------------------------------------------------------------
# Behaviour unchanged


def same_as_plain(mode, rc):
    plain = run_plain([script("exit_behaviour.py"), mode])
    check_eq(plain.returncode, rc, f"exit code of exit_behaviour.py {mode} alone")
    r = run_py([script("exit_behaviour.py"), mode], options=["-q"], expect_rc=rc)
    check_eq(r.stdout, plain.stdout, "stdout")
    check_eq(r.stderr, plain.stderr, "stderr with -q (no table)")


def exit_code():
    same_as_plain("exit3", 3)


def exception():
    same_as_plain("raise", 1)
    plain = run_plain([script("exit_behaviour.py"), "raise"])
    check(b"Traceback (most recent call last)" in plain.stderr and b"ValueError: deliberate" in plain.stderr,
          "the traceback is printed")


SCENARIOS = [auto_steps, steps_apart, schedule, user_steps, own_markers, one_step, two_optimizers, gan_steps, critic_steps,
             nested_step, wrapped_optimizer, data_loader_ranges, data_loader_workers, data_loader_own_profiler, loader_advice,
             data_loader_ops, no_bootstrap, annotations,
             noop_outside, pool_fork, pool_spawn, pool_forkserver, own_sitecustomize, system_sitecustomize,
             no_extra_modules, pythonpath, shebang, exit_code, exception]

if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in SCENARIOS}))
