"""The launcher's own ends: a script whose #! interpreter is missing (127, one line naming
it, no output directory), torchprof-run killed (the program gets SIGTERM; its socket
directory is removed by the next run, and nothing else is), and a program that ignores
Ctrl-C (a second sends SIGTERM, a third SIGKILL, each said; what was recorded is kept)."""

import glob
import json
import os
import signal
import subprocess
import time

import tp
from tp import check, check_eq


def missing_interpreter():
    d = tp.fresh_dir("shebang")
    script = os.path.join(d, "train.sh")
    with open(script, "w") as f:
        f.write("#!/nonexistent/torchprof-test/python3 -u\nprint('never')\n")
    os.chmod(script, 0o755)
    out = os.path.join(d, "out")
    r = tp.run_tool(["-o", out, "--", script])
    check_eq(r.rc, 127, "exit code for a script whose interpreter is missing")
    lines = [line for line in r.stderr_text.splitlines() if line.strip()]
    check_eq(len(lines), 1, f"lines of stderr: {r.stderr_text!r}")
    check("/nonexistent/torchprof-test/python3" in lines[0], f"the interpreter is not named: {lines[0]!r}")
    check(not os.path.exists(out), f"{out} was made for a program that cannot start")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _socket_dirs(tmp):
    return sorted(glob.glob(os.path.join(tmp, "torchprof-??????")))


def launcher_killed():
    tmp = tp.fresh_dir("stale")
    env = dict(os.environ, TMPDIR=tmp)
    out = os.path.join(tp.fresh_dir("killed"), "out")
    proc = tp.start_tool(["-o", out, "--", "/bin/sh", "-c", "echo pid=$$; exec sleep 60"], env=env)
    target = int(tp.wait_line(proc, "pid=").strip().split("=")[1])
    left = _socket_dirs(tmp)
    check_eq(len(left), 1, f"socket directories of the running launcher in {tmp}")
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(target) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(target)
    if alive:
        os.kill(target, signal.SIGKILL)
    check(not alive, "the program runs on after torchprof-run was killed")
    check_eq(_socket_dirs(tmp), left, "the killed launcher's socket directory (left behind)")
    # Beside it: a directory of the same form holding a file, and a live run's. The next
    # run removes the dead launcher's alone.
    keep = os.path.join(tmp, "torchprof-keepme")
    os.mkdir(keep, 0o700)
    open(os.path.join(keep, "notes"), "w").close()
    live = tp.start_tool(["-o", out + "_live", "--", "/bin/sh", "-c", "echo go; sleep 5"], env=env)
    tp.wait_line(live, "go")
    live_dirs = [d for d in _socket_dirs(tmp) if d not in left and d != keep]
    check_eq(len(live_dirs), 1, "socket directories of the live run")
    r = tp.run_tool(["-o", out + "_next", "--", "/bin/true"], env=env)
    check_eq(r.rc, 0, "exit code of the next run")
    now = _socket_dirs(tmp)
    check(left[0] not in now, f"the dead launcher's {left[0]} is still there after the next run")
    check(keep in now, "a directory holding a file was removed")
    check(live_dirs[0] in now, "the live run's socket directory was removed")
    live.wait(timeout=60)
    check_eq(live.returncode, 0, "exit code of the live run")


def ctrl_c_escalation():
    """A program ignoring SIGINT and SIGTERM: three Ctrl-C to torchprof-run end it with
    SIGKILL; both escalations are said and the 2,001 marks it made are all reported."""
    out = os.path.join(tp.fresh_dir("ctrlc"), "out")
    flood = tp.program("rel_flood")
    proc = tp.start_tool(["-o", out, "--", "/bin/sh", "-c",
                          f"trap '' INT TERM; {flood} 2000 1 100 && echo flooded && exec sleep 60"])
    tp.wait_line(proc, "flooded")
    time.sleep(0.5)  # the marks' last flush
    for _ in range(3):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
    _out, err = proc.communicate(timeout=60)
    err = err.decode()
    check_eq(proc.returncode, 128 + signal.SIGKILL, f"exit code after three Ctrl-C (stderr {err!r})")
    check("interrupted again: sending SIGTERM to pid" in err, f"the SIGTERM is not said: {err!r}")
    check("interrupted again: sending SIGKILL to pid" in err, f"the SIGKILL is not said: {err!r}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    events = sum(p.get("events", 0) for p in tp.processes_with_events(summary))
    check_eq(events, 2001, "marks of the program in the report")
    check_eq(summary.get("dropped_events"), 0, "dropped_events")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (missing_interpreter, launcher_killed, ctrl_c_escalation)}))
