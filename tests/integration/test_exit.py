"""Exit codes: the target's own, 128+N when it dies of signal N, 127 when the program
cannot be found, 2 for usage errors; records made right before the end still arrive."""

import os

import tp
from tp import check, check_eq


def ended(mode, value, expect_rc):
    r = tp.profile("exit_code", [mode, value, 3], expect_rc=expect_rc)
    check_eq(r.summary.get("exit_code"), expect_rc, "exit_code in summary.json")
    procs = tp.processes_with_events(r.summary)
    check_eq(len(procs), 1, "processes with events")
    check_eq(procs[0].get("exit_code"), expect_rc, "the process's exit_code in summary.json")
    tp.check_op(r.summary, "before_exit", calls=3)
    check_eq(r.stdout, f"exit_code: {mode} {value}\n".encode(), "target stdout")
    return r


def exit():  # noqa: A001 - scenario names mirror the program's modes
    ended("exit", 3, 3)


def return_():
    ended("return", 5, 5)


def underscore_exit():
    ended("_exit", 4, 4)


def signal_segv():
    ended("segv", 11, 128 + 11)


def signal_term():
    ended("signal", 15, 128 + 15)


def abort():
    ended("abort", 0, 128 + 6)


def one_line_reason(r):
    lines = [line for line in r.stderr_text.splitlines() if line.strip()]
    check(lines, "no reason printed on stderr")
    check(len(lines) <= 3, f"expected a short reason, got {len(lines)} lines: {r.stderr_text!r}")


def not_found():
    out = os.path.join(tp.fresh_dir("notfound"), "out")
    r = tp.run_tool(["-o", out, "--", "/nonexistent/torchprof-test-program", "x"])
    check_eq(r.rc, 127, "exit code for a missing program")
    one_line_reason(r)
    r = tp.run_tool(["-o", out + "2", "--", "torchprof-no-such-program-on-path"])
    check_eq(r.rc, 127, "exit code for a program not on PATH")


def bad_option():
    r = tp.run_tool(["--no-such-option", "--", tp.program("nvtx_nested"), "1"])
    check_eq(r.rc, 2, "exit code for an unknown option")
    one_line_reason(r)
    check_eq(r.stdout, b"", "stdout on a usage error")
    out = os.path.join(tp.fresh_dir("badsched"), "out")
    r = tp.run_tool(["-o", out, "--schedule", "wait=1,warmup=1,active=0", "--", tp.program("nvtx_nested"), "1"])
    check_eq(r.rc, 2, "exit code for --schedule with active=0")


if __name__ == "__main__":
    raise SystemExit(tp.main({"exit": exit, "return": return_, "underscore_exit": underscore_exit,
                              "signal_segv": signal_segv, "signal_term": signal_term, "abort": abort, "not_found": not_found,
                              "bad_option": bad_option}))
