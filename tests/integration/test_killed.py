"""A target killed by SIGKILL (no handler runs, no goodbye): it is listed in the report
with its signal, and what could not be read is said. The records written after its last
flush stay in its memory and are lost; their number is not known to the collector."""

import os

import tp
from tp import check, check_eq


def _killed(mode, ranges, warm_ms):
    out = os.path.join(tp.fresh_dir("killed_target"), "out")
    r = tp.run_tool(["-o", out, "--", tp.program("rel_killed"), mode, ranges, warm_ms])
    r.out_dir = out
    check_eq(r.rc, 137, "exit code of torchprof-run (128 + SIGKILL)")
    s = r.summary
    check_eq(s.get("exit_code"), 137, "exit_code in summary.json")
    procs = s.get("processes", [])
    check_eq(len(procs), 1, f"processes listed: {procs}")
    p = procs[0]
    check_eq(p.get("exit_signal"), 9, "exit_signal of the killed target")
    check_eq(p.get("exit_code"), 137, "exit_code of the killed target")
    warnings = " | ".join(p.get("warnings", []))
    check("signal 9" in warnings, f"no warning naming signal 9: {warnings}")
    check("none of its events could be read" in warnings or "are lost" in warnings, f"no word of what was lost: {warnings}")
    printed = r.stdout.decode("utf-8", "replace") + r.stderr_text
    check("signal 9" in printed, f"the killed target is not mentioned after the table: {printed[-800:]!r}")
    return s, p


def killed_before_first_flush():
    """1,000 ranges then SIGKILL at once: nothing reached the collector, yet the process
    is listed with its signal (before: `processes []`, no warning)."""
    _s, p = _killed("after", 1000, 0)
    check_eq(p.get("events", 0), 0, "events of a target killed before its first flush")
    check("before anything it recorded reached the collector" in " ".join(p["warnings"]),
          f"no warning that nothing was read: {p['warnings']}")


def killed_after_flush():
    """A flushed range, then 20,000 ranges and SIGKILL right after the last one ends: what
    was flushed is reported, the loss is said."""
    s, p = _killed("after", 20000, 300)
    ops = {o["name"]: o["calls"] for o in s.get("ops", [])}
    check_eq(ops.get("warm"), 1, f"the range flushed before the kill: {ops}")
    check(ops.get("killed_range", 0) <= 20000, f"more ranges than emitted: {ops}")


def killed_mid_burst():
    """SIGKILL with three ranges open in the middle of a burst."""
    s, p = _killed("burst", 5000, 300)
    ops = {o["name"]: o["calls"] for o in s.get("ops", [])}
    check_eq(ops.get("warm"), 1, f"the range flushed before the kill: {ops}")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (
        killed_before_first_flush, killed_after_flush, killed_mid_burst)}))
