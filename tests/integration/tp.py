"""Shared helpers for the integration tests: run a program under torchprof-run in a
fresh output directory, load what it wrote, and check it against known values.

Stdlib only (run with /usr/bin/python3). Paths come from the environment that
tests/CMakeLists.txt sets: TP_BIN_DIR, TP_LIB_DIR, TP_PROGRAMS_DIR, TP_FIXTURES_DIR,
TP_TMP_DIR.

A test script is a set of scenario functions; `main(SCENARIOS)` runs the one named on
the command line. A failed check raises CheckFailed; the scenario then exits 1 and
prints what was run, the tool's stderr and where the output was left.
"""

import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

REL_TOL = 0.10  # self and total times must be within 10% of the known durations


class CheckFailed(AssertionError):
    pass


class TimingCheckFailed(CheckFailed):
    """A duration outside its tolerance: on a shared machine a preempted busy wait does
    that, so main() runs the scenario again (at most TIMING_ATTEMPTS times in all)."""


TIMING_ATTEMPTS = 3


def check(cond, message):
    if not cond:
        raise CheckFailed(message)


def check_timing(cond, message):
    """A check on figures that follow from busy waits (shares of a step, utilisation): a
    failure is retried as a timing check is."""
    if not cond:
        raise TimingCheckFailed(message)


def check_eq(actual, expected, what):
    check(actual == expected, f"{what}: expected {expected!r}, got {actual!r}")


def check_close(actual_ns, expected_ns, what, rel=REL_TOL, slack_ns=0):
    """Within `rel` of expected, or within `slack_ns` when that is wider."""
    check(actual_ns is not None, f"{what}: missing (expected ~{expected_ns} ns)")
    margin = max(expected_ns * rel, slack_ns)
    low, high = expected_ns - margin, expected_ns + margin
    if not low <= actual_ns <= high:
        raise TimingCheckFailed(f"{what}: {actual_ns} ns is not within {rel:.0%} of {expected_ns} ns "
                                f"({actual_ns / expected_ns:.3f}x)" if expected_ns
                                else f"{what}: {actual_ns} ns, expected 0")


def ms(value):
    return int(round(value * 1e6))


# ---------------------------------------------------------------------------
# Paths


def _env_dir(name):
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set: run the integration tests through ctest")
    return value


def bin_path(name):
    return os.path.join(_env_dir("TP_BIN_DIR"), name)


def lib_path(name):
    return os.path.join(_env_dir("TP_LIB_DIR"), name)


def program(name):
    """A test program; the bundled example (demo_train) sits in bin/ next to the tool."""
    path = os.path.join(_env_dir("TP_PROGRAMS_DIR"), name)
    return path if os.path.exists(path) else bin_path(name)


def fixture(relpath):
    return os.path.join(_env_dir("TP_FIXTURES_DIR"), relpath)


_created_dirs = []


def fresh_dir(prefix):
    """A new directory under TP_TMP_DIR; removed when the scenario passes, kept otherwise."""
    root = os.environ.get("TP_TMP_DIR") or tempfile.gettempdir()
    os.makedirs(root, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix + ".", dir=root)
    _created_dirs.append(path)
    return path


def require_tool():
    for name in ("torchprof-run", "torchprof"):
        path = bin_path(name)
        check(os.access(path, os.X_OK), f"{path} is not built yet (the tool is required here)")


# ---------------------------------------------------------------------------
# Running


class Result:
    """One torchprof-run invocation and what it left behind."""

    def __init__(self, argv, proc, out_dir, elapsed_s):
        self.argv = argv
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.out_dir = out_dir
        self.elapsed_s = elapsed_s
        self._summary = None
        self._traces = None

    @property
    def stderr_text(self):
        return self.stderr.decode("utf-8", "replace")

    def file(self, name):
        return os.path.join(self.out_dir, name)

    @property
    def summary(self):
        if self._summary is None:
            path = self.file("summary.json")
            check(os.path.isfile(path), f"no summary.json in {self.out_dir}")
            with open(path, "rb") as f:
                self._summary = json.loads(f.read().decode("utf-8"))
        return self._summary

    @property
    def table(self):
        path = self.file("table.txt")
        check(os.path.isfile(path), f"no table.txt in {self.out_dir}")
        with open(path, "rb") as f:
            return f.read().decode("utf-8")

    @property
    def traces(self):
        """[(path, parsed json)] of every trace file under traces/."""
        if self._traces is None:
            paths = sorted(glob.glob(os.path.join(self.out_dir, "traces", "*.pt.trace.json*")))
            self._traces = [(p, load_trace(p)) for p in paths]
        return self._traces

    def describe(self):
        return (f"command: {' '.join(self.argv)}\nexit code: {self.rc}\noutput dir: {self.out_dir}\n"
                f"--- stderr (last 4000 bytes) ---\n{self.stderr_text[-4000:]}")


_last_result = None


def run_tool(tool_args, timeout=90, env=None):
    """Runs bin/torchprof-run with these arguments."""
    require_tool()
    argv = [bin_path("torchprof-run")] + [str(a) for a in tool_args]
    return _run(argv, timeout, None, env)


def start_tool(tool_args, env=None):
    """bin/torchprof-run with these arguments, started and left running (stdout piped,
    for wait_line)."""
    require_tool()
    argv = [bin_path("torchprof-run")] + [str(a) for a in tool_args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)


def wait_line(proc, prefix, timeout=30):
    """The first line of `proc`'s stdout that starts with `prefix` (fails when the program
    ends first or none comes within `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if line.startswith(prefix):
            return line
        check(line != "", f"the program ended before printing {prefix!r}")
    raise CheckFailed(f"no {prefix!r} line within {timeout}s")


def run_report(args, timeout=90):
    require_tool()
    return _run([bin_path("torchprof"), "report"] + list(args), timeout, None, None)


def check_streamed_table(out_dir, options=()):
    """report --table-only (the engine asked for the table alone) gives the same stdout and
    table.txt as the full report, with the same options."""
    full_dir = fresh_dir("full")
    full = run_report([out_dir, "-o", full_dir] + list(options))
    check_eq(full.rc, 0, "exit code of the full report")
    streamed_dir = fresh_dir("streamed")
    streamed = run_report([out_dir, "-o", streamed_dir, "--table-only"] + list(options))
    check_eq(streamed.rc, 0, "exit code of report --table-only")
    check_eq(streamed.stdout, full.stdout, "stdout of report --table-only and of the full report")
    with open(os.path.join(full_dir, "table.txt"), "rb") as a, open(os.path.join(streamed_dir, "table.txt"), "rb") as b:
        check_eq(b.read(), a.read(), "table.txt of report --table-only and of the full report")


def _run(argv, timeout, out_dir, env):
    global _last_result
    start = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=timeout, env=env)
    result = Result(argv, proc, out_dir, time.monotonic() - start)
    _last_result = result
    return result


def profile(prog, args=(), options=(), expect_rc=0, timeout=90, env=None):
    """torchprof-run -o <fresh dir> [options] -- <program> args; checks the exit code.
    The programs that keep ground truth (tests/programs/truth.h) write it beside.
    `env`: variables added to the environment."""
    parent = fresh_dir(prog)
    out_dir = os.path.join(parent, "out")
    argv = ["-o", out_dir] + list(options) + ["--", program(prog)] + [str(a) for a in args]
    env = dict(os.environ, **(env or {}), TP_TRUTH_FILE=os.path.join(parent, "truth"))
    result = run_tool(argv, timeout=timeout, env=env)
    result.out_dir = out_dir
    result.truth_base = env["TP_TRUTH_FILE"]
    if expect_rc is not None:
        check_eq(result.rc, expect_rc, f"exit code of torchprof-run {' '.join(argv)}")
    return result


def run_plain(prog, args=(), timeout=60):
    """The program alone, without the tool."""
    argv = [program(prog)] + [str(a) for a in args]
    start = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    return proc, time.monotonic() - start


# ---------------------------------------------------------------------------
# summary.json


def ops_by_name(summary):
    rows = {}
    for op in summary.get("ops", []):
        check(op["name"] not in rows, f"op {op['name']!r} appears twice in summary.json ops")
        rows[op["name"]] = op
    return rows


def op(summary, name):
    rows = ops_by_name(summary)
    check(name in rows, f"op {name!r} missing from summary.json; ops are {sorted(rows)}")
    return rows[name]


def check_op(summary, name, calls=None, self_ns=None, total_ns=None, kind="nvtx", slack_ns=0):
    """Exact call count; self/total CPU time per whole row within REL_TOL (or slack_ns)."""
    row = op(summary, name)
    if kind is not None:
        check_eq(row.get("kind"), kind, f"kind of op {name!r}")
    if calls is not None:
        check_eq(row.get("calls"), calls, f"calls of op {name!r}")
    if self_ns is not None:
        check_close(row.get("self_cpu_ns"), self_ns, f"self_cpu_ns of op {name!r}", slack_ns=slack_ns)
    if total_ns is not None:
        check_close(row.get("cpu_total_ns"), total_ns, f"cpu_total_ns of op {name!r}", slack_ns=slack_ns)
    return row


# ---------------------------------------------------------------------------
# Ground truth written by the programs (tests/programs/truth.h)


class TruthRange:
    def __init__(self, line):
        kind, tid, start, end, name = line.rstrip("\n").split("\t", 4)
        self.kind, self.tid, self.name = kind, int(tid), name
        self.start_ns, self.end_ns = int(start), int(end)
        self.pid = 0
        self.self_ns = self.end_ns - self.start_ns

    @property
    def dur_ns(self):
        return self.end_ns - self.start_ns


def load_truth(result):
    """{pid: [TruthRange]} with self_ns computed: push/pop ranges nest per thread by
    their intervals; start/end ranges are nobody's parent or child."""
    out = {}
    for path in glob.glob(result.truth_base + ".*"):
        pid = int(path.rsplit(".", 1)[1])
        with open(path, encoding="utf-8") as f:
            ranges = [TruthRange(line) for line in f if line.strip()]
        for r in ranges:
            r.pid = pid
        _nest([r for r in ranges if r.kind == "p"])
        out[pid] = ranges
    check(out, f"the program wrote no ground truth ({result.truth_base}.*)")
    return out


def _nest(ranges):
    by_tid = {}
    for r in ranges:
        by_tid.setdefault(r.tid, []).append(r)
    for rs in by_tid.values():
        rs.sort(key=lambda r: (r.start_ns, -r.end_ns))
        stack = []
        for r in rs:
            while stack and stack[-1].end_ns <= r.start_ns:
                stack.pop()
            if stack:
                stack[-1].self_ns -= r.dur_ns
            stack.append(r)


def truth_by_name(truth, pids=None):
    """{name: (calls, total_ns, self_ns)} over the given pids (default all)."""
    rows = {}
    for pid, ranges in truth.items():
        if pids is not None and pid not in pids:
            continue
        for r in ranges:
            calls, total, self_ns = rows.get(r.name, (0, 0, 0))
            rows[r.name] = (calls + 1, total + r.dur_ns, self_ns + r.self_ns)
    return rows


# The program's brackets hold the NVTX calls too (a wide-string conversion, a child's
# push and pop): this much per call is not an error even for ranges of a few µs.
TRUTH_SLACK_PER_CALL_NS = 20_000


def check_op_truth(summary, truth, name, calls):
    """Exact calls; total and self CPU time within REL_TOL of what the program measured."""
    rows = truth_by_name(truth)
    check(name in rows, f"no ground truth for {name!r}")
    t_calls, t_total, t_self = rows[name]
    check_eq(t_calls, calls, f"calls of {name!r} in the program's own record")
    return check_op(summary, name, calls=calls, self_ns=t_self, total_ns=t_total,
                    slack_ns=calls * TRUTH_SLACK_PER_CALL_NS)


def capture_chunks(data):
    """The chunks of a capture file's bytes (common/wire/capture_format.h), in order, as
    (offset of the chunk, type, conn, offset of the body, body size); stops at the first
    chunk that does not fit. Version 3 on, each chunk opens with an 8-byte ChunkMark."""
    import struct
    version = struct.unpack_from("<I", data, 8)[0]
    mark = 8 if version >= 3 else 0
    pos = 24
    while pos + mark + 16 <= len(data):
        ctype, conn, size, _check = struct.unpack_from("<IIII", data, pos + mark)
        body = pos + mark + 16
        if body + size > len(data):
            return
        yield pos, ctype, conn, body, size
        pos = body + size


def processes_with_events(summary):
    return [p for p in summary.get("processes", []) if p.get("events", 0) > 0]


def thread_names(process):
    return {t.get("name") for t in process.get("threads", [])}


# ---------------------------------------------------------------------------
# Traces


def load_trace(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        check(data[:2] == b"\x1f\x8b", f"{path} ends in .gz but is not gzip")
        data = gzip.decompress(data)
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise CheckFailed(f"{path} is not valid JSON: {e}")


TRACE_NAME_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$")  # the TensorBoard plugin's


def trace_events(trace, ph=None, name=None, cat=None):
    out = []
    for ev in trace.get("traceEvents", []):
        if ph is not None and ev.get("ph") != ph:
            continue
        if name is not None and ev.get("name") != name:
            continue
        if cat is not None and ev.get("cat") != cat:
            continue
        out.append(ev)
    return out


def all_trace_events(result, **kw):
    return [ev for _, t in result.traces for ev in trace_events(t, **kw)]


def dur_ns(event):
    """Kineto `dur` is microseconds with three decimals."""
    return int(round(float(event["dur"]) * 1000))


def check_steps_apart(result):
    """Step ranges of one thread never intersect, in summary.json's steps and in every
    trace (TensorBoard drops a step whose range intersects another on its thread)."""
    by_thread = {}
    for s in result.summary.get("steps", []):
        by_thread.setdefault(("summary", s.get("pid")), []).append((s["start_ns"], s["start_ns"] + s["dur_ns"], s["name"]))
    for path, trace in result.traces:
        for ev in trace_events(trace, ph="X"):
            if not ev.get("name", "").startswith("ProfilerStep#"):
                continue
            start = int(round(float(ev["ts"]) * 1000))
            by_thread.setdefault((path, ev.get("pid"), ev.get("tid")), []).append((start, start + dur_ns(ev), ev["name"]))
    checked = 0
    for where, spans in by_thread.items():
        spans.sort()
        for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
            checked += 1
            nested = b1 <= a1
            check(a1 <= b0 or nested, f"{where}: {an} [{a0}, {a1}] intersects {bn} [{b0}, {b1}] by {a1 - b0} ns")
    check(checked > 0, "no two steps on a thread to compare")


def validate_traces(result, nvtx_names=()):
    """Every trace: JSON object with traceEvents; X events have ts and dur >= 0; NVTX
    ranges are user_annotation; pid/tid of CPU events name a process/thread of
    summary.json; every (pid, tid) with X events has thread_name metadata."""
    summary = result.summary
    check(result.traces, f"no trace files under {result.out_dir}/traces")
    threads = {}
    for p in summary.get("processes", []):
        threads[p["pid"]] = {t["tid"] for t in p.get("threads", [])}
    nvtx_names = set(nvtx_names)
    for path, trace in result.traces:
        base = os.path.basename(path)
        check(TRACE_NAME_RE.match(base), f"trace file name {base!r} is not <worker>.<ns>.pt.trace.json[.gz]")
        check(isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list),
              f"{base}: top level must be an object with a traceEvents list")
        named = {(ev.get("pid"), ev.get("tid")) for ev in trace_events(trace, ph="M", name="thread_name")}
        seen = set()
        for ev in trace_events(trace, ph="X"):
            check("ts" in ev and "dur" in ev, f"{base}: X event without ts/dur: {ev}")
            check(float(ev["dur"]) >= 0, f"{base}: negative dur: {ev}")
            if ev.get("name") in nvtx_names:
                check_eq(ev.get("cat"), "user_annotation", f"{base}: cat of NVTX range {ev.get('name')!r}")
                pid, tid = ev.get("pid"), ev.get("tid")
                check(pid in threads, f"{base}: pid {pid} of {ev.get('name')!r} is no process of summary.json")
                check(tid in threads[pid], f"{base}: tid {tid} is no thread of pid {pid} in summary.json")
                seen.add((pid, tid))
        for key in seen:
            check(key in named, f"{base}: no thread_name metadata for pid/tid {key}")


# ---------------------------------------------------------------------------
# torch's key_averages().table() layout

TIME_RE = re.compile(r"^-?\d+\.\d{3}(us|ms|s)$")
PCT_RE = re.compile(r"^-?\d+\.\d{2}%$")


def parse_time_ns(text):
    m = re.match(r"^(-?\d+\.\d{3})(us|ms|s)$", text)
    check(m, f"{text!r} is not a torch time (%.3f + us|ms|s)")
    scale = {"us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]
    return float(m.group(1)) * scale


class Table:
    def __init__(self, columns, widths, rows, trailer):
        self.columns = columns    # header names, in order
        self.widths = widths      # each column's width (without the two-space separator)
        self.rows = rows          # [{column: cell text}]
        self.trailer = trailer    # lines after the closing rule

    def row(self, name):
        for r in self.rows:
            if r["Name"] == name:
                return r
        raise CheckFailed(f"no row {name!r} in the table; rows are {[r['Name'] for r in self.rows]}")


def parse_torch_table(text):
    """Parses and checks the layout: rule, header, rule, rows, rule, trailer. Column
    widths come from the rule; every cell and header is right-aligned in its width and
    followed by two spaces, as torch builds it."""
    lines = text.split("\n")
    check(len(lines) >= 4, "table has fewer than four lines")
    rule = lines[0]
    check(re.fullmatch(r"(-+  )+", rule), f"first line is not a torch rule (dashes + two spaces): {rule!r}")
    widths = [len(g) for g in rule.split("  ")[:-1]]
    check_eq(lines[2], rule, "rule under the header")
    columns = _split_fixed(lines[1], widths, "header")
    rows, i = [], 3
    while i < len(lines) and lines[i] != rule:
        rows.append(dict(zip(columns, _split_fixed(lines[i], widths, f"row {i}"))))
        i += 1
    check(i < len(lines), "no closing rule after the rows")
    trailer = [line for line in lines[i + 1:] if line.strip()]
    return Table(columns, widths, rows, trailer)


def _split_fixed(line, widths, what):
    expected_len = sum(widths) + 2 * len(widths)
    check_eq(len(line), expected_len, f"length of the table's {what} line {line!r}")
    cells, pos = [], 0
    for w in widths:
        cell = line[pos:pos + w]
        check(line[pos + w:pos + w + 2] == "  ", f"{what}: column not followed by two spaces: {line!r}")
        check(cell == cell.strip().rjust(w), f"{what}: cell {cell!r} is not right-aligned")
        cells.append(cell.strip())
        pos += w + 2
    return cells


CPU_COLUMNS = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]


def check_torch_table(text, cuda=False):
    """Layout and formats of a key_averages()-style table (CPU-only or with CUDA columns)."""
    table = parse_torch_table(text)
    expected = list(CPU_COLUMNS)
    if cuda:
        expected += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
    expected.append("# of Calls")
    check_eq(table.columns[:len(expected) - 1], expected[:-1], "table columns")
    check("# of Calls" in table.columns, "table has no '# of Calls' column")
    longest = max([len(r["Name"]) for r in table.rows] + [0])
    check_eq(table.widths[0], min(longest + 4, 55), "Name column width (min(longest+4, 55))")
    check(all(w == 12 for w in table.widths[1:]), f"non-Name columns must be 12 wide: {table.widths}")
    for r in table.rows:
        for col in ("Self CPU", "CPU total", "CPU time avg"):
            check(TIME_RE.match(r[col]), f"row {r['Name']!r}: {col} {r[col]!r} is not a torch time")
        for col in ("Self CPU %", "CPU total %"):
            check(PCT_RE.match(r[col]), f"row {r['Name']!r}: {col} {r[col]!r} is not %.2f%%")
        check(r["# of Calls"].isdigit(), f"row {r['Name']!r}: # of Calls {r['# of Calls']!r}")
    check(table.trailer and table.trailer[0].startswith("Self CPU time total: "),
          f"trailer must start with 'Self CPU time total: ': {table.trailer}")
    parse_time_ns(table.trailer[0][len("Self CPU time total: "):])
    return table


# ---------------------------------------------------------------------------
# Scenario runner


def _report_failure(name, error, failed):
    failed.append(name)
    print(f"FAIL {name}: {error}")
    if not isinstance(error, CheckFailed):
        traceback.print_exc()
    if _last_result is not None:
        print(_last_result.describe())


def main(scenarios):
    names = sys.argv[1:] or list(scenarios)
    failed = []
    for name in names:
        if name not in scenarios:
            print(f"unknown scenario {name!r}; known: {', '.join(scenarios)}")
            return 2
        for attempt in range(1, TIMING_ATTEMPTS + 1):
            try:
                scenarios[name]()
                print(f"PASS {name}" + (f" (attempt {attempt})" if attempt > 1 else ""))
                break
            except TimingCheckFailed as e:
                if attempt < TIMING_ATTEMPTS:
                    print(f"timing check failed on attempt {attempt}, running again: {e}")
                    continue
                _report_failure(name, e, failed)
            except Exception as e:  # noqa: BLE001 - every failure is reported the same way
                _report_failure(name, e, failed)
                break
    if not failed:
        for path in _created_dirs:
            shutil.rmtree(path, ignore_errors=True)
    return 1 if failed else 0
