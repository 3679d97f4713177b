"""`torchprof report DIR1 DIR2 …`: the runs of the ranks of one job, each written by
torchprof-run to out_%q{RANK}, merged into one report: op counts add up, one step-time
row per rank, the slow rank flagged, the per-step view, the other formats, and bad or
repeated inputs refused with one line and exit code 2."""

import json
import os
import re
import shutil

import tp
from tp import check, check_eq, check_close

# nvtx_steps S FWD_MS BWD_MS GAP_MS: a step lasts FWD+BWD+3*GAP ms.
FAST = (6, 4, 6, 1)    # 13 ms per step
SLOW = (6, 8, 12, 2)   # 26 ms per step: twice the fast ranks'
QUICK = (3, 1, 1, 1)   # for the scenarios that do not time anything
RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE")


def base_env():
    return {k: v for k, v in os.environ.items() if k not in RANK_VARS and not k.startswith("TORCHPROF_")}


def run_rank(base, name, args, rank=None, world=None):
    """One rank's run: torchprof-run -o base/out_%q{RANK} (or base/<name> without a rank)."""
    env = base_env()
    env["TP_TRUTH_FILE"] = os.path.join(base, "truth_" + name)
    if rank is not None:
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
        out = os.path.join(base, "out_%q{RANK}")
    else:
        out = os.path.join(base, name)
    r = tp.run_tool(["-o", out, "-q", "--", tp.program("nvtx_steps")] + [str(a) for a in args], env=env)
    check_eq(r.rc, 0, f"exit code of the run of {name}")
    r.out_dir = os.path.join(base, f"out_{rank}" if rank is not None else name)
    check(os.path.isfile(os.path.join(r.out_dir, "capture.tprof")), f"no capture in {r.out_dir}")
    r.truth_base = env["TP_TRUTH_FILE"]
    return r


def report(args, out_dir=None):
    r = tp.run_report([str(a) for a in args])
    r.out_dir = out_dir
    return r


def stdout_text(r):
    return r.stdout.decode("utf-8", "replace")


def rows_by_rank(summary):
    rows = summary.get("ranks", {}).get("rows", [])
    return {row["rank"]: row for row in rows}


def truth_steps(run):
    """The program's own step durations, in step order."""
    truth = tp.load_truth(run)
    steps = [r for rs in truth.values() for r in rs if r.name.startswith("ProfilerStep#")]
    steps.sort(key=lambda r: int(r.name.split("#")[1]))
    return [r.dur_ns for r in steps]


def rank_table_lines(text):
    """{first cell: whole line} of the rows of the printed per-rank table."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("Step time per rank")]
    check_eq(len(starts), 1, "'Step time per rank' titles in the output")
    i = starts[0] + 1
    rule = lines[i]
    check(re.fullmatch(r"(-+  )+", rule), f"no rule under the per-rank title: {rule!r}")
    check_eq(lines[i + 2], rule, "rule under the per-rank header")
    header = re.split(r"\s{2,}", lines[i + 1].strip())
    check_eq(header[:3], ["Rank", "Worker", "Steps"], "first columns of the per-rank table")
    rows, i = {}, i + 3
    while lines[i] != rule:
        rows[lines[i].split()[0]] = lines[i]
        i += 1
    return rows


def check_ops_add_up(merged, runs):
    """Every op of the merged summary: calls and CPU times are the sums of the runs'."""
    expected = {}
    for r in runs:
        for op in r.summary["ops"]:
            e = expected.setdefault((op["name"], op["kind"]), [0, 0, 0])
            e[0] += op["calls"]
            e[1] += op["self_cpu_ns"]
            e[2] += op["cpu_total_ns"]
    got = {(op["name"], op["kind"]): [op["calls"], op["self_cpu_ns"], op["cpu_total_ns"]] for op in merged["ops"]}
    check_eq(sorted(got), sorted(expected), "ops of the merged report")
    for key, value in expected.items():
        check_eq(got[key], value, f"calls, self and total CPU ns of {key} (sum over the runs)")


def straggler():
    """Three ranks of one step program, rank 1 twice as slow per step."""
    base = tp.fresh_dir("merge")
    runs = [run_rank(base, f"r{k}", args, rank=k, world=3) for k, args in enumerate([FAST, SLOW, FAST])]
    merged_dir = os.path.join(base, "merged")
    rep = report([r.out_dir for r in runs] + ["-o", merged_dir], merged_dir)
    check_eq(rep.rc, 0, "exit code of torchprof report out_0 out_1 out_2")
    s = rep.summary
    check_ops_add_up(s, runs)
    check_eq(tp.op(s, "forward")["calls"], 18, "forward calls over three ranks")

    check_eq([i["path"] for i in s["inputs"]], [r.out_dir for r in runs], "inputs of summary.json")
    procs = tp.processes_with_events(s)
    check_eq(sorted((p["input"], p["rank"], p["local_rank"], p["world_size"]) for p in procs),
             [(0, 0, 0, 3), (1, 1, 1, 3), (2, 2, 2, 3)], "input, rank, local rank and world size per process")
    check_eq(len({(p["host"], p["pid"]) for p in procs}), 3, "distinct (host, pid) of the processes")
    traces = rep.traces
    check_eq(len(traces), 3, "trace files of the merged report (one per worker)")
    workers = sorted(tp.TRACE_NAME_RE.match(os.path.basename(p)).group(1) for p, _ in traces)
    check_eq(workers, sorted(p["worker"] for p in procs), "trace file workers")

    ranks = s["ranks"]
    rows = rows_by_rank(s)
    check_eq(sorted(rows), [0, 1, 2], "ranks of the per-rank rows")
    check_eq(ranks["by"], "rank", "per-rank table is by rank")
    truth = {k: truth_steps(r) for k, r in enumerate(runs)}
    for k, row in rows.items():
        check_eq(row["steps"], 6, f"steps of rank {k}")
        check_eq(row["input"], k, f"input of rank {k}")
        mean = sum(truth[k]) / len(truth[k])
        check_close(row["mean_ns"], mean, f"mean step of rank {k} against the program's own",
                    slack_ns=tp.TRUTH_SLACK_PER_CALL_NS)
    check(rows[1]["slowest"] and rows[1]["straggler"], f"rank 1 is not flagged: {rows[1]}")
    check(not any(rows[k]["slowest"] or rows[k]["straggler"] for k in (0, 2)), f"a fast rank is flagged: {rows}")
    check_eq(ranks["slowest"], ["1"], "slowest ranks")
    check_eq(ranks["stragglers"], ["1"], "stragglers")
    fastest_truth = min(sum(truth[k]) / 6 for k in (0, 2))
    expected_ratio = (sum(truth[1]) / 6) / fastest_truth
    check(expected_ratio > 1.5, f"the slow rank did not run slower: {expected_ratio:.2f}x by its own clock")
    check_close(rows[1]["vs_fastest"] * 1000, expected_ratio * 1000, "rank 1's mean step / the fastest rank's (x1000)",
                rel=0.15)

    # Per step: the rank the programs' own clocks call slowest, where it is clear.
    check_eq([st["index"] for st in ranks["steps"]], list(range(6)), "steps of the per-step view")
    for st in ranks["steps"]:
        check_eq(st["rows"], 3, f"ranks with step {st['index']}")
        durs = sorted(((truth[k][st["index"]], k) for k in range(3)), reverse=True)
        if durs[0][0] > 1.1 * durs[1][0]:
            check_eq(st["slowest_rank"], durs[0][1], f"slowest rank of step {st['index']}")

    text = stdout_text(rep)
    table_rows = rank_table_lines(text)
    check_eq(sorted(table_rows), ["0", "1", "2"], "rows of the printed per-rank table")
    check("<< slowest" in table_rows["1"], f"rank 1's row has no slowest marker: {table_rows['1']!r}")
    check("straggler" in table_rows["1"], f"rank 1's row has no straggler marker: {table_rows['1']!r}")
    for k in ("0", "2"):
        check("<<" not in table_rows[k], f"rank {k}'s row is marked: {table_rows[k]!r}")
    check(re.search(r"^Slowest rank: 1 \(", text, re.M), "no 'Slowest rank: 1' line")
    check("Slowest rank per step" in text, "no per-step view in the output")
    op_table = tp.check_torch_table(text[:text.index("Step time per rank")])
    check_eq(op_table.row("forward")["# of Calls"], "18", "forward calls in the printed op table")
    check(text.startswith(rep.table), "table.txt is not what was printed")


def formats():
    """--format json/csv/markdown of a merged report; without -o nothing is written; a single
    run's report has no per-rank table; check reads the merged directory."""
    base = tp.fresh_dir("merge_formats")
    runs = [run_rank(base, f"r{k}", QUICK, rank=k, world=2) for k in range(2)]
    dirs = [r.out_dir for r in runs]
    before = {d: sorted(os.listdir(d)) for d in dirs}
    j = report(dirs + ["--format", "json"])
    check_eq(j.rc, 0, "exit code of --format json")
    data = json.loads(stdout_text(j))
    check({"rows", "ranks"} <= set(data), f"keys of the JSON output: {sorted(data)}")
    check_eq(sorted(r["rank"] for r in data["ranks"]["rows"]), [0, 1], "ranks in the JSON output")
    forward = [r for r in data["rows"] if r["name"] == "forward"]
    check_eq([r["calls"] for r in forward], [6], "forward calls in the JSON output")
    check("-o DIR" in j.stderr_text, f"no note that nothing was written: {j.stderr_text!r}")
    check_eq({d: sorted(os.listdir(d)) for d in dirs}, before, "files of the inputs after a report without -o")

    c = report(dirs + ["--format", "csv"])
    check_eq(c.rc, 0, "exit code of --format csv")
    ops_part, _, rank_part = stdout_text(c).partition("\n\n")
    check(ops_part.startswith("Name,"), f"CSV does not start with the op table: {ops_part[:40]!r}")
    lines = [line for line in rank_part.split("\n") if line]
    check(lines and lines[0].startswith("Rank,Worker,Host,Input,Steps,"), f"no per-rank CSV header: {lines[:1]}")
    check_eq(sorted(line.split(",")[0] for line in lines[1:]), ["0", "1"], "per-rank CSV rows")
    check(all(line.split(",")[4] == "3" for line in lines[1:]), f"steps in the per-rank CSV: {lines}")

    m = report(dirs + ["--format", "markdown"])
    check_eq(m.rc, 0, "exit code of --format markdown")
    check("**Step time per rank" in stdout_text(m) and "| Rank | Worker |" in stdout_text(m),
          "no per-rank table in the markdown output")

    single_dir = os.path.join(base, "single")
    one = report([dirs[0], "-o", single_dir], single_dir)
    check_eq(one.rc, 0, "exit code of a one-run report")
    check("Step time per rank" not in stdout_text(one), "a one-run report prints a per-rank table")
    check("ranks" not in one.summary and "inputs" not in one.summary, "merged keys in a one-run summary.json")
    check_eq(one.table, runs[0].table, "table.txt of a one-run report")

    merged_dir = os.path.join(base, "merged")
    rep = report(dirs + ["-o", merged_dir, "-q"], merged_dir)
    check_eq(rep.rc, 0, "exit code of a merged report with -o")
    for name in ("summary.json", "table.txt", "report.html"):
        check(os.path.isfile(os.path.join(merged_dir, name)), f"{name} missing from the merged directory")
    one_line_error(report([merged_dir]), "a merged directory given alone", "is a merged report")
    chk = tp._run([tp.bin_path("torchprof"), "check", merged_dir, "--max", "step_time_avg=60s"], 60, None, None)
    check_eq(chk.rc, 0, f"torchprof check on the merged directory: {chk.stderr_text}")
    one_line_error(report(dirs + ["--straggler-threshold", "-5"]), "--straggler-threshold -5", "-5: not a percentage")
    loose = report(dirs + ["--straggler-threshold", "250%", "--format", "json"])
    check_eq(loose.rc, 0, "exit code for --straggler-threshold 250%")
    ranks = json.loads(stdout_text(loose))["ranks"]
    check_eq(ranks["threshold_pct"], 250, "threshold_pct for --straggler-threshold 250%")
    check_eq(ranks["stragglers"], [], "stragglers 250% above the median")


def one_line_error(r, what, words):
    check_eq(r.rc, 2, f"exit code for {what}")
    lines = [line for line in r.stderr_text.split("\n") if line.strip()]
    check_eq(len(lines), 1, f"lines on stderr for {what}: {lines}")
    check(words in lines[0], f"the message for {what} does not say {words!r}: {lines[0]!r}")


def bad_inputs():
    base = tp.fresh_dir("merge_bad")
    r0 = run_rank(base, "r0", QUICK, rank=0, world=2)
    r1 = run_rank(base, "r1", QUICK, rank=1, world=2)
    out = os.path.join(base, "merged")
    missing = os.path.join(base, "no_such_run")
    one_line_error(report([r0.out_dir, missing, r1.out_dir, "-o", out]), "a missing input", missing)
    check(not os.path.exists(out), "the output directory was created despite a bad input")
    garbage = os.path.join(base, "garbage.tprof")
    with open(garbage, "wb") as f:
        f.write(b"not a capture at all" * 10)
    one_line_error(report([r0.out_dir, garbage, "-o", out]), "a foreign file", "not a torchprof capture")
    check(not os.path.exists(os.path.join(out, "summary.json")), "summary.json written despite a foreign input")
    one_line_error(report([r0.out_dir, os.path.join(r0.out_dir, "capture.tprof")]), "the same capture twice",
                   "same capture")
    copy = os.path.join(base, "copy_of_r0")
    shutil.copytree(r0.out_dir, copy)
    one_line_error(report([r0.out_dir, copy]), "a copy of a run", "hold the same run")
    one_line_error(report([r0.out_dir, r1.out_dir, "-o", r0.out_dir]), "-o into an input", "holds a run")
    check_eq(r0.summary.get("inputs"), None, "the input's summary.json was replaced")

    # Rank 0 twice (two jobs' runs): both kept, each its own row, and a warning.
    again = os.path.join(base, "again")
    os.makedirs(again)
    r0b = run_rank(again, "r0b", QUICK, rank=0, world=2)
    dup = report([r0.out_dir, r1.out_dir, r0b.out_dir, "--format", "json"])
    check_eq(dup.rc, 0, "exit code with rank 0 twice")
    data = json.loads(stdout_text(dup).split("\ntorchprof: ")[0])
    check_eq(sorted(r["rank"] for r in data["ranks"]["rows"]), [0, 0, 1], "rows with rank 0 twice")
    check(any("rank 0 is in 2 inputs" in w for w in data["ranks"]["warnings"]),
          f"no warning about rank 0: {data['ranks']['warnings']}")
    check("rank 0 is in 2 inputs" in stdout_text(dup), "the repeated rank is not reported in the output")

    # Runs without any rank: one row per worker.
    n0 = run_rank(base, "n0", QUICK)
    n1 = run_rank(base, "n1", QUICK)
    plain_dir = os.path.join(base, "plain")
    plain = report([n0.out_dir, n1.out_dir, "-o", plain_dir, "-q"], plain_dir)
    check_eq(plain.rc, 0, "exit code without ranks")
    ranks = plain.summary["ranks"]
    check_eq(ranks["by"], "worker", "rows of runs without ranks")
    workers = sorted(p["worker"] for p in tp.processes_with_events(plain.summary))
    check_eq(sorted(r["worker"] for r in ranks["rows"]), workers, "one row per worker")
    check(all(r["rank"] is None and r["steps"] == 3 for r in ranks["rows"]), f"rows: {ranks['rows']}")


def gpu_fake():
    """Two ranks of the fake-GPU workload (tests/fake_cupti): kernel rows, Self CUDA and
    CUDA totals and GPU busy time of the merged report are the sums of the runs'; each
    trace names its rank in distributedInfo."""
    base = tp.fresh_dir("merge_gpu")
    lib = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    runs = []
    for rank in range(2):
        env = dict(base_env(), RANK=str(rank), WORLD_SIZE="2", TORCHPROF_CUPTI_LIB=lib)
        r = tp.run_tool(["-o", os.path.join(base, "out_%q{RANK}"), "-q", "--", tp.bin_path("gpu_workload"), "steps"],
                        timeout=120, env=env)
        check_eq(r.rc, 0, f"exit code of the fake-GPU run of rank {rank}")
        r.out_dir = os.path.join(base, f"out_{rank}")
        runs.append(r)
    merged_dir = os.path.join(base, "merged")
    rep = report([r.out_dir for r in runs] + ["-o", merged_dir, "-q"], merged_dir)
    check_eq(rep.rc, 0, "exit code of the merged fake-GPU report")
    s = rep.summary
    kinds = {op["kind"] for op in s["ops"]}
    check("kernel" in kinds, f"no kernel rows in the merged ops: {sorted(kinds)}")
    expected = {}
    for r in runs:
        for op in r.summary["ops"]:
            e = expected.setdefault((op["name"], op["kind"]), [0, 0, 0])
            e[0] += op["calls"]
            e[1] += op["self_cuda_ns"]
            e[2] += op["cuda_total_ns"]
    got = {(op["name"], op["kind"]): [op["calls"], op["self_cuda_ns"], op["cuda_total_ns"]] for op in s["ops"]}
    check_eq(got, expected, "calls, Self CUDA and CUDA total per op (sum over the runs)")
    check_eq(s["gpu"]["busy_ns"], sum(r.summary["gpu"]["busy_ns"] for r in runs), "GPU busy time")
    check_eq(len(s["gpu"]["devices"]), 2, "devices (one per rank's process)")
    check_eq(sorted(row["rank"] for row in s["ranks"]["rows"]), [0, 1], "ranks of the per-rank rows")
    ranks_in_traces = sorted(t.get("distributedInfo", {}).get("rank") for _, t in rep.traces)
    check_eq(ranks_in_traces, [0, 1], "distributedInfo ranks of the merged traces")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (straggler, formats, bad_inputs, gpu_fake)}))
