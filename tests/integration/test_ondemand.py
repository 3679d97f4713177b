"""On-demand capture of a running program: torchprof-run --paused, then torchprof start,
stop and trigger from another process, and --capture-range signal. What comes out is
checked against what ondemand_loop emitted: only the captured steps' events, each
window its own cycle of traces, every process of the tree obeying."""

import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import tp
from tp import check, check_eq

STEP_RE = "ProfilerStep#"


class Live:
    """torchprof-run started in the background; the test talks to it meanwhile."""

    def __init__(self, args, options=("--paused",), program="ondemand_loop", env=None):
        tp.require_tool()
        self.parent = tp.fresh_dir("ondemand")
        self.out = os.path.join(self.parent, "out")
        self.argv = [tp.bin_path("torchprof-run"), "-o", self.out] + list(options) + \
            ["--", tp.program(program)] + [str(a) for a in args]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(self.out, ".control")):
            check(self.proc.poll() is None, "torchprof-run ended before its control file appeared")
            check(time.monotonic() < deadline, "no DIR/.control after 20 s")
            time.sleep(0.02)

    def control(self, *args, expect_rc=0, prefix=()):
        argv = list(prefix) + [tp.bin_path("torchprof")] + [str(a) for a in args]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if expect_rc is not None:
            check_eq(r.returncode, expect_rc,
                     f"exit code of {' '.join(argv)} (stderr: {r.stderr.decode()!r})")
        return r

    def finish(self):
        stdout, stderr = self.proc.communicate(timeout=120)
        self.result = tp.Result(self.argv, subprocess.CompletedProcess(self.argv, self.proc.returncode,
                                                                       stdout, stderr), self.out, 0)
        check_eq(self.proc.returncode, 0, "exit code of torchprof-run:\n" + self.result.stderr_text[-3000:])
        return self.result


def abs_events(res, **kw):
    """(event, Unix-epoch microseconds) of the trace events; ts counts from baseTimeNanoseconds."""
    return [(e, e["ts"] + t["baseTimeNanoseconds"] / 1000) for _, t in res.traces for e in tp.trace_events(t, **kw)]


def windows_of(summary, pid):
    return [w for w in summary["capture_windows"] if w["pid"] == pid]


def step_numbers(summary, pid, action=None):
    return [int(s["name"][len(STEP_RE):]) for s in summary["steps"]
            if s["pid"] == pid and s["name"].startswith(STEP_RE) and (action is None or s["action"] != "none")]


def parent_pid(summary):
    pids = {s["pid"] for s in summary["steps"] if s["name"].startswith(STEP_RE)}
    check_eq(len(pids), 1, "processes with steps")
    return pids.pop()


def trigger_three_steps():
    """Paused 2 s, then `trigger --steps 3`: exactly three consecutive steps are in the
    output, with their 2 work ranges each, and nothing from before."""
    run = Live([400, 10])
    time.sleep(2)
    r = run.control("trigger", run.out, "--steps", 3, "--wait", 20)
    check("window 1 closed" in r.stdout.decode(), f"trigger --wait output: {r.stdout!r}")
    res = run.finish()
    s = res.summary
    pid = parent_pid(s)
    nums = step_numbers(s, pid)
    check_eq(len(nums), 3, f"steps recorded ({nums})")
    check_eq(nums, list(range(nums[0], nums[0] + 3)), "consecutive steps")
    check(nums[0] >= 100, f"the first recorded step is {nums[0]}: recording began before 2 s of 10 ms steps")
    check_eq(tp.op(s, "ProfilerStep*")["calls"], 3, "ProfilerStep* calls")
    check_eq(tp.op(s, "work")["calls"], 6, "work calls (2 per captured step)")
    names = sorted(o["name"] for o in s["ops"])
    check_eq(names, ["ProfilerStep*", "work"], "table rows")
    wins = windows_of(s, pid)
    check_eq(len(wins), 1, f"capture windows {wins}")
    check_eq((wins[0]["id"], wins[0]["source"], wins[0]["steps"], wins[0]["cycle"]), (1, "trigger", 3, 0),
             "the window")
    # Every recorded NVTX event lies inside the window (trace times are microseconds).
    start_us, end_us = wins[0]["start_ns"] / 1000, (wins[0]["start_ns"] + wins[0]["dur_ns"]) / 1000
    evs = abs_events(res, ph="X", cat="user_annotation")
    check_eq(len(evs), 9, "user_annotation events in the traces")
    for e, ts in evs:
        check(start_us - 1 <= ts <= end_us + 1, f"event {e['name']} at {ts} outside [{start_us}, {end_us}]")


def two_triggers():
    """Two triggers give two windows, two cycles and two trace files of the process."""
    run = Live([400, 10])
    time.sleep(0.5)
    run.control("trigger", run.out, "--steps", 2, "--wait", 20)
    time.sleep(0.3)
    run.control("trigger", run.out, "--steps", 4, "--wait", 20)
    res = run.finish()
    s = res.summary
    pid = parent_pid(s)
    wins = windows_of(s, pid)
    check_eq([(w["id"], w["steps"], w["cycle"]) for w in wins], [(1, 2, 0), (2, 4, 1)], "windows")
    check_eq(tp.op(s, "ProfilerStep*")["calls"], 6, "ProfilerStep* calls")
    check_eq(tp.op(s, "work")["calls"], 12, "work calls")
    saved = [st for st in s["steps"] if st["pid"] == pid and st["action"] == "record_and_save"]
    check_eq(len(saved), 2, "steps that close a cycle")
    traces = [p for p, _ in res.traces if f"_{pid}." in os.path.basename(p)]
    check_eq(len(traces), 2, f"trace files of pid {pid}: {traces}")
    first, second = step_numbers(s, pid)[:2], step_numbers(s, pid)[2:]
    check(second[0] > first[-1] + 1, f"the second window starts later: {first} then {second}")


def start_stop_fork():
    """start / stop reach the forked child (no steps of its own) as well as the parent;
    each records only between them."""
    # 6 s of steps: the stop must come while the program runs, however slow the commands
    # are on a loaded machine (the control file appears before the program starts).
    run = Live([600, 10, 1])
    time.sleep(0.8)
    r = run.control("start", run.out)
    check("window 1" in r.stdout.decode(), f"start said {r.stdout!r}")
    time.sleep(0.8)
    run.control("stop", run.out)
    res = run.finish()
    s = res.summary
    pid = parent_pid(s)
    child_procs = [p for p in s["processes"] if p["ppid"] == pid]
    check_eq(len(child_procs), 1, "forked children")
    child = child_procs[0]["pid"]
    check(tp.op(s, "child_work")["calls"] > 20, f"child_work calls: {tp.op(s, 'child_work')}")
    check(tp.op(s, "work")["calls"] > 20, "work calls")
    for proc in (pid, child):
        wins = windows_of(s, proc)
        check_eq([w["id"] for w in wins], [1], f"windows of pid {proc}")
    wins = windows_of(s, child)
    start_us, end_us = wins[0]["start_ns"] / 1000, (wins[0]["start_ns"] + wins[0]["dur_ns"]) / 1000
    evs = abs_events(res, ph="X", name="child_work")
    check(len(evs) == tp.op(s, "child_work")["calls"], "child_work in the traces")
    for e, ts in evs:
        check(start_us - 1 <= ts <= end_us + 1, f"child_work at {ts} outside [{start_us}, {end_us}]")
    # The child makes a range at most every 5 ms (1 ms in it, 4 ms after) for ~6 s: the
    # window holds no more than its length allows.
    check(wins[0]["dur_ns"] < 3e9, f"the child's window lasted {wins[0]['dur_ns']} ns: it did not close at stop")
    calls = tp.op(s, "child_work")["calls"]
    check(calls <= wins[0]["dur_ns"] / 5e6 + 1, f"child_work calls {calls} in a window of {wins[0]['dur_ns']} ns")


def trigger_follow():
    """A trigger counts the parent's steps; the forked child, which has none, records
    while the parent's window is open and not before or after."""
    run = Live([300, 10, 1])
    time.sleep(0.6)
    run.control("trigger", run.out, "--steps", 40, "--wait", 20)
    res = run.finish()
    s = res.summary
    pid = parent_pid(s)
    child = [p for p in s["processes"] if p["ppid"] == pid][0]["pid"]
    check_eq(tp.op(s, "ProfilerStep*")["calls"], 40, "steps of the parent")
    parent_win = windows_of(s, pid)
    child_win = windows_of(s, child)
    check_eq([(w["id"], w["source"]) for w in parent_win], [(1, "trigger")], "the parent's window")
    check_eq([(w["id"], w["source"]) for w in child_win], [(1, "follow")], "the child's window")
    calls = tp.op(s, "child_work")["calls"]
    check(10 < calls < 150, f"child_work calls {calls}: the child follows the ~0.4 s window")
    start_us = parent_win[0]["start_ns"] / 1000
    end_us = start_us + parent_win[0]["dur_ns"] / 1000
    for e, ts in abs_events(res, ph="X", name="child_work"):
        check(start_us - 50000 <= ts <= end_us + 50000, f"child_work at {ts} far outside [{start_us}, {end_us}]")


def late_exec_child():
    """A process that connects after a start (an exec'd child, which starts paused from
    its environment) is sent the current state and records until the stop."""
    run = Live([300, 10, 2])
    time.sleep(0.3)
    run.control("start", run.out)
    time.sleep(1.2)
    run.control("stop", run.out)
    res = run.finish()
    s = res.summary
    pid = parent_pid(s)
    children = [p for p in s["processes"] if p["ppid"] == pid]
    check_eq(len(children), 1, "exec'd children")
    check_eq([w["id"] for w in windows_of(s, children[0]["pid"])], [1], "the late child's window")
    check(tp.op(s, "child_work")["calls"] > 20, f"child_work calls: {tp.op(s, 'child_work')}")


def other_uid_refused():
    """start from another uid is refused (exit 3), both where the files stop it and where
    it gets through them (CAP_DAC_OVERRIDE) to the socket's SO_PEERCRED check."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        print("SKIP: needs root and setpriv to act as another uid")
        return
    run = Live([250, 10])
    os.chmod(os.path.dirname(run.out), 0o755)
    os.chmod(run.out, 0o755)
    as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = run.control("start", run.out, expect_rc=3, prefix=as_nobody)
    check("another user" in r.stderr.decode(), f"stderr: {r.stderr!r}")
    check_eq(len(r.stderr.decode().strip().splitlines()), 1, "lines of the refusal")
    with_caps = as_nobody + ["--inh-caps=+dac_override", "--ambient-caps=+dac_override"]
    r = run.control("start", run.out, expect_rc=3, prefix=with_caps)
    check("another user" in r.stderr.decode(), f"stderr with CAP_DAC_OVERRIDE: {r.stderr!r}")
    # The client stops at the files it does not trust; the server refuses such a peer on
    # its own too (SO_PEERCRED), for a client that goes straight to the socket.
    with open(os.path.join(run.out, ".control")) as f:
        sock = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)["socket"]
    # (The refusal comes before any request is read: sending one could race its close.)
    raw = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(10)\ns.connect(sys.argv[1])\n"
           "print(s.recv(256).decode().strip())\n")
    direct = subprocess.run(with_caps + [sys.executable, "-c", raw, sock], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=30)
    check(direct.stdout.decode().startswith("refused"), f"the server answered a peer of uid 65534: {direct.stdout!r}")
    res = run.finish()
    check_eq(res.summary["capture_windows"], [], "windows after refused starts")
    check(all(o["calls"] == 0 for o in res.summary["ops"]) or not res.summary["ops"], "nothing recorded")
    check("refused pid" in res.stderr_text, "the launcher logs the refused peer")


def finished_run():
    """A trigger to a finished run, or to a directory that never held one: one line, exit 2."""
    r = tp.profile("ondemand_loop", [3, 2])
    for target in (r.out_dir, os.path.join(r.out_dir, "nothing_here")):
        p = subprocess.run([tp.bin_path("torchprof"), "trigger", target, "--steps", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check_eq(p.returncode, 2, f"exit code for {target}")
        lines = p.stderr.decode().strip().splitlines()
        check_eq(len(lines), 1, f"stderr lines: {lines}")
        check("no running capture" in lines[0], f"the line: {lines[0]}")
    check_eq(tp.op(r.summary, "work")["calls"], 6, "an uncontrolled run records everything")
    check_eq(r.summary["capture_windows"], [], "an uncontrolled run has no windows")


def signal_toggle():
    """--capture-range signal: paused at start, SIGUSR2 starts, the next stops."""
    run = Live([250, 10], options=("--capture-range", "signal"))
    time.sleep(0.5)
    run.proc.send_signal(signal.SIGUSR2)
    time.sleep(0.6)
    run.proc.send_signal(signal.SIGUSR2)
    res = run.finish()
    s = res.summary
    pid = parent_pid(s)
    wins = windows_of(s, pid)
    check_eq([w["id"] for w in wins], [1], "windows")
    calls = tp.op(s, "work")["calls"]
    check(10 < calls < 400, f"work calls {calls}: a part of the 500 the program made")
    check(step_numbers(s, pid)[0] > 10, "recording started after the first steps")


def kernel_records_in_capture(out_dir):
    """Kernel records (kind 34) in DIR/capture.tprof, whatever the analysis keeps; the run
    must use TORCHPROF_FRAME_ENCODING=raw (plain zstd frames). None without a zstd CLI."""
    zstd = shutil.which("zstd")
    if zstd is None:
        return None
    data = open(os.path.join(out_dir, "capture.tprof"), "rb").read()
    kernels = 0
    for _pos, ctype, _conn, at, size in tp.capture_chunks(data):
        body = data[at:at + size]
        if ctype != 3:
            continue
        _tid, encoding, raw_size, _seq = struct.unpack_from("<IIII", body, 0)
        check_eq(encoding, 0, "frame encoding (raw)")
        slots = subprocess.run([zstd, "-d", "-c"], input=body[16:], stdout=subprocess.PIPE, check=True).stdout
        check_eq(len(slots), raw_size, "decoded frame size")
        at = 0
        while at + 32 <= len(slots):
            kind, extra = slots[at], slots[at + 1]
            kernels += kind == 34
            at += 32 * (1 + extra)
    return kernels


def gpu_trigger():
    """With the fake libcupti: a trigger of 3 steps records those steps' launches and
    kernels only (activity kinds are off while paused, on from the trigger)."""
    fake = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    if not os.path.exists(fake):
        print(f"SKIP: no fake libcupti at {fake}")
        return
    script = "repeat:250{range:ProfilerStep#{kernel:k1:200us;sleep:8ms}};sync"
    run = Live([script], program="gpu_workload", env={"TORCHPROF_CUPTI_LIB": fake, "TORCHPROF_FRAME_ENCODING": "raw"})
    time.sleep(1)
    run.control("trigger", run.out, "--steps", 3, "--wait", 20)
    res = run.finish()
    s = res.summary
    check_eq(tp.op(s, "ProfilerStep*")["calls"], 3, "ProfilerStep* calls")
    kernels = [o for o in s["ops"] if o["kind"] == "kernel"]
    check_eq([(o["name"], o["calls"]) for o in kernels], [("k1", 3)], "kernel rows")
    launches = [o for o in s["ops"] if o["kind"] == "cuda_api" and "Launch" in o["name"]]
    check_eq(sum(o["calls"] for o in launches), 3, f"launch calls {launches}")
    check_eq(tp.op(s, "ProfilerStep*")["cuda_total_ns"], 3 * 200000, "CUDA time of the captured steps")
    gpu = [e for _, t in res.traces for e in tp.trace_events(t, ph="X", cat="kernel")]
    check_eq(len(gpu), 3, "kernels in the traces")
    # In the capture: the window's 3 kernels and the few launched while the trigger was
    # armed, not the 250 of the run (activity kinds are off while paused).
    kernels = kernel_records_in_capture(res.out_dir)
    if kernels is None:
        print("no zstd command: the capture's kernel records are not counted")
    else:
        check(3 <= kernels <= 8, f"{kernels} kernel records in the capture of 250 kernels launched")


if __name__ == "__main__":
    sys.exit(tp.main({f.__name__: f for f in (trigger_three_steps, two_triggers, start_stop_fork, other_uid_refused,
                                              finished_run, signal_toggle, gpu_trigger, trigger_follow,
                                              late_exec_child)}))
