"""Distributed training as one run: four gloo DDP ranks started by a shell script under
one torchprof-run (torchrun's environment on loopback: Debian's torchrun fails on Python
3.11), or one torchprof-run per rank merged by torchprof report. Each rank's trace has
Kineto's distributedInfo, the backend's all_reduce records carry Kineto's collective args
with the gradient bucket's element count, and the rank made slow is named the straggler
by the others' waits in the collectives while every rank's step time is the same."""

import os
import socket
import subprocess
import stat
import sys

import tp
from tp import check, check_eq

PYTHON = sys.executable
PY_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs", "py"))
WORLD = 4
SLOW = 2
STEPS = 5


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_script(root, per_rank=None, shift_rank=None, shift_ns=0):
    """launch.sh: the four ranks in the background, then wait. `per_rank`: a command put
    before each rank's python (one torchprof-run per rank)."""
    lines = ["#!/bin/sh", f"cd '{root}'", "export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=%d" % (free_port(), WORLD),
             f"export SLOW_RANK={SLOW}"]
    for r in range(WORLD):
        env = f"RANK={r} LOCAL_RANK={r}"
        if r == shift_rank:
            env += f" TORCHPROF_TEST_CLOCK_SHIFT_NS={shift_ns}"
        prefix = per_rank(r) + " " if per_rank else ""
        lines.append(f"{env} {prefix}{PYTHON} {os.path.join(PY_DIR, 'ddp_train.py')} bucket &")
    lines.append("wait")
    path = os.path.join(root, "launch.sh")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def bucket_elems(root):
    with open(os.path.join(root, "bucket")) as f:
        return int(f.read())


def check_straggler(ranks, what):
    check_eq(ranks["straggler_by"], "collective waits", f"{what}: how the straggler is judged")
    check_eq(ranks["stragglers"], [str(SLOW)], f"{what}: stragglers ({ranks['rows']})")
    rows = {row["rank"]: row for row in ranks["rows"]}
    check_eq(sorted(rows), list(range(WORLD)), f"{what}: ranks")
    for rank, row in rows.items():
        check_eq(row["steps"], STEPS, f"{what}: steps of rank {rank}")
        c = row["collectives"]
        check(c is not None and c["source"] == "backend records", f"{what}: collectives of rank {rank}: {c}")
        if rank != SLOW:
            check(c["wait_ns"] > rows[SLOW]["collectives"]["wait_ns"],
                  f"{what}: rank {rank} waited {c['wait_ns']} ns, the slow rank {rows[SLOW]['collectives']['wait_ns']}")
    # The all-reduce lines the ranks up: the slow rank's steps take no longer than the others'.
    slow = rows[SLOW]
    check(slow["vs_median"] < 1.10, f"{what}: the slow rank's mean step is {slow['vs_median']}x the median")
    return rows


def one_run(shift_rank=None, shift_ns=0):
    root = tp.fresh_dir("ddp")
    launch = launch_script(root, shift_rank=shift_rank, shift_ns=shift_ns)
    out_dir = os.path.join(root, "out")
    result = tp.run_tool(["-o", out_dir, "--record-shapes", "--", launch], timeout=170)
    result.out_dir = out_dir
    check_eq(result.rc, 0, f"exit code: {result.describe()}")
    return root, result


def ddp_one_run():
    """One torchprof-run over the script: four traces, Kineto's args, the straggler."""
    root, result = one_run()
    elems = bucket_elems(root)
    s = result.summary
    rows = check_straggler(s["ranks"], "one run")
    check("Straggler: rank %d" % SLOW in result.stdout.decode() + result.stderr_text,
          "the straggler line is printed")
    infos = {}
    for path, trace in result.traces:
        info = trace.get("distributedInfo")
        check(info is not None, f"{path}: no distributedInfo")
        check_eq((info["backend"], info["world_size"]), ("gloo", WORLD), f"{path}: distributedInfo")
        check_eq(info["pg_config"][0]["ranks"], list(range(WORLD)), f"{path}: pg_config ranks")
        infos[info["rank"]] = path
        reduces = tp.trace_events(trace, ph="X", name="gloo:all_reduce")
        check_eq(len(reduces), STEPS, f"{path}: gloo:all_reduce events (one bucket per step)")
        for e in reduces:
            a = e["args"]
            check_eq((a["Collective name"], a["In msg nelems"], a["Out msg nelems"], a["Group size"]),
                     ("allreduce", elems, elems, WORLD), f"{path}: all_reduce args {a}")
            check_eq((a["In split size"], a["Out split size"], a["Process Group Ranks"], a.get("dtype")),
                     ("[]", "[]", "[0, 1, 2, 3]", "Float"), f"{path}: all_reduce args {a}")
        calls = tp.trace_events(trace, ph="X", name="c10d::allreduce_")
        check_eq(len(calls), STEPS, f"{path}: c10d::allreduce_ events")
        check_eq(calls[0]["args"]["Collective name"], "allreduce", f"{path}: c10d op args")
    check_eq(sorted(infos), list(range(WORLD)), "ranks of the traces")
    by_name = {c["name"]: c for c in rows[0]["collectives"]["by_name"]}
    check_eq(by_name["gloo:all_reduce"]["calls"], STEPS, "rank 0's all_reduce calls")
    check_eq(by_name["gloo:all_reduce"]["in_elems"], STEPS * elems, "rank 0's all_reduce elements")


def clock_offset():
    """Rank 3's host clock 2.5 s ahead: uncorrected it would arrive last every time."""
    _, result = one_run(shift_rank=3, shift_ns=2_500_000_000)
    rows = check_straggler(result.summary["ranks"], "rank 3 shifted")
    offset = rows[3]["collectives"]["clock_offset_ns"]
    check(abs(offset - 2_500_000_000) < 50_000_000, f"rank 3's estimated clock offset {offset} ns")
    check(abs(rows[1]["collectives"]["clock_offset_ns"]) < 50_000_000, "rank 1's clock offset")


def separate_runs():
    """One torchprof-run per rank, merged by torchprof report: the same straggler."""
    root = tp.fresh_dir("ddp_sep")
    run = tp.bin_path("torchprof-run")
    launch = launch_script(root, per_rank=lambda r: f"{run} -q --record-shapes -o {root}/r{r} --")
    proc = subprocess.run([launch], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=170)
    check_eq(proc.returncode, 0, f"exit code of the ranks: {proc.stderr.decode()[-2000:]}")
    merged = os.path.join(root, "merged")
    report = tp.run_report([f"{root}/r{r}" for r in range(WORLD)] + ["-o", merged], timeout=120)
    check_eq(report.rc, 0, f"exit code of torchprof report: {report.stderr_text}")
    report.out_dir = merged
    check_straggler(report.summary["ranks"], "merged runs")
    check("Straggler: rank %d" % SLOW in report.stdout.decode(), "the straggler line of the merged report")


SCENARIOS = {"ddp_one_run": ddp_one_run, "clock_offset": clock_offset, "separate_runs": separate_runs}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
