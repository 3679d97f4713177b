"""What a run leaves behind: torch's table layout (checked against a real torch table),
the table on stderr, `torchprof report` reproducing summary.json, valid Kineto traces,
--gzip, never overwriting a run, and the target's stdout left alone."""

import os

import tp
from tp import check, check_eq, check_close


def nested_run(options=()):
    return tp.profile("nvtx_nested", [2, 3, 6, 3, 2], options=options)


def table_format():
    # the checker itself must accept torch's own table, or it proves nothing
    with open(tp.fixture("torch_tables/cpu_key_averages_torch1.13.txt"), encoding="utf-8") as f:
        torch_table = tp.check_torch_table(f.read())
    check_eq(torch_table.widths[0], 55, "fixture's Name width")
    r = nested_run()
    table = tp.check_torch_table(r.table)
    ops = tp.ops_by_name(r.summary)
    for name in ("outer", "inner", "leaf"):
        row = table.row(name)
        check_eq(int(row["# of Calls"]), ops[name]["calls"], f"# of Calls of {name}")
        for col, key in (("CPU total", "cpu_total_ns"), ("Self CPU", "self_cpu_ns")):
            shown = tp.parse_time_ns(row[col])
            check(abs(shown - ops[name][key]) <= max(1000, ops[name][key] * 0.001),
                  f"{name} {col} {row[col]} disagrees with summary.json {key}={ops[name][key]}")
    totals = [tp.parse_time_ns(row["CPU total"]) for row in table.rows]
    check_eq(totals, sorted(totals, reverse=True), "rows sorted by CPU total (cpu_time_total) without GPU data")
    self_pct = sum(float(row["Self CPU %"].rstrip("%")) for row in table.rows)
    check(99.0 <= self_pct <= 101.0, f"Self CPU % adds up to {self_pct}, not 100")
    total_self = sum(op["self_cpu_ns"] for op in r.summary["ops"])
    check_close(tp.parse_time_ns(table.trailer[0].split(": ", 1)[1]), total_self, "Self CPU time total", rel=0.01)


def table_on_stderr():
    r = nested_run()
    table = r.table
    tp.check_torch_table(table).row("outer")
    check(table in r.stderr_text, "stderr does not hold table.txt verbatim")
    check(not r.stdout.replace(b"nvtx_nested: 2 outer, 6 inner, 6 leaf\n", b""),
          f"torchprof wrote to stdout: {r.stdout!r}")


def report_roundtrip():
    r = nested_run()
    other = os.path.join(tp.fresh_dir("report"), "again")
    rep = tp.run_report([r.out_dir, "-o", other])
    check_eq(rep.rc, 0, "exit code of torchprof report")
    rep.out_dir = other
    check("outer" in tp.ops_by_name(r.summary), "the run itself has no 'outer' op")
    check_eq(rep.summary["ops"], r.summary["ops"], "ops of the re-analysed capture")
    check_eq(rep.summary.get("steps"), r.summary.get("steps"), "steps of the re-analysed capture")
    check_eq(rep.table, r.table, "table.txt of the re-analysed capture")
    capture = os.path.join(r.out_dir, "capture.tprof")
    check(os.path.isfile(capture), "capture.tprof missing")
    bad = tp.run_report([os.path.join(r.out_dir, "no-such-file.tprof")])
    check_eq(bad.rc, 2, "exit code of torchprof report on a missing capture")


DEMO_RANGES = ["forward", "linear", "aten::mm", "relu", "loss", "backward", "linear_backward",
               "optimizer.step", "zero_grad", "DataLoader#next", "load_batch", "setup", "teardown"]


def traces_valid():
    r = tp.profile("demo_train", [5, 0.3])
    tp.validate_traces(r, DEMO_RANGES + [f"ProfilerStep#{k}" for k in range(5)])
    procs = tp.processes_with_events(r.summary)
    check_eq(len(procs), 1, "processes with events")
    check_eq(len(r.traces), 1, "trace files")
    path, trace = r.traces[0]
    # setup (before the first step) and teardown (after the last) are in the trace, at or
    # after its base time
    for name in ("setup", "teardown"):
        events = tp.trace_events(trace, ph="X", name=name)
        check_eq(len(events), 1, f"{name} ranges in the trace")
        check(float(events[0]["ts"]) >= 0, f"{name} lies before the trace's base time: {events[0]}")
    worker = procs[0].get("worker")
    check(os.path.basename(path).startswith(f"{worker}."), f"trace {path} is not named after worker {worker!r}")
    check("data_loader" in tp.thread_names(procs[0]), "thread data_loader missing from summary.json")
    pnames = tp.trace_events(trace, ph="M", name="process_name")
    check(any(ev.get("pid") == procs[0]["pid"] for ev in pnames), "no process_name metadata for the process")
    for ev in tp.trace_events(trace, ph="X", cat="user_annotation"):
        check_eq(ev["pid"], procs[0]["pid"], f"pid of {ev['name']!r}")


def gzip():
    r = nested_run(options=["--gzip"])
    check(r.traces, "no traces written with --gzip")
    for path, _ in r.traces:
        check(path.endswith(".pt.trace.json.gz"), f"{path} is not .pt.trace.json.gz")
    tp.validate_traces(r, ["outer", "inner", "leaf"])


def fresh_output_dir():
    first = nested_run()
    before = open(first.file("summary.json"), "rb").read()
    parent = os.path.dirname(first.out_dir)
    second = tp.run_tool(["-o", first.out_dir, "--", tp.program("nvtx_nested"), "1", "1", "1", "1", "1"])
    check_eq(second.rc, 0, "exit code of the second run")
    check_eq(open(first.file("summary.json"), "rb").read(), before, "the first run's summary.json was overwritten")
    others = [d for d in os.listdir(parent) if d != "out" and os.path.isfile(os.path.join(parent, d, "summary.json"))]
    check_eq(len(others), 1, f"a fresh output directory next to the first one: {os.listdir(parent)}")
    check(others[0] in second.stderr_text, f"stderr does not say where the output went ({others[0]})")


def stdout_identical():
    for prog, args in (("nvtx_unicode", [2]), ("demo_train", [3, 0.2]), ("nvtx_threads", [2, 50])):
        plain, _ = tp.run_plain(prog, args)
        r = tp.profile(prog, args)
        check_eq(r.stdout, plain.stdout, f"stdout of {prog} under torchprof-run")


def demo():
    r = tp.profile("demo_train")
    check(r.stdout.startswith(b"demo_train: 20 steps"), f"demo stdout {r.stdout!r}")
    s = r.summary
    for name, calls in (("forward", 20), ("linear", 60), ("aten::mm", 60), ("optimizer.step", 20)):
        tp.check_op(s, name, calls=calls)
    # Without --schedule ops hold the whole run, as torch.profiler's: every one of the 20
    # loads, though the loader finishes one to three batches before ProfilerStep#0 begins.
    tp.check_op(s, "load_batch", calls=20)
    tp.check_op(s, "setup", calls=1)      # before ProfilerStep#0
    tp.check_op(s, "teardown", calls=1)   # after the last step
    table = tp.check_torch_table(r.table)
    check_eq(table.row("ProfilerStep*")["# of Calls"], "20", "ProfilerStep* calls")
    check_eq(table.row("load_batch")["# of Calls"], "20", "load_batch calls in the table")
    check("Not in the table" not in r.table, "without --schedule nothing is left out")
    tp.check_steps_apart(r)
    # The wait for the next batch is the demo's DataLoader time (DataLoader#next).
    tp.check_op(s, "DataLoader#next", calls=20)
    dataloader = s["overview"]["breakdown"]["avg"]["dataloader_ns"]
    check(dataloader > 0, f"no DataLoader time in the overview's breakdown: {s['overview']['breakdown']['avg']}")


def _tree(d):
    """Every file under d with its bytes."""
    files = {}
    for dirpath, _dirs, names in os.walk(d):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, d)] = f.read()
    return files


def _stderr_lines(r):
    return [line for line in r.stderr_text.splitlines() if line.strip()]


def reanalysis_keeps_runs():
    """`torchprof report DIR` writes DIR/report (then DIR/report-1, …) and leaves the run's
    own files as they were; `report A -o B` with B another run writes B-1; the redirect is
    said even with -q."""
    a = nested_run()
    b = tp.profile("nvtx_nested", [1, 1, 1, 1, 1])
    a_before, b_before = _tree(a.out_dir), _tree(b.out_dir)
    first = tp.run_report([a.out_dir, "--stats", "--advice"])
    check_eq(first.rc, 0, "exit code of the first re-analysis")
    report = os.path.join(a.out_dir, "report")
    check(os.path.isfile(os.path.join(report, "summary.json")), f"no summary.json in {report}")
    check(report in first.stderr_text, f"stderr does not say where the results went: {first.stderr_text!r}")
    again = tp.run_report([a.out_dir, "-q"])
    check_eq(again.rc, 0, "exit code of the second re-analysis")
    check_eq(_stderr_lines(again), [f"torchprof: {report} holds an earlier run; writing to {report}-1"],
             "stderr of report -q into a taken directory")
    check(os.path.isfile(os.path.join(report + "-1", "table.txt")), "no table.txt in report-1")
    after = {k: v for k, v in _tree(a.out_dir).items() if k.split("/")[0] not in ("report", "report-1")}
    check_eq(sorted(after), sorted(a_before), "the run's own files after two re-analyses")
    for name, data in a_before.items():
        check(after[name] == data, f"{name} of the run was rewritten by torchprof report")
    other = tp.run_report([a.out_dir, "-q", "-o", b.out_dir])
    check_eq(other.rc, 0, "exit code of report A -o B")
    check_eq(_stderr_lines(other), [f"torchprof: {b.out_dir} holds an earlier run; writing to {b.out_dir}-1"],
             "stderr of report -q -o another run")
    check(_tree(b.out_dir) == b_before, "report A -o B rewrote the run in B")
    check(os.path.isfile(os.path.join(b.out_dir + "-1", "summary.json")), "no summary.json in B-1")
    # The launcher's redirect is never quiet either.
    again_run = tp.run_tool(["-q", "-o", a.out_dir, "--", tp.program("nvtx_nested"), "1", "1", "1", "1", "1"])
    check_eq(again_run.rc, 0, "exit code of torchprof-run -q into a taken directory")
    check_eq(_stderr_lines(again_run), [f"torchprof: {a.out_dir} holds an earlier run; writing to {a.out_dir}-1"],
             "stderr of torchprof-run -q into a taken directory")


def output_not_a_directory():
    """-o naming a file or a device is one line and exit 2, for the run and the report;
    nothing like FILE-1 is made and the program does not run."""
    r = nested_run()
    d = tp.fresh_dir("notadir")
    plain = os.path.join(d, "results.txt")
    with open(plain, "w") as f:
        f.write("mine\n")
    for target in ("/dev/null", plain):
        run = tp.run_tool(["-o", target, "--", tp.program("nvtx_nested"), "1", "1", "1", "1", "1"])
        check_eq(run.rc, 2, f"exit code of torchprof-run -o {target}")
        check_eq(run.stdout, b"", f"the program ran with -o {target}")
        check_eq(len(_stderr_lines(run)), 1, f"lines of stderr for -o {target}: {run.stderr_text!r}")
        check("not a directory" in run.stderr_text, f"the reason for -o {target}: {run.stderr_text!r}")
        rep = tp.run_report([r.out_dir, "-q", "-o", target])
        check_eq(rep.rc, 2, f"exit code of torchprof report -o {target}")
        check_eq(len(_stderr_lines(rep)), 1, f"lines of stderr of report -o {target}: {rep.stderr_text!r}")
        check("not a directory" in rep.stderr_text, f"the reason of report -o {target}: {rep.stderr_text!r}")
        check(not os.path.exists(target + "-1"), f"{target}-1 was made")
    with open(plain) as f:
        check_eq(f.read(), "mine\n", "the file named by -o")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (table_format, table_on_stderr, report_roundtrip,
                                                      traces_valid, gzip, fresh_output_dir,
                                                      stdout_identical, demo, reanalysis_keeps_runs,
                                                      output_not_a_directory)}))
