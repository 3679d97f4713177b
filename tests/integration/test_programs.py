"""The test programs alone, without the tool: they run, print what they promise and
take at least the time their busy waits add up to (so the durations the other tests
expect are real)."""

import re

import tp


def expect(prog, args, stdout_re, min_s, rc=0):
    proc, elapsed = tp.run_plain(prog, args)
    tp.check_eq(proc.returncode, rc, f"exit code of {prog} {args}")
    out = proc.stdout.decode("utf-8")
    tp.check(re.search(stdout_re, out), f"{prog} stdout {out!r} does not match {stdout_re!r}")
    tp.check(elapsed >= min_s, f"{prog} {args} took {elapsed:.3f}s, less than its busy waits ({min_s}s)")
    return out


def nested():
    # 2 repeats x (3 gaps of 5 ms + 2 x (10 + 4) ms) = 2 x 43 ms
    expect("nvtx_nested", [2, 2, 10, 5, 4], r"^nvtx_nested: 2 outer, 4 inner, 4 leaf\n$", 0.086)


def threads():
    expect("nvtx_threads", [3, 100, 100], r"^nvtx_threads: 3 threads x 100 ranges\n$", 0.010)


def cpp():
    # 6 ranges of 5 ms own time per iteration
    expect("nvtx_cpp", [2, 5], r"^nvtx_cpp: 2 iterations\n$", 0.060)


def unicode():
    out = expect("nvtx_unicode", [1], r"矩阵乘法\ndonnées\n", 0.007)
    tp.check("🚀 launch" in out, "emoji name missing from stdout")


def startend():
    # per round: 20 ms cross-thread range, then 10 ms same-thread range
    expect("nvtx_startend", [3, 20], r"^nvtx_startend: 3\n$", 0.090)


def fork_exec():
    out = expect("nvtx_fork_exec", [2, 1, 2, 3], r"^parent=\d+ exec_child=\d+ fork_child=\d+\n$", 0.003)
    pids = [int(x) for x in re.findall(r"=(\d+)", out)]
    tp.check(len(set(pids)) == 3, f"three distinct pids expected: {pids}")


def steps():
    # 4 steps x (3 + 2 + 3 + 1) ms
    expect("nvtx_steps", [4, 2, 3, 1], r"^nvtx_steps: 4 steps\n$", 0.036)


def exit_code():
    expect("exit_code", ["exit", 3], r"^exit_code: exit 3\n$", 0.003, rc=3)
    expect("exit_code", ["return", 5, 0], r"return 5", 0, rc=5)
    expect("exit_code", ["_exit", 4, 0], r"_exit 4", 0, rc=4)
    expect("exit_code", ["signal", 11, 0], r"signal 11", 0, rc=-11)


def demo():
    expect("demo_train", [5, 0.5], r"^demo_train: 5 steps, final loss 0\.2000\n$", 0.1)


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (nested, threads, cpp, unicode, startend,
                                                      fork_exec, steps, exit_code, demo)}))
