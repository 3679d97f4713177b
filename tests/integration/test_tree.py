"""Process trees under one torchprof-run: every Python process gets the bootstrap
whatever started it (a shell script, bash -c, a #! script found on PATH, env), programs
that are not Python keep the user's PYTHONPATH, processes that recorded nothing are
counted one by one, and a run that recorded nothing says so in one line."""

import os
import stat
import sys

import tp
from tp import check, check_eq

PYTHON = sys.executable
MM_PER_PROCESS = 4  # aten::mm calls of worker.py

WORKER = """
import os, sys, torch
x = torch.ones(8, 8)
for _ in range(%d):
    torch.mm(x, x)
with open(sys.argv[1], "w") as f:
    f.write(os.environ.get("PYTHONPATH", "<unset>"))
""" % MM_PER_PROCESS


def write(path, text, executable=False):
    with open(path, "w") as f:
        f.write(text)
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def make_tree(root):
    """launch.sh in `root`: four Python ranks started four ways, printenv, five /bin/true."""
    write(os.path.join(root, "worker.py"), WORKER)
    bindir = os.path.join(root, "bin")
    os.mkdir(bindir)
    # A #! script reached through PATH (execvp's search), as torchrun's entry point is.
    write(os.path.join(bindir, "tp-worker"), "#!/usr/bin/env %s\n" % PYTHON + WORKER, executable=True)
    write(os.path.join(root, "launch.sh"), f"""#!/bin/sh
cd "{root}"
RANK=0 WORLD_SIZE=4 {PYTHON} worker.py pp0 &
RANK=1 WORLD_SIZE=4 bash -c '{PYTHON} worker.py pp1; true' &
RANK=2 WORLD_SIZE=4 PATH="{bindir}:$PATH" tp-worker pp2 &
RANK=3 WORLD_SIZE=4 /usr/bin/env {PYTHON} worker.py pp3 &
wait
printenv PYTHONPATH > pp-shell
for i in 1 2 3 4 5; do /bin/true; done
""", executable=True)
    return os.path.join(root, "launch.sh")


def run_tree(options):
    root = tp.fresh_dir("tree")
    launch = make_tree(root)
    out_dir = os.path.join(root, "out")
    env = dict(os.environ, PYTHONPATH="/tp/user")
    env.pop("TORCHPROF_PYTHON", None)
    result = tp.run_tool(["-o", out_dir] + list(options) + ["--", launch], env=env, timeout=150)
    result.out_dir = out_dir
    check_eq(result.rc, 0, f"exit code of torchprof-run {launch}: {result.describe()}")
    seen = {}
    for name in ("pp0", "pp1", "pp2", "pp3", "pp-shell"):
        with open(os.path.join(root, name)) as f:
            seen[name] = f.read().strip()
    return result, seen


def bootstrap_dir():
    return os.path.realpath(os.path.join(tp.bin_path(""), "..", "share", "torchprof", "python"))


def every_python_process():
    """A shell script's four Python processes each record torch's ops, with their rank."""
    result, seen = run_tree(["--pytorch-ops"])
    boot = bootstrap_dir()
    for name in ("pp0", "pp1", "pp2", "pp3"):
        check_eq(seen[name], boot + ":/tp/user", f"PYTHONPATH of the Python process that wrote {name}")
    check_eq(seen["pp-shell"], "/tp/user", "PYTHONPATH of printenv, started by the shell script")
    s = result.summary
    ranked = {p["rank"]: p for p in s["processes"] if p["rank"] is not None and p["events"] > 0}
    check_eq(sorted(ranked), [0, 1, 2, 3], f"ranks of the processes with events: {s['processes']}")
    for rank, p in ranked.items():
        check_eq(p["role"], "python", f"role of rank {rank}")
        check_eq(p["world_size"], 4, f"world_size of rank {rank}")
    check_eq(tp.op(s, "aten::mm")["calls"], 4 * MM_PER_PROCESS, "aten::mm calls over the four ranks")
    check_eq(len(s["traces"]), 4, f"traces: {s['traces']}")
    # Everything else ran and is counted: the shell, bash (if it did not exec), env
    # before its exec, printenv, the five /bin/true.
    silent = [p for p in s["processes"] if p["events"] == 0]
    check_eq(s["processes_without_events"], len(silent), "processes_without_events")
    trues = [p for p in silent if p["cmdline"] == ["/bin/true"]]
    check_eq(len(trues), 5, f"/bin/true processes: {silent}")
    check(all(p["exit_code"] == 0 and p["role"] == "program" for p in trues), f"{trues}")
    shells = [p for p in silent if p["role"] == "shell" and p["cmdline"][-1].endswith("launch.sh")]
    check_eq(len(shells), 1, f"the shell script's process: {[(p['role'], p['cmdline']) for p in silent]}")


def no_python():
    """--no-python: no Python process gets the bootstrap, so none records an op."""
    result, seen = run_tree(["--pytorch-ops", "--no-python"])
    for name in ("pp0", "pp1", "pp2", "pp3", "pp-shell"):
        check_eq(seen[name], "/tp/user", f"PYTHONPATH seen by {name} under --no-python")
    s = result.summary
    check_eq(s["ops"], [], "ops under --no-python")
    check(s["processes_without_events"] >= 10, f"processes_without_events {s['processes_without_events']}")


def silent_count():
    """A loop of 20 short programs: each one is counted, with its exit status."""
    root = tp.fresh_dir("silent")
    out_dir = os.path.join(root, "out")
    result = tp.run_tool(["-o", out_dir, "--", "/bin/sh", "-c",
                          "for i in $(seq 20); do /bin/true; done; /bin/false; exit 0"])
    result.out_dir = out_dir
    check_eq(result.rc, 0, "exit code")
    s = result.summary
    # sh, seq, 20 true, false
    check_eq(s["processes_without_events"], 23, f"processes without events: {[p['cmdline'] for p in s['processes']]}")
    codes = sorted((p["cmdline"][0], p["exit_code"]) for p in s["processes"] if p["cmdline"][0] != "/bin/sh")
    check_eq(codes.count(("/bin/true", 0)), 20, f"{codes}")
    check(("/bin/false", 1) in codes, f"{codes}")
    lines = [line for line in result.stderr_text.splitlines() if line.startswith("torchprof: nothing was recorded")]
    check_eq(len(lines), 1, f"the nothing-recorded line: {result.stderr_text}")
    check("its 23 processes made no NVTX range" in lines[0] and "nvtxRangePushA" in lines[0], lines[0])


SCENARIOS = {"every_python_process": every_python_process, "no_python": no_python, "silent_count": silent_count}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
