"""Real GPU traces end to end without a GPU: kineto_replay plays a trace torch.profiler
recorded on an A100 or V100 (tests/fixtures/kineto_real, see SOURCE.md there) back
through the fake libcupti under torchprof-run, and what torchprof reports is compared
with what this file computes from the trace itself, with none of the product's code:

- every kernel, memcpy and memset row: calls and total time exact, named as Kineto
  names it ("Memcpy HtoD (Pageable -> Device)");
- every op (cpu_op, user_annotation): calls exact; Self CUDA and CUDA total by torch's
  rule (GPU record -> runtime call with the same correlation id -> the innermost range
  around that call on its thread gets Self CUDA, every range around it CUDA total),
  within 0.5% for at least 99% of the ops;
- GPU busy per device (merged kernel intervals) exact to the ns;
- the written traces hold every counted GPU event with its name, stream, duration and
  its offset from the first one; the ProfilerStep#N steps are the trace's; each CUDA
  API row has the trace's count.

What counts is what torchprof counts: the events of the recorded steps. An event counts
when it starts inside a ProfilerStep#N range of another thread (ends included) or is
nested in one on its own thread, or when the trace has no steps; a GPU record counts
when its launching call does, or, when the trace lacks that call, when its start lies
inside a step.

Nesting, as kineto_replay documents it (replay_plan.h): per thread, events ordered by
(ts, longer first, ranges before API calls, position in the file); an event is inside
the innermost open range whose interval holds its start, or that starts with it; API
calls hold nothing.

Scenarios: one per trace, `step_boundaries` (a made-up trace with another thread's events
at and next to each step's edges), `unsupported` (traces it cannot express: exit 2 with
one line) and `unreadable`. Needs TP_CUPTI_INCLUDE_DIR (the CUPTI headers, for Kineto's INVALID
runtime names) besides tp.py's variables."""

import collections
import json
import math
import os
import re
import subprocess
import sys

import overview_reference as ref
import test_overview_reference
import tp
from tp import check, check_eq

# trace file, --time-scale, --gpu-lag (ns). simple_add spends 25 s in CUDA's
# initialisation and 16 s more in one range: shrunk 50 times. resnet_v100 holds 614 GPU
# records launched before its CPU side begins, which torchprof places in step 0 by their
# start (93 us to 39 ms into the 100 ms step): it replays at the trace's own speed with
# the GPU timeline 50 ms late, so that a late ProfilerStep#1009 push cannot leave them
# out (check_unlaunched_safe says when a choice would not hold).
TRACES = {
    "resnet_a100": ("resnet_a100_control.json.gz", 0.5, 0),
    "resnet_v100": ("resnet_v100_test.json.gz", 1.0, 50_000_000),
    "simple_add": ("simple_add_a100.json.gz", 0.02, 0),
    "sampled_rank0": ("sampled_rank0.json.gz", 0.5, 0),
}
MAX_GAP_NS = 100_000_000  # kineto_replay's default --max-gap
CUDA_REL_TOL = 0.005  # op rows' Self CUDA / CUDA total
OPS_WITHIN_SHARE = 0.99
UNLAUNCHED_MARGIN_NS = 20_000_000  # how late a step's push may run, for records without their call

CPU_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
API_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
ROW_KIND = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
STEP_RE = re.compile(r"^ProfilerStep#")


def fake_cupti():
    path = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    check(os.path.isfile(path), f"fake libcupti not built: {path}")
    return path


def to_ns(us):
    """Kineto's microseconds to ns, rounded half up (offsets are taken first)."""
    return math.floor(us * 1000.0 + 0.5)


# ---------------------------------------------------------------------------
# What the trace says


class Ev:
    __slots__ = ("raw", "cat", "name", "thread", "ts", "dur", "index", "parent", "self_cuda", "cuda_total",
                 "counted", "in_table", "step", "in_step_tree", "children")

    def __init__(self, raw, index, t0):
        self.raw, self.index = raw, index
        self.cat, self.name = raw["cat"], raw.get("name", "")
        self.thread = (raw.get("pid"), raw.get("tid"))
        self.ts = to_ns(raw["ts"] - t0)
        self.dur = max(0, to_ns(raw.get("dur", 0)))
        self.parent = None
        self.self_cuda = self.cuda_total = 0
        self.counted = False   # of the steps (what the per-step figures hold)
        self.in_table = False  # in the ops and the traces: without a schedule, everything
        self.step = False  # a step marker
        self.in_step_tree = False
        self.children = 0  # direct children (API calls too)

    @property
    def end(self):
        return self.ts + self.dur

    @property
    def is_api(self):
        return self.cat in API_CATS


def runtime_names_by_cbid():
    """Runtime callback ids to the names CUPTI calls them (the header's, version cut)."""
    path = os.path.join(os.environ.get("TP_CUPTI_INCLUDE_DIR", "/usr/local/cuda/include"), "cupti_runtime_cbid.h")
    names = {}
    with open(path) as f:
        for m in re.finditer(r"CUPTI_RUNTIME_TRACE_CBID_(\w+)\s*=\s*(\d+)", f.read()):
            names[int(m.group(2))] = re.sub(r"_v\d{4,}$", "", m.group(1))
    return names


def nest(events):
    """Parents per thread (see the module's docstring); returns the events, each
    after its parent."""
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e.thread].append(e)
    ordered = []
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.ts, -e.dur, e.is_api, e.index))
        stack = []
        for e in evs:
            while stack and (stack[-1].is_api or not (e.ts < stack[-1].end or e.ts == stack[-1].ts)):
                stack.pop()
            e.parent = stack[-1] if stack else None
            if e.parent is not None:
                e.parent.children += 1
            stack.append(e)
        ordered += evs
    return ordered


def ancestors(e):
    p = e.parent
    while p is not None:
        yield p
        p = p.parent


class Expected:
    def __init__(self, trace, scheduled=False):
        raw = [(i, ev) for i, ev in enumerate(trace["traceEvents"])
               if ev.get("ph") == "X" and ev.get("cat") in CPU_CATS + GPU_CATS]
        t0 = min(ev["ts"] for _, ev in raw)
        self.cpu = [Ev(ev, i, t0) for i, ev in raw if ev["cat"] in CPU_CATS]
        self.gpu = [Ev(ev, i, t0) for i, ev in raw if ev["cat"] in GPU_CATS]
        self.steps = sorted((e for e in self.cpu if e.cat == "user_annotation" and STEP_RE.match(e.name)),
                            key=lambda e: e.ts)
        for s in self.steps:
            s.step = True
        for e in nest(self.cpu):  # parents before children
            e.counted = self._in_step(e)
        self.calls = {}
        for e in self.cpu:
            if e.is_api:
                self.calls.setdefault(e.raw.get("args", {}).get("correlation"), e)
        self._attribute()
        # Without --schedule the ops and the trace hold the whole run, steps or not.
        for e in self.cpu + self.gpu:
            e.in_table = e.counted or not scheduled

    def _in_step(self, e):
        """e's parent is decided already; its own thread's steps count by nesting."""
        e.in_step_tree = e.step or (e.parent is not None and e.parent.in_step_tree)
        if not self.steps or e.in_step_tree:
            return True
        return any(s.thread != e.thread and s.ts <= e.ts <= s.end for s in self.steps)

    def launching_call(self, g):
        return self.calls.get(g.raw.get("args", {}).get("correlation"))

    def _attribute(self):
        self.unlaunched = []
        for g in self.gpu:
            call = self.launching_call(g)
            if call is None:
                self.unlaunched.append(g)
                g.counted = not self.steps or any(s.ts <= g.ts <= s.end for s in self.steps)
                continue
            g.counted = call.counted
            if g.cat == "cuda_sync":
                continue
            ranges = [a for a in ancestors(call) if not a.is_api]
            if ranges:
                ranges[0].self_cuda += g.dur
            for r in ranges:
                r.cuda_total += g.dur

    def gpu_rows(self):
        rows = collections.defaultdict(lambda: [0, 0])
        for g in self.gpu:
            if g.in_table and g.cat in ROW_KIND:
                row = rows[(ROW_KIND[g.cat], g.name)]
                row[0] += 1
                row[1] += g.dur
        return rows

    def op_rows(self):
        rows = collections.defaultdict(lambda: [0, 0, 0])
        for e in self.cpu:
            if not e.in_table or e.is_api:
                continue
            key = ("cpu_op", e.name) if e.cat == "cpu_op" else \
                ("nvtx", "ProfilerStep*" if e.name.startswith("ProfilerStep#") else e.name)
            row = rows[key]
            # torch's table (EventList._remove_dup_nodes): an op that is the only child of an
            # op of its name is one call with it.
            p = e.parent
            if not (e.cat == "cpu_op" and p is not None and p.cat == "cpu_op" and p.name == e.name and
                    p.in_table and p.children == 1):
                row[0] += 1
            row[1] += e.self_cuda
            row[2] += e.cuda_total
        return rows

    def api_rows(self, invalid_names):
        rows = collections.Counter()
        for e in self.cpu:
            if e.in_table and e.is_api:
                name = e.name
                if name == "INVALID":  # Kineto's name for an id its table lacked
                    name = invalid_names[e.raw["args"]["cbid"]]
                rows[re.sub(r"_v\d{4,}$", "", name) if e.cat == "cuda_runtime" else name] += 1
        return rows

    def busy(self):
        """Merged counted kernel intervals per device."""
        spans = collections.defaultdict(list)
        for g in self.gpu:
            if g.counted and g.cat == "kernel":
                spans[device_of(g.raw)].append((g.ts, g.end))
        out = {}
        for device, intervals in spans.items():
            intervals.sort()
            total, cur_start, cur_end = 0, None, None
            for start, end in intervals:
                if cur_end is None or start > cur_end:
                    if cur_end is not None:
                        total += cur_end - cur_start
                    cur_start, cur_end = start, end
                else:
                    cur_end = max(cur_end, end)
            out[device] = total + (cur_end - cur_start if cur_end is not None else 0)
        return out

    def cpu_time_map(self, scale):
        """Trace offset -> replay offset of the CPU side: idle stretches cut to the
        replay's --max-gap, then scaled."""
        spans = sorted((e.ts, e.end) for e in self.cpu)
        cuts, idle_from, removed = [], 0, 0
        for start, end in spans:
            if start - idle_from > MAX_GAP_NS:
                cuts.append((idle_from + MAX_GAP_NS, start - idle_from - MAX_GAP_NS, removed))
                removed += start - idle_from - MAX_GAP_NS
            idle_from = max(idle_from, end)

        def to_replay(t):
            gone = 0
            for frm, length, before in cuts:
                if frm <= t:
                    gone = before + min(t - frm, length)
            return (t - gone) * scale
        return to_replay


def device_of(raw):
    return raw.get("args", {}).get("device", raw.get("pid"))


def gpu_row_tid(raw):
    """The stream, as the row's tid: -1 for a context synchronisation (whose args hold
    CUPTI's invalid id, 4294967295)."""
    return raw.get("tid", raw.get("args", {}).get("stream"))


# ---------------------------------------------------------------------------
# Checks


def check_unlaunched_safe(exp, scale, lag):
    """GPU records without their call are placed in steps by their start, and GPU times
    are never scaled: at this scale and lag each must stay inside (or outside) the
    replayed steps as it is by the trace, even when a step's push runs late (its pop
    never runs early)."""
    to_replay = exp.cpu_time_map(scale)
    windows = [(to_replay(s.ts), to_replay(s.end)) for s in exp.steps]
    for g in exp.unlaunched:
        at = g.ts + lag
        inside = any(start + UNLAUNCHED_MARGIN_NS <= at <= end for start, end in windows)
        near = any(start <= at <= end + UNLAUNCHED_MARGIN_NS for start, end in windows)
        check(inside if g.counted else not near and not inside,
              f"--time-scale {scale} --gpu-lag {lag}ns move the steps around GPU record {g.name!r} at {g.ts} ns, "
              f"whose launching call the trace lacks: choose values that keep it "
              f"{'inside' if g.counted else 'outside'} the steps")


def check_gpu_rows(summary, exp):
    rows = {(o["kind"], o.get("mangled_name", o["name"])): o for o in summary["ops"]
            if o["kind"] in ("kernel", "memcpy", "memset")}
    want = exp.gpu_rows()
    check_eq(sorted(set(want) - set(rows)), [], "GPU rows (kind, name) of the trace missing from summary.json")
    check_eq(sorted(set(rows) - set(want)), [], "GPU rows (kind, name) in summary.json and not in the trace")
    for key, (calls, total) in want.items():
        row = rows[key]
        check_eq(row["calls"], calls, f"calls of {key}")
        check_eq(row["self_cuda_ns"], total, f"self_cuda_ns of {key}")
        check_eq(row["cuda_total_ns"], total, f"cuda_total_ns of {key}")
    return len(want)


def within(actual, expected):
    return abs(actual - expected) <= CUDA_REL_TOL * expected if expected else actual == 0


def check_op_rows(summary, exp):
    rows = {(o["kind"], o["name"]): o for o in summary["ops"] if o["kind"] in ("cpu_op", "nvtx")}
    want = exp.op_rows()
    check_eq(sorted(set(rows) - set(want)), [], "op rows torchprof has and the trace has not")
    check_eq(sorted(set(want) - set(rows)), [], "op rows the trace has and torchprof has not")
    off = []
    for key, (calls, self_cuda, total) in want.items():
        row = rows[key]
        check_eq(row["calls"], calls, f"calls of op {key}")
        if not (within(row["self_cuda_ns"], self_cuda) and within(row["cuda_total_ns"], total)):
            off.append((key, row["self_cuda_ns"], self_cuda, row["cuda_total_ns"], total))
    share = 1 - len(off) / len(want)
    exact = sum(1 for key, (_, self_cuda, total) in want.items()
                if rows[key]["self_cuda_ns"] == self_cuda and rows[key]["cuda_total_ns"] == total)
    print(f"op rows within {CUDA_REL_TOL:.1%}: {len(want) - len(off)}/{len(want)} ({exact} exact)")
    for key, got_self, want_self, got_total, want_total in off[:10]:
        print(f"  off: {key}: Self CUDA {got_self} (trace {want_self}), CUDA total {got_total} (trace {want_total})")
    check(share >= OPS_WITHIN_SHARE, f"only {share:.2%} of the op rows within {CUDA_REL_TOL:.1%}: {off[:5]}")
    return len(want), len(off)


def check_busy(summary, exp):
    got = {d["id"]: d["busy_ns"] for d in summary["gpu"]["devices"]}
    for device, busy in exp.busy().items():
        check(device in got, f"device {device} missing from summary.json gpu.devices ({sorted(got)})")
        error = abs(got[device] - busy) / busy
        print(f"GPU busy device {device}: {got[device]} ns, trace {busy} ns, error {error:.4%}")
        # GPU records keep the trace's times to the ns: the union must be exact.
        check_eq(got[device], busy, f"GPU busy of device {device} (ns)")


def check_api_rows(summary, exp):
    got = {o["name"]: o["calls"] for o in summary["ops"] if o["kind"] == "cuda_api"}
    want = exp.api_rows(runtime_names_by_cbid())
    for name, calls in got.items():
        check_eq(calls, want.get(name), f"calls of CUDA API {name!r}")
    for g in exp.gpu:
        call = exp.launching_call(g)
        if g.in_table and call is not None and call.name != "INVALID":
            check(call.name in got, f"CUDA API {call.name!r} launched GPU work but has no row")


def check_steps(summary, exp):
    got = [s["name"] for s in summary["steps"]]
    if exp.steps:
        check_eq(got, [s.name for s in exp.steps], "steps")


def details(ev):
    """A kernel's launch configuration, a copy's or set's bytes."""
    args = ev.get("args", {})
    if ev["cat"] == "kernel":
        return (tuple(args.get("grid", ())), tuple(args.get("block", ())), args.get("registers per thread"),
                args.get("shared memory"))
    return args.get("bytes")


def check_trace_events(result, exp):
    """Every counted GPU event once in the traces: (cat, name, device, stream, duration,
    offset from the first GPU event, launch configuration or bytes)."""
    written = []
    for _, trace in result.traces:
        for ev in trace.get("traceEvents", []):
            if ev.get("ph") == "X" and ev.get("cat") in GPU_CATS:
                written.append(ev)
    check(written, "no GPU events in the traces")
    first = min(float(ev["ts"]) for ev in written)
    got = collections.Counter((ev["cat"], ev["name"], ev["pid"], ev["tid"], tp.dur_ns(ev),
                               to_ns(float(ev["ts"]) - first), details(ev)) for ev in written)
    counted = [g for g in exp.gpu if g.in_table]
    start = min(g.ts for g in counted)
    want = collections.Counter((g.cat, g.name, device_of(g.raw), gpu_row_tid(g.raw), g.dur, g.ts - start,
                                details(g.raw)) for g in counted)
    missing, extra = want - got, got - want
    check(not missing and not extra,
          f"GPU events of the traces: {sum(missing.values())} missing, e.g. {list(missing)[:3]}; "
          f"{sum(extra.values())} not in the input, e.g. {list(extra)[:3]}")
    return len(written)


def replay_trace(name):
    path, scale, lag = TRACES[name]
    trace_path = tp.fixture(os.path.join("kineto_real", path))
    trace = tp.load_trace(trace_path)
    exp = Expected(trace)
    check_unlaunched_safe(exp, scale, lag)
    parent = tp.fresh_dir("replay_" + name)
    out_dir = os.path.join(parent, "out")
    env = dict(os.environ, TORCHPROF_CUPTI_LIB=fake_cupti())
    env.pop("FAKE_CUPTI_FAIL", None)
    argv = ["-o", out_dir, "-q", "--", tp.bin_path("kineto_replay"), "--stats", "--time-scale", str(scale),
            "--gpu-lag", f"{lag}ns", trace_path]
    result = tp.run_tool(argv, timeout=170, env=env)
    result.out_dir = out_dir
    print(f"{name}: torchprof-run with --time-scale {scale} --gpu-lag {lag}ns: {result.elapsed_s:.2f} s")
    for line in result.stderr_text.splitlines():
        if line.startswith("kineto_replay:"):
            print(line)
    check_eq(result.rc, 0, "exit code of torchprof-run kineto_replay")
    summary = result.summary
    check_eq(summary["dropped_events"], 0, "dropped events")
    check_eq(summary["gpu"]["cupti_dropped"], 0, "CUPTI records dropped")
    check_steps(summary, exp)
    gpu_rows = check_gpu_rows(summary, exp)
    print(f"GPU rows equal: {gpu_rows}/{gpu_rows}")
    check_op_rows(summary, exp)
    check_busy(summary, exp)
    check_api_rows(summary, exp)
    events = check_trace_events(result, exp)
    print(f"GPU events in the traces: {events}, each as in the input "
          f"({len(exp.gpu) - sum(g.counted for g in exp.gpu)} outside the steps, as torchprof counts, "
          f"in the ops and the trace without a schedule)")
    check_overview(result, trace)


def check_overview(result, trace):
    """The overview of the replayed run (summary.json) against the reference computation
    (overview_reference.py, separate code) on the trace torchprof wrote, to the nanosecond;
    the reference's figures on the input trace are printed beside torchprof's, since the
    replay's CPU timing, and so its steps' bounds, only approximate the original's."""
    steps = test_overview_reference.check_overview_against_trace(result)
    mine = result.summary["overview"]["breakdown"]["steps"]
    theirs = ref.Trace(trace).breakdown()

    def shares(rows):
        total = sum(r["dur_ns"] for r in rows) or 1
        return {p: round(100 * sum(r[p + "_ns"] for r in rows) / total, 1) for p in ref.PARTS}
    print(f"overview: {steps} steps equal to the reference on the written trace; breakdown % replayed "
          f"{shares(mine)}, input trace {shares(theirs)}")


def boundary_trace(steps=50):
    """ProfilerStep#k ranges on the main thread; on a second thread, an op (each
    launching a kernel) at exactly each step's start and end, where the step holds it,
    and one just before and just after, where it does not."""
    main, other = 100, 101
    events, corr = [], 1
    for k in range(steps):
        start = 1000 + 300 * k
        end = start + 200
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": main, "tid": main,
                       "ts": start, "dur": end - start})
        for name, ts in (("before", start - 1), ("at_start", start), ("at_end", end), ("after", end + 1)):
            events.append({"ph": "X", "cat": "cpu_op", "name": "b_" + name, "pid": main, "tid": other, "ts": ts,
                           "dur": 0, "args": {"External id": corr}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": main, "tid": other,
                           "ts": ts, "dur": 0, "args": {"cbid": 211, "correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": "k_" + name, "pid": 0, "tid": 7, "ts": ts + 2,
                           "dur": 3, "args": {"device": 0, "stream": 7, "correlation": corr, "grid": [1, 1, 1],
                                              "block": [32, 1, 1]}})
            corr += 1
    return {"schemaVersion": 1, "traceEvents": events}


def scenario_step_boundaries():
    """Another thread's events at a step's very start and end are in the step, those a
    microsecond outside are not, however the replay's threads are scheduled: under a
    schedule that records every step, those outside are left out (and counted as left
    out); without one, they are in the ops too."""
    trace = boundary_trace()
    path = write_trace(trace["traceEvents"], "boundaries.json")
    exp = Expected(trace, scheduled=True)
    ops = exp.op_rows()
    check_eq(ops.get(("cpu_op", "b_at_start"), [0])[0], 50, "expected calls of b_at_start")
    check_eq(("cpu_op", "b_before") in ops or ("cpu_op", "b_after") in ops, False, "ops outside the steps expected")
    out_dir = os.path.join(tp.fresh_dir("replay_boundaries"), "out")
    result = tp.run_tool(["-o", out_dir, "-q", "--schedule", "wait=0,warmup=0,active=50,repeat=1", "--",
                          tp.bin_path("kineto_replay"), "--stats", path],
                         env=dict(os.environ, TORCHPROF_CUPTI_LIB=fake_cupti()))
    result.out_dir = out_dir
    check_eq(result.rc, 0, "exit code of torchprof-run kineto_replay")
    check_eq(len(result.summary["steps"]), 50, "steps")
    check_gpu_rows(result.summary, exp)
    check_op_rows(result.summary, exp)
    # b_before and b_after, each with its launch and its kernel, outside every step
    check_eq(result.summary["left_out_outside_steps"], 2 * 50 * 3, "left out, outside every step")

    whole = Expected(trace)
    check_eq(whole.op_rows().get(("cpu_op", "b_before"), [0])[0], 50, "expected calls of b_before without a schedule")
    rep_dir = os.path.join(tp.fresh_dir("replay_boundaries_whole"), "out")
    rep = tp.run_report([out_dir, "-o", rep_dir, "-q"])
    check_eq(rep.rc, 0, "exit code of torchprof report without a schedule")
    rep.out_dir = rep_dir
    check_gpu_rows(rep.summary, whole)
    check_op_rows(rep.summary, whole)
    check_eq(rep.summary["left_out_outside_steps"], 0, "left out without a schedule")


def run_replay(args, timeout=60):
    return subprocess.run([tp.bin_path("kineto_replay")] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=timeout,
                          env=dict(os.environ, TORCHPROF_CUPTI_LIB=fake_cupti()))


def one_line_exit_2(args, must_name, what):
    proc = run_replay(args)
    err = proc.stderr.decode(errors="replace")
    check_eq(proc.returncode, 2, f"exit code of kineto_replay on {what} ({err!r})")
    lines = err.splitlines()
    check(lines and lines[0].startswith("kineto_replay: ") and must_name in lines[0],
          f"kineto_replay on {what}: first line should name {must_name!r}: {err!r}")


def write_trace(events, name):
    path = os.path.join(tp.fresh_dir("replay_bad"), name)
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    return path


def scenario_unsupported():
    """Traces it cannot express: exit 2, with one line naming the event."""
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
    amd = dict(op, cat="cuda_runtime", name="hipLaunchKernel", args={"correlation": 7, "cbid": 0})
    one_line_exit_2([write_trace([op, amd], "amd.json")], "hipLaunchKernel", "a ROCm trace")
    mtia = dict(op, cat="mtia_runtime", name="mtiaLaunchKernel")
    one_line_exit_2([write_trace([op, mtia], "mtia.json")], "mtia_runtime", "an MTIA trace")
    copy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy XtoY (Device -> Device)", "pid": 0, "tid": 7,
            "ts": 11, "dur": 1, "args": {"correlation": 7, "stream": 7, "device": 0}}
    one_line_exit_2([write_trace([op, copy], "copy.json")], "Memcpy XtoY", "an unknown copy")
    # The same under torchprof-run: the target's exit code.
    result = tp.run_tool(["-o", os.path.join(tp.fresh_dir("replay_bad_run"), "out"), "-q", "--",
                          tp.bin_path("kineto_replay"), write_trace([op, amd], "amd.json")],
                         env=dict(os.environ, TORCHPROF_CUPTI_LIB=fake_cupti()))
    check_eq(result.rc, 2, "exit code of torchprof-run kineto_replay on a ROCm trace")
    # What it can express, --check reads without replaying.
    proc = run_replay(["--check", tp.fixture("kineto_real/simple_add_a100.json.gz")])
    check_eq(proc.returncode, 0, f"kineto_replay --check on simple_add ({proc.stderr!r})")
    check(b"698 CPU events" in proc.stdout,
          f"kineto_replay --check counts the CPU events (cpu_op, user_annotation, cuda_runtime): {proc.stdout!r}")


def scenario_unreadable():
    missing = os.path.join(tp.fresh_dir("replay_missing"), "none.json")
    one_line_exit_2([missing], "none.json", "a missing file")
    garbage = write_trace([], "garbage.json")
    with open(garbage, "w") as f:
        f.write("{ not json")
    one_line_exit_2([garbage], "not JSON", "a file that is not JSON")
    one_line_exit_2(["--time-scale", "0", garbage], "--time-scale", "--time-scale 0")


SCENARIOS = {name: (lambda n=name: replay_trace(n)) for name in TRACES}
SCENARIOS.update(step_boundaries=scenario_step_boundaries, unsupported=scenario_unsupported,
                 unreadable=scenario_unreadable)

if __name__ == "__main__":
    sys.exit(tp.main(SCENARIOS))
