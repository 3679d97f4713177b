"""NVTX capture: counts exact, self/total times within 10%, threads, the C++ API,
non-ASCII names, start/end across threads, and process trees."""

import collections
import platform
import re

import tp
from tp import check, check_eq, check_close, check_op, check_op_truth


def nested():
    r = tp.profile("nvtx_nested", [3, 4, 10, 5, 4])
    s, truth = r.summary, tp.load_truth(r)
    check_op_truth(s, truth, "outer", 3)
    check_op_truth(s, truth, "inner", 12)
    check_op_truth(s, truth, "leaf", 12)
    check_eq(s.get("dropped_events"), 0, "dropped_events")
    check_durations(r, truth, "outer")
    check_eq(len(tp.all_trace_events(r, name="checkpoint")), 3, "checkpoint marks in the traces")
    tp.validate_traces(r, ["outer", "inner", "leaf"])


def clocks():
    """Both clocks of the records (TORCHPROF_CLOCK): ranges last what the program
    measured with clock_gettime, across the TSC map's recalibrations (every 25 ms), and
    --log-level info says which clock the process used."""
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource", encoding="ascii") as f:
            tsc_here = platform.machine() == "x86_64" and f.read().strip() == "tsc"
    except OSError:
        tsc_here = False
    for clock in ("tsc", "monotonic"):
        r = tp.profile("nvtx_nested", [3, 4, 10, 5, 4], options=["--log-level", "info"],
                       env={"TORCHPROF_CLOCK": clock})
        s, truth = r.summary, tp.load_truth(r)
        check_op_truth(s, truth, "outer", 3)
        check_op_truth(s, truth, "leaf", 12)
        check_durations(r, truth, "outer")
        check_durations(r, truth, "leaf")
        said = [line for line in r.stderr_text.splitlines() if line.startswith("torchprof: clock:")]
        if clock == "tsc" and tsc_here:
            check(len(said) == 1 and "the TSC" in said[0], f"TORCHPROF_CLOCK=tsc: the TSC should be used: {said}")
        else:
            check(len(said) == 1 and "CLOCK_MONOTONIC on every read" in said[0],
                  f"TORCHPROF_CLOCK={clock}: clock_gettime should be used: {said}")


def check_durations(result, truth, name):
    """Each trace event named `name` lasts what the program measured for it."""
    events = sorted(tp.all_trace_events(result, ph="X", name=name), key=lambda ev: float(ev["ts"]))
    expected = sorted((r for rs in truth.values() for r in rs if r.name == name), key=lambda r: r.start_ns)
    check_eq(len(events), len(expected), f"{name!r} ranges in the traces")
    for ev, r in zip(events, expected):
        check_close(tp.dur_ns(ev), r.dur_ns, f"dur of a {name!r} range in the trace",
                    slack_ns=tp.TRUTH_SLACK_PER_CALL_NS)


def threads():
    r = tp.profile("nvtx_threads", [4, 5000])
    s = r.summary
    check_op(s, "work", calls=20000)
    check_op(s, "thread_main", calls=4)
    check_op(s, "spawn", calls=1)
    check_eq(s.get("dropped_events"), 0, "dropped_events")
    procs = tp.processes_with_events(s)
    check_eq(len(procs), 1, "processes with events")
    names = tp.thread_names(procs[0])
    workers = sorted(n for n in names if n and n.startswith("worker-"))
    check_eq(workers, ["worker-0", "worker-1", "worker-2", "worker-3"], "named worker threads")
    check("main-thread" in names, f"main thread name missing: {names}")
    check_eq(len(tp.all_trace_events(r, ph="X", name="work")), 20000, "work ranges in the traces")
    meta = {ev["args"]["name"] for ev in tp.all_trace_events(r, ph="M", name="thread_name")}
    for w in workers:
        check(w in meta, f"no thread_name metadata {w!r} in the traces: {sorted(meta)}")
    tp.validate_traces(r, ["work", "thread_main", "spawn"])


def check_args(result, name, count, **expected):
    """The trace events named `name` (ranges or marks), in time order, carry these args;
    `payload` is a list with one value per event, None meaning the arg is absent."""
    events = sorted((ev for _, t in result.traces for ev in tp.trace_events(t, name=name) if ev.get("ph") in ("X", "i")),
                    key=lambda ev: float(ev["ts"]))
    check_eq(len(events), count, f"{name!r} events in the traces")
    for i, ev in enumerate(events):
        args = ev.get("args", {})
        for key, value in expected.items():
            want = value[i] if isinstance(value, list) else value
            check_eq(args.get(key), want, f"args.{key} of {name!r} event {i}")


def cpp_api():
    n, each = 4, 10
    r = tp.profile("nvtx_cpp", [n, each])
    s, truth = r.summary, tp.load_truth(r)
    for name in ("domain_range", "registered_range", "registered_global", "global_range", "wide_range",
                 "unique_range"):
        check_op_truth(s, truth, name, n)
    check_eq(len(tp.all_trace_events(r, name="global_mark")), n, "global_mark events in the traces")
    check_args(r, "domain_range", n, domain="torchprof.test")
    check_args(r, "unique_range", n, domain="torchprof.test")
    check_args(r, "registered_range", n, domain="torchprof.test", category="io", payload=list(range(n)))
    check_args(r, "global_range", n, domain=None, category=3, payload=[3.5] * n)
    check_args(r, "domain_mark", n, domain="torchprof.test", payload=list(range(n)))
    check_args(r, "registered_global", n, domain=None, category=None, payload=None)
    tp.validate_traces(r, ["domain_range", "registered_range", "global_range", "wide_range"])


UTF8_NAMES = ["矩阵乘法", "données", "🚀 launch", "Grüße ∑ ok"]
WIDE_NAMES = ["宽字符范围", "éàü wide", "🔥 wide"]


def unicode():
    r = tp.profile("nvtx_unicode", [3])
    s, truth = r.summary, tp.load_truth(r)
    for name in UTF8_NAMES + WIDE_NAMES:
        check_op_truth(s, truth, name, 3)
        check(name in r.table, f"{name!r} missing from table.txt")
        check_eq(len(tp.all_trace_events(r, ph="X", name=name)), 3, f"{name!r} ranges in the traces")
    check_eq(len(tp.all_trace_events(r, name="标记 ✓")), 3, "UTF-8 marks in the traces")
    check_eq(len(tp.all_trace_events(r, name="ワイド mark")), 3, "wide marks in the traces")
    tp.validate_traces(r, UTF8_NAMES + WIDE_NAMES)


def startend():
    n, each = 4, 20
    r = tp.profile("nvtx_startend", [n, each])
    s, truth = r.summary, tp.load_truth(r)
    check_op_truth(s, truth, "cross_thread", n)
    check_op_truth(s, truth, "same_thread", n)
    # a start/end range is no parent: main_busy keeps all its time as self time
    check_op_truth(s, truth, "main_busy", n)
    check_durations(r, truth, "cross_thread")
    cross = tp.all_trace_events(r, ph="X", name="cross_thread")
    procs = tp.processes_with_events(s)
    ender = [t["tid"] for t in procs[0].get("threads", []) if t.get("name") == "ender"]
    check_eq(len(ender), 1, "threads named 'ender' in summary.json")
    for ev in cross:
        check(ev["tid"] != ender[0], "cross_thread should sit on the thread that started it")
        check_eq(ev.get("args", {}).get("end tid"), ender[0], "args['end tid'] of cross_thread")
    tp.validate_traces(r, ["cross_thread", "same_thread", "main_busy"])


def fork_exec():
    r = tp.profile("nvtx_fork_exec", [3, 2, 4, 5])
    m = re.fullmatch(rb"parent=(\d+) exec_child=(\d+) fork_child=(\d+)\n", r.stdout)
    check(m, f"unexpected stdout {r.stdout!r}")
    parent, exec_child, fork_child = (int(x) for x in m.groups())
    s = r.summary
    expected = {
        parent: {"parent_range": 3, "parent_after": 1},
        exec_child: {"child_range": 2, "exec_range": 4},
        fork_child: {"fork_range": 5},
    }
    truth = tp.load_truth(r)
    check_eq(sorted(truth), sorted(expected), "pids that wrote ground truth")
    for pid, names in expected.items():
        rows = tp.truth_by_name(truth, pids={pid})
        check_eq({n: v[0] for n, v in rows.items()}, names, f"ranges pid {pid} says it made")
    for name, calls in (("parent_range", 3), ("parent_after", 1), ("child_range", 2),
                        ("exec_range", 4), ("fork_range", 5)):
        check_op_truth(s, truth, name, calls)
    by_pid = collections.defaultdict(list)
    for p in s.get("processes", []):
        by_pid[p["pid"]].append(p)
    for pid in expected:
        check(pid in by_pid, f"pid {pid} missing from summary.json processes {sorted(by_pid)}")
    for child in (exec_child, fork_child):
        check(all(p.get("ppid") == parent for p in by_pid[child]),
              f"ppid of {child} should be {parent}: {by_pid[child]}")
    counts = collections.defaultdict(collections.Counter)
    for _, trace in r.traces:
        for ev in tp.trace_events(trace, ph="X"):
            if ev.get("cat") == "user_annotation":
                counts[ev["pid"]][ev["name"]] += 1
    for pid, names in expected.items():
        check_eq(dict(counts[pid]), names, f"ranges of pid {pid} in its traces")
    tp.validate_traces(r, ["parent_range", "child_range", "exec_range", "fork_range"])


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (nested, clocks, threads, cpp_api, unicode, startend,
                                                      fork_exec)}))
