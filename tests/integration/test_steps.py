"""Steps from ProfilerStep# ranges and torch.profiler's schedule (wait, warmup, active,
repeat, skip_first): step actions, which steps reach ops, one trace per cycle."""

import os
import re

import tp
from tp import check, check_eq, check_close, check_op, check_op_truth


def steps_of(summary):
    procs = tp.processes_with_events(summary)
    check_eq(len(procs), 1, "processes with events")
    pid = procs[0]["pid"]
    rows = [s for s in summary.get("steps", []) if s.get("pid") == pid]
    return sorted(rows, key=lambda s: s["index"])


def check_actions(result, expected):
    rows = steps_of(result.summary)
    check_eq([s["name"] for s in rows], [f"ProfilerStep#{k}" for k in range(len(expected))], "step names")
    check_eq([s["index"] for s in rows], list(range(len(expected))), "step indices")
    check_eq([s["action"] for s in rows], expected, "step actions")
    truth = tp.truth_by_name(tp.load_truth(result))
    for s in rows:
        check_close(s["dur_ns"], truth[s["name"]][1], f"dur_ns of {s['name']}", slack_ns=tp.TRUTH_SLACK_PER_CALL_NS)


def recorded_truth(result, name):
    """(calls, total, self) of `name` inside the steps the schedule records."""
    recorded = {s["name"] for s in steps_of(result.summary) if s["action"] in ("record", "record_and_save")}
    truth = tp.load_truth(result)
    windows = [(r.start_ns, r.end_ns) for rs in truth.values() for r in rs if r.name in recorded]
    inside = [r for rs in truth.values() for r in rs
              if r.name == name and any(a <= r.start_ns and r.end_ns <= b for a, b in windows)]
    return len(inside), sum(r.dur_ns for r in inside), sum(r.self_ns for r in inside)


def check_recorded_op(result, name, calls):
    t_calls, t_total, t_self = recorded_truth(result, name)
    check_eq(t_calls, calls, f"{name!r} ranges inside recorded steps (program's own record)")
    check_op(result.summary, name, calls=calls, self_ns=t_self, total_ns=t_total,
             slack_ns=calls * tp.TRUTH_SLACK_PER_CALL_NS)


def step_calls(summary):
    """Calls of the step rows: torch folds ProfilerStep#N into ProfilerStep*."""
    rows = tp.ops_by_name(summary)
    if "ProfilerStep*" in rows:
        return rows["ProfilerStep*"]["calls"]
    return sum(r["calls"] for n, r in rows.items() if n.startswith("ProfilerStep#"))


def traced_steps(result):
    """Step names per trace file, in file-name order."""
    out = []
    for _, trace in result.traces:
        names = {ev["name"] for ev in tp.trace_events(trace, ph="X") if ev.get("name", "").startswith("ProfilerStep#")}
        out.append(sorted(names, key=lambda n: int(n.split("#")[1])))
    return sorted(out)


def steps():
    r = tp.profile("nvtx_steps", [6, 4, 6, 1])
    s, truth = r.summary, tp.load_truth(r)
    rows = steps_of(s)
    check_eq(len(rows), 6, "steps in summary.json")
    check(all(x["action"] in ("record", "record_and_save") for x in rows),
          f"without --schedule every step is recorded: {[x['action'] for x in rows]}")
    check_actions(r, [x["action"] for x in rows])
    check_op_truth(s, truth, "forward", 6)
    check_op_truth(s, truth, "backward", 6)
    check_eq(step_calls(s), 6, "ProfilerStep calls in summary.json ops")
    table = tp.check_torch_table(r.table)
    check_eq(table.row("ProfilerStep*")["# of Calls"], "6", "ProfilerStep* calls in the table")
    steps_self = sum(v[2] for n, v in tp.truth_by_name(truth).items() if n.startswith("ProfilerStep#"))
    check_close(tp.parse_time_ns(table.row("ProfilerStep*")["Self CPU"]), steps_self, "ProfilerStep* Self CPU")
    check_eq(traced_steps(r), [[f"ProfilerStep#{k}" for k in range(6)]], "steps per trace file")
    tp.check_steps_apart(r)


def outside_steps():
    """Without --schedule nothing is dropped for lying outside a step: nvtx_steps' six
    between_steps ranges (the last after the last step) are in ops, the table and the
    trace, as torch.profiler without a schedule shows them. With a schedule they are left
    out, and the table's last line says how many ranges it left out."""
    r = tp.profile("nvtx_steps", [6, 4, 6, 1])
    truth = tp.load_truth(r)
    check_op_truth(r.summary, truth, "between_steps", 6)
    table = tp.check_torch_table(r.table)
    check_eq(table.row("between_steps")["# of Calls"], "6", "between_steps calls in the table")
    check("Not in the table" not in r.table, f"nothing is left out without a schedule: {r.table[-300:]}")
    check_eq([p["outside_steps_counted"] for p in tp.processes_with_events(r.summary)], [True], "outside_steps_counted")
    check_eq((r.summary["left_out_in_steps"], r.summary["left_out_outside_steps"]), (0, 0), "left out")
    traced = [e for _, t in r.traces for e in tp.trace_events(t, ph="X", name="between_steps")]
    check_eq(len(traced), 6, "between_steps ranges in the trace")
    # A schedule recording steps 2 and 3 of 6: each of the other four steps is 3 ranges
    # (the step, forward, backward), and every between_steps lies outside every step.
    s = tp.profile("nvtx_steps", [6, 4, 6, 1], options=["--schedule", "wait=1,warmup=1,active=2,repeat=1"])
    check("between_steps" not in tp.ops_by_name(s.summary), "between_steps counted under a schedule")
    check_eq((s.summary["left_out_in_steps"], s.summary["left_out_outside_steps"]), (12, 6), "left out")
    check(s.table.rstrip().endswith("Not in the table: 18 ranges, API calls and GPU records outside the recorded "
                                    "steps (12 in steps not recorded, 6 outside every step)"),
          f"the table's last line: {s.table[-300:]}")


def schedule():
    r = tp.profile("nvtx_steps", [6, 4, 6, 1], options=["--schedule", "wait=1,warmup=1,active=2,repeat=1"])
    s = r.summary
    check_actions(r, ["none", "warmup", "record", "record_and_save", "none", "none"])
    check_recorded_op(r, "forward", 2)
    check_recorded_op(r, "backward", 2)
    check_eq(step_calls(s), 2, "ProfilerStep calls in summary.json ops")
    check_eq(traced_steps(r), [["ProfilerStep#2", "ProfilerStep#3"]], "steps per trace file")


def schedule_repeat():
    r = tp.profile("nvtx_steps", [9, 4, 6, 1], options=["--schedule", "wait=1,warmup=1,active=2,repeat=2"])
    check_actions(r, ["none", "warmup", "record", "record_and_save"] * 2 + ["none"])
    check_recorded_op(r, "forward", 4)
    check_eq(traced_steps(r), [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]],
             "steps per trace file (one per cycle)")
    names = sorted(p.rsplit("/", 1)[1] for p, _ in r.traces)
    workers = {re.match(r"^(.*?)\.\d+\.pt\.trace\.json", n).group(1) for n in names}
    check_eq(len(workers), 1, f"both cycles come from one worker: {names}")


def skip_first():
    r = tp.profile("nvtx_steps", [5, 4, 6, 1], options=["--schedule", "skip_first=2,wait=0,warmup=1,active=1"])
    check_actions(r, ["none", "none", "warmup", "record_and_save", "warmup"])
    check_recorded_op(r, "forward", 1)


def check_cycle_traces(result, expected):
    """One trace per cycle holding exactly the expected steps, and nothing that lies
    outside them: each user_annotation event sits inside one of the trace's steps."""
    check_eq(traced_steps(result), [[f"ProfilerStep#{k}" for k in ks] for ks in expected], "steps per trace file")
    for path, trace in result.traces:
        rows = tp.trace_events(trace, ph="X", cat="user_annotation")
        spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in rows if e["name"].startswith("ProfilerStep#")]
        for e in rows:
            start, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            check(any(a - 0.002 <= start and end <= b + 0.002 for a, b in spans),
                  f"{path}: {e['name']!r} at {start} lies outside the trace's steps")
        check_eq(sum(1 for e in rows if e["name"] == "forward"), len(spans), f"{path}: forward ranges")


def schedule_acceptance():
    """20 steps, wait=1,warmup=1,active=3,repeat=2: two traces, steps {2,3,4} and
    {7,8,9}; `torchprof report` with another schedule selects other steps of the same capture."""
    r = tp.profile("nvtx_steps", [20, 1, 1, 1], options=["--schedule", "wait=1,warmup=1,active=3,repeat=2"])
    check_cycle_traces(r, [[2, 3, 4], [7, 8, 9]])
    check_eq(step_calls(r.summary), 6, "ProfilerStep calls in summary.json ops")
    check_eq(tp.op(r.summary, "forward")["calls"], 6, "forward calls in summary.json ops")
    check("between_steps" not in tp.ops_by_name(r.summary), "between_steps (outside every step) in ops")
    again = tp.fresh_dir("report_schedule")
    rep = tp.run_report([r.out_dir, "-o", again, "--schedule", "skip_first=10,wait=0,warmup=1,active=4,repeat=1", "-q"])
    check_eq(rep.rc, 0, "exit code of torchprof report --schedule")
    rep.out_dir = again
    check_cycle_traces(rep, [[11, 12, 13, 14]])
    actions = [s["action"] for s in sorted(rep.summary["steps"], key=lambda s: s["index"])]
    check_eq(actions, ["none"] * 10 + ["warmup", "record", "record", "record", "record_and_save"] + ["none"] * 5,
             "step actions of the report's schedule")
    check_eq(tp.op(rep.summary, "forward")["calls"], 4, "forward calls in the report's ops")


def table_only():
    """--table-only: the table alone, equal to the full report's, with a schedule, with
    start/end ranges (some ended on another thread), with a capture range."""
    sched = ["--schedule", "wait=1,warmup=1,active=2,repeat=2"]
    r = tp.profile("nvtx_steps", [9, 4, 6, 1], options=sched + ["--table-only"])
    check_eq(sorted(os.listdir(r.out_dir)), ["capture.tprof", "table.txt"], "files of run --table-only")
    table = tp.check_torch_table(r.table)
    check_eq(table.row("ProfilerStep*")["# of Calls"], "4", "ProfilerStep* calls (2 cycles of 2 recorded steps)")
    check_eq(table.row("forward")["# of Calls"], "4", "forward calls in the recorded steps")
    full_dir = tp.fresh_dir("table_full")
    full = tp.run_report([r.out_dir, "-o", full_dir] + sched)
    check_eq(full.rc, 0, "exit code of the full report")
    streamed_dir = tp.fresh_dir("table_streamed")
    streamed = tp.run_report([r.out_dir, "-o", streamed_dir, "--table-only"] + sched)
    check_eq(streamed.rc, 0, "exit code of report --table-only")
    check_eq(streamed.stdout, full.stdout, "stdout of report --table-only and of the full report")
    with open(os.path.join(full_dir, "table.txt"), "rb") as a, open(os.path.join(streamed_dir, "table.txt"), "rb") as b:
        check_eq(b.read(), a.read(), "table.txt of report --table-only and of the full report")
    check_eq(sorted(os.listdir(streamed_dir)), ["table.txt"], "files of report --table-only")
    quiet_dir = tp.fresh_dir("table_quiet")
    quiet = tp.run_report([r.out_dir, "-o", quiet_dir, "--table-only", "-q"] + sched)
    check_eq(quiet.stdout, b"", "stdout of report --table-only -q")
    with open(os.path.join(full_dir, "table.txt"), "rb") as a, open(os.path.join(quiet_dir, "table.txt"), "rb") as b:
        check_eq(b.read(), a.read(), "table.txt of report --table-only -q and of the full report")
    for fmt in ("csv", "json", "markdown"):
        a = tp.run_report([r.out_dir, "-o", tp.fresh_dir("f"), "--format", fmt] + sched)
        b = tp.run_report([r.out_dir, "-o", tp.fresh_dir("s"), "--format", fmt, "--table-only"] + sched)
        check_eq(b.stdout, a.stdout, f"--format {fmt} of report --table-only and of the full report")

    se = tp.profile("nvtx_startend")
    tp.check_streamed_table(se.out_dir)
    within = ["--capture-range", "nvtx:main_busy"]
    full = tp.run_report([se.out_dir, "-o", tp.fresh_dir("se_full")] + within)
    whole = tp.run_report([se.out_dir, "-o", tp.fresh_dir("se_table"), "--table-only"] + within)
    check_eq(whole.rc, 0, "exit code of report --table-only with a capture range")
    check_eq(whole.stdout, full.stdout, "stdout of report --table-only and of the full report, in a capture range")

    bad = tp.run_report([r.out_dir, "--table-only", "--format", "folded"])
    check_eq(bad.rc, 2, "exit code of --table-only --format folded")
    check("--format folded needs the whole report" in bad.stderr.decode(), f"its message: {bad.stderr!r}")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (steps, outside_steps, schedule, schedule_repeat, skip_first,
                                                       schedule_acceptance, table_only)}))
