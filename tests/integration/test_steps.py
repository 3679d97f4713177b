"""Steps from ProfilerStep# ranges and torch.profiler's schedule (wait, warmup, active,
repeat, skip_first): step actions, which steps reach ops, one trace per cycle."""

import re

import tp
from tp import check, check_eq, check_close, check_op, ms

STEP_MS = 4 + 6 + 3 * 1  # nvtx_steps with FWD_MS=4 BWD_MS=6 GAP_MS=1


def steps_of(summary):
    procs = tp.processes_with_events(summary)
    check_eq(len(procs), 1, "processes with events")
    pid = procs[0]["pid"]
    rows = [s for s in summary.get("steps", []) if s.get("pid") == pid]
    return sorted(rows, key=lambda s: s["index"])


def check_actions(summary, expected):
    rows = steps_of(summary)
    check_eq([s["name"] for s in rows], [f"ProfilerStep#{k}" for k in range(len(expected))], "step names")
    check_eq([s["index"] for s in rows], list(range(len(expected))), "step indices")
    check_eq([s["action"] for s in rows], expected, "step actions")
    for s in rows:
        check_close(s["dur_ns"], ms(STEP_MS), f"dur_ns of {s['name']}")


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
    s = r.summary
    rows = steps_of(s)
    check_eq(len(rows), 6, "steps in summary.json")
    check(all(x["action"] in ("record", "record_and_save") for x in rows),
          f"without --schedule every step is recorded: {[x['action'] for x in rows]}")
    check_close(sum(x["dur_ns"] for x in rows), ms(6 * STEP_MS), "sum of step durations")
    check_op(s, "forward", calls=6, self_ns=ms(6 * 4), total_ns=ms(6 * 4))
    check_op(s, "backward", calls=6, self_ns=ms(6 * 6), total_ns=ms(6 * 6))
    check_eq(step_calls(s), 6, "ProfilerStep calls in summary.json ops")
    table = tp.check_torch_table(r.table)
    check_eq(table.row("ProfilerStep*")["# of Calls"], "6", "ProfilerStep* calls in the table")
    check_close(tp.parse_time_ns(table.row("ProfilerStep*")["Self CPU"]), ms(6 * 3), "ProfilerStep* Self CPU")
    check_eq(traced_steps(r), [[f"ProfilerStep#{k}" for k in range(6)]], "steps per trace file")


def schedule():
    r = tp.profile("nvtx_steps", [6, 4, 6, 1], options=["--schedule", "wait=1,warmup=1,active=2,repeat=1"])
    s = r.summary
    check_actions(s, ["none", "warmup", "record", "record_and_save", "none", "none"])
    check_op(s, "forward", calls=2, total_ns=ms(2 * 4))
    check_op(s, "backward", calls=2, total_ns=ms(2 * 6))
    check_eq(step_calls(s), 2, "ProfilerStep calls in summary.json ops")
    check_eq(traced_steps(r), [["ProfilerStep#2", "ProfilerStep#3"]], "steps per trace file")


def schedule_repeat():
    r = tp.profile("nvtx_steps", [9, 4, 6, 1], options=["--schedule", "wait=1,warmup=1,active=2,repeat=2"])
    s = r.summary
    check_actions(s, ["none", "warmup", "record", "record_and_save"] * 2 + ["none"])
    check_op(s, "forward", calls=4, total_ns=ms(4 * 4))
    check_eq(traced_steps(r), [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]],
             "steps per trace file (one per cycle)")
    names = sorted(p.rsplit("/", 1)[1] for p, _ in r.traces)
    workers = {re.match(r"^(.*?)\.\d+\.pt\.trace\.json", n).group(1) for n in names}
    check_eq(len(workers), 1, f"both cycles come from one worker: {names}")


def skip_first():
    r = tp.profile("nvtx_steps", [5, 4, 6, 1], options=["--schedule", "skip_first=2,wait=0,warmup=1,active=1"])
    check_actions(r.summary, ["none", "none", "warmup", "record_and_save", "warmup"])
    check_op(r.summary, "forward", calls=1, total_ns=ms(4))


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (steps, schedule, schedule_repeat, skip_first)}))
