"""What torchprof says when there is nothing to show, and when an option's value is bad:
each message is checked word for word where it names facts of the run, and every usage
error is one line on stderr with exit code 2."""

import os
import re
import subprocess

import tp
from tp import check, check_eq


def notes(result):
    """The "torchprof: ..." lines after the table (on stderr from torchprof-run, where the
    table goes; on stdout from torchprof report)."""
    text = result.stderr_text + result.stdout.decode("utf-8", "replace")
    return [line for line in text.splitlines() if line.startswith("torchprof: ")]


def run_in_fresh_dir(command, options=()):
    out_dir = os.path.join(tp.fresh_dir("messages"), "out")
    result = tp.run_tool(["-o", out_dir] + list(options) + ["--"] + command)
    result.out_dir = out_dir
    check_eq(result.rc, 0, f"exit code of torchprof-run {' '.join(command)}")
    return result


def empty_program():
    """A program that records nothing: what ran, and what to do."""
    result = run_in_fresh_dir(["ls", "/"])
    lines = notes(result)
    seen = [line for line in lines if line.startswith("torchprof: nothing was recorded: ")]
    check(seen, f"no 'nothing was recorded' line: {lines}")
    check(re.fullmatch(r"torchprof: nothing was recorded: `ls` ran for \d+\.\d{3} s \(exit code 0\); its 1 "
                       r"process made no NVTX range, CUDA call or PyTorch op; torchprof records NVTX ranges, .*",
                       seen[0]), seen[0])
    check("nvtxRangePushA(\"name\")" in seen[0], f"no NVTX hint on the line: {seen[0]}")
    check(not any("torchprof.range" in line for line in lines), f"a Python hint for ls: {lines}")


def empty_python():
    """A plain Python script: the hint names torchprof.range and --pytorch-ops."""
    result = run_in_fresh_dir(["/usr/bin/python3", "-c", "print('hello')"])
    check_eq(result.stdout, b"hello\n", "the program's stdout")
    lines = notes(result)
    check(any(line.startswith("torchprof: nothing was recorded: `/usr/bin/python3` ran for ") for line in lines),
          f"no 'nothing was recorded' line: {lines}")
    hint = [line for line in lines if "torchprof.range" in line]
    check(hint and "--pytorch-ops" in hint[0], f"no torchprof.range / --pytorch-ops hint: {lines}")
    check(hint[0].startswith("torchprof: nothing was recorded: ") and "its 1 process (1 Python) made no" in hint[0],
          f"what ran and what to try are not one line: {lines}")


def schedule_after_run():
    """A schedule that starts after the last step: says so, and its warm-up warning once."""
    result = tp.profile("nvtx_steps", [3, 1], options=["--schedule", "wait=0,warmup=0,active=1,skip_first=100"])
    lines = notes(result)
    check("torchprof: no step was recorded: the run had 3 steps; the schedule starts recording at step 101"
          in lines, f"no 'no step was recorded' line: {lines}")
    warmup = [line for line in result.stderr_text.splitlines() if "warmup=0" in line]
    check_eq(len(warmup), 1, f"warm-up warnings ({warmup})")
    check(not any(line.startswith("torchprof: nothing was recorded") for line in lines), f"{lines}")
    # The same words in the report of the run.
    again = tp.run_report([result.out_dir, "-q", "--schedule", "wait=1,warmup=1,active=1,skip_first=5"])
    check_eq(again.rc, 0, "exit code of torchprof report")
    check_eq((again.stdout, again.stderr), (b"", b""), "report -q prints nothing")
    again = tp.run_report([result.out_dir, "-o", tp.fresh_dir("report"),
                           "--schedule", "wait=1,warmup=1,active=1,skip_first=5"])
    check("torchprof: no step was recorded: the run had 3 steps; the schedule starts recording at step 8"
          in notes(again), f"report: {notes(again)}")


def check_usage_error(argv, expected, tool="torchprof-run"):
    proc = subprocess.run([tp.bin_path(tool)] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=60)
    err = proc.stderr.decode()
    check_eq(proc.returncode, 2, f"exit code of {tool} {' '.join(argv)} (stderr {err!r})")
    check_eq(err.count("\n"), 1, f"lines on stderr of {tool} {' '.join(argv)}: {err!r}")
    check(expected in err, f"{tool} {' '.join(argv)}: {expected!r} not in {err!r}")
    check_eq(proc.stdout, b"", "stdout")


def empty_values():
    """--schedule '' and --trace '' are errors, not 'no schedule' and 'trace nothing'."""
    out = os.path.join(tp.fresh_dir("empty_values"), "out")
    check_usage_error(["-o", out, "--schedule", "", "--", "true"],
                      "--schedule: empty value: give wait=N,warmup=N,active=N")
    check_usage_error(["-o", out, "--trace", "", "--", "true"], "--trace: empty value: give a comma list of nvtx")
    check_usage_error(["report", out, "--schedule", ""], "--schedule: empty value", tool="torchprof")
    check(not os.path.exists(out), "an output directory was made for a usage error")


def trigger_wait():
    """trigger --wait takes seconds from 0: anything else is one line, not CLI11's range."""
    for value in ("-1", "abc", "1e400", ""):
        check_usage_error(["trigger", "--steps", "1", "--wait", value],
                          f"--wait: {value}: not a number of seconds from 0 to 31536000", tool="torchprof")
    check_usage_error(["trigger", "--steps", "0"], "--steps", tool="torchprof")


SCENARIOS = {"empty_program": empty_program, "empty_python": empty_python,
             "schedule_after_run": schedule_after_run, "empty_values": empty_values, "trigger_wait": trigger_wait}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
