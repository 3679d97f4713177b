"""PyTorch op capture of an unmodified training loop (tests/programs/py/ops_train.py)
with --pytorch-ops, --record-shapes, --group-by-input-shape and --with-stack, on the
Debian CPU build of torch (torch's RecordFunction callbacks for --pytorch-ops, the
bootstrap's dispatch-mode path with shapes or stacks).

Expected counts come from the model: per step, each of the two Linear layers runs one
aten::addmm forward; backward runs aten::mm for each layer's weight gradient and for
the input gradient of every layer but the first (the data needs no gradient)."""

import json
import os
import re
import sys

import tp
from tp import check, check_eq
from test_python import clean_env, run_plain, run_py, script

PROGRAM = script("ops_train.py")
STEPS = 4
SIZE_IN, HIDDEN, SIZE_OUT = 3, 5, 2
LAYERS = [(SIZE_IN, HIDDEN), (HIDDEN, SIZE_OUT)]
ADDMM_PER_STEP = len(LAYERS)
MM_PER_STEP = 2 * len(LAYERS) - 1
SIZES = f"{SIZE_IN},{HIDDEN},{SIZE_OUT}"


def train(options, *extra, steps=STEPS, batch="8"):
    args = [PROGRAM, str(steps), "--batch", batch, "--sizes", SIZES] + list(extra)
    r = run_py(args, options=options)
    check_eq(r.stdout, run_plain(args).stdout, "stdout with and without torchprof")
    return r


def cpu_op_rows(summary):
    return [o for o in summary["ops"] if o.get("kind") == "cpu_op"]


def rows_named(summary, name):
    return [o for o in cpu_op_rows(summary) if o["name"] == name]


def calls_of(summary, name):
    rows = rows_named(summary, name)
    check(rows, f"no cpu_op row {name!r}; cpu_op rows are {sorted({o['name'] for o in cpu_op_rows(summary)})}")
    return sum(o["calls"] for o in rows)


def addmm_dims(batch, layer):
    """aten::addmm(bias, input, weight.t(), *, beta, alpha) as torch's record_shapes lists it."""
    size_in, size_out = layer
    return [[size_out], [batch, size_in], [size_in, size_out], [], []]


def line_of(path, marker):
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if marker in text:
                return number
    raise tp.CheckFailed(f"{marker!r} not in {path}")


def op_events(result, name=None):
    return [ev for ev in tp.all_trace_events(result, ph="X", cat="cpu_op") if name is None or ev["name"] == name]


# ---------------------------------------------------------------------------


def counts():
    r = train(["--pytorch-ops"])
    s = r.summary
    check_eq(calls_of(s, "aten::addmm"), STEPS * ADDMM_PER_STEP, "aten::addmm calls")
    check_eq(calls_of(s, "aten::mm"), STEPS * MM_PER_STEP, "aten::mm calls")
    check_eq(calls_of(s, "aten::relu"), STEPS, "aten::relu calls")
    check_eq(calls_of(s, "aten::mse_loss"), STEPS, "aten::mse_loss calls")
    check_eq(len(rows_named(s, "aten::addmm")), 1, "one aten::addmm row without grouping")
    check(all(not n.startswith("profiler::") for n in {o["name"] for o in cpu_op_rows(s)}),
          "record_function's own ops are not rows")
    check_eq(len(op_events(r, "aten::addmm")), STEPS * ADDMM_PER_STEP, "aten::addmm cpu_op events in the traces")
    check(all(ev["args"].get("Input Dims") is None for ev in op_events(r)), "no shapes without --record-shapes")
    # The ops lie inside the automatic steps, and the table shows them.
    steps = [ev for ev in tp.all_trace_events(r, ph="X") if ev["name"].startswith("ProfilerStep#")]
    check_eq(len(steps), STEPS, "steps")
    table = tp.check_torch_table(open(os.path.join(r.out_dir, "table.txt")).read())
    check_eq(int(table.row("aten::addmm")["# of Calls"]), STEPS * ADDMM_PER_STEP, "aten::addmm in table.txt")
    # Ops pushed and popped inside the automatic steps (start/end ranges): streamed alike.
    tp.check_streamed_table(r.out_dir)


def off():
    r = train([])
    check_eq(cpu_op_rows(r.summary), [], "cpu_op rows without --pytorch-ops")
    check_eq(op_events(r), [], "cpu_op events without --pytorch-ops")


def shapes():
    batch = 8
    r = train(["--record-shapes"], batch=str(batch))
    check_eq(calls_of(r.summary, "aten::addmm"), STEPS * ADDMM_PER_STEP, "aten::addmm calls")
    events = op_events(r, "aten::addmm")
    dims = sorted({repr(ev["args"].get("Input Dims")) for ev in events})
    check_eq(dims, sorted(repr(addmm_dims(batch, layer)) for layer in LAYERS), "Input Dims of aten::addmm")
    mm = op_events(r, "aten::mm")
    check(all(isinstance(ev["args"].get("Input Dims"), list) and len(ev["args"]["Input Dims"]) == 2 for ev in mm),
          "aten::mm(self, mat2) events carry two input shapes")
    # Without --group-by-input-shape rows stay one per name.
    check_eq(len(rows_named(r.summary, "aten::addmm")), 1, "aten::addmm rows without grouping")
    check("Input Shapes" not in open(os.path.join(r.out_dir, "table.txt")).read(), "no Input Shapes column")


def group_by_shape():
    batches = (8, 16)
    r = train(["--group-by-input-shape"], batch=",".join(map(str, batches)))
    rows = rows_named(r.summary, "aten::addmm")
    expected = {str(addmm_dims(b, layer)): STEPS // len(batches) for b in batches for layer in LAYERS}
    got = {o["input_shapes"]: o["calls"] for o in rows}
    check_eq(got, expected, "aten::addmm rows by input shapes (calls)")
    first_layer = [o for o in rows if o["input_shapes"].endswith(f"[{SIZE_IN}, {HIDDEN}], [], []]")]
    check_eq(len(first_layer), len(batches), "first-layer aten::addmm rows, one per batch size")
    text = open(os.path.join(r.out_dir, "table.txt")).read()
    header = text.split("\n")[1]
    check(re.search(r"  # of Calls  +Input Shapes  $", header), f"Input Shapes is the last column: {header!r}")
    for shapes_text in expected:
        check(re.search(r"aten::addmm\s.*\s" + re.escape(shapes_text) + "  $", text, re.M),
              f"a table row for aten::addmm with {shapes_text}")
    # report: shapes recorded, grouping asked for (or not) afresh.
    flat = tp.run_report([r.out_dir, "-o", tp.fresh_dir("flat"), "--format", "json", "--row-limit", "0"])
    check_eq(flat.rc, 0, "report without --group-by-input-shape")
    import json
    addmm = [row for row in json.loads(flat.stdout)["rows"] if row["name"] == "aten::addmm"]
    check_eq([(row.get("input_shapes"), row["calls"]) for row in addmm], [(None, STEPS * ADDMM_PER_STEP)],
             "one aten::addmm row when report does not group")
    grouped = tp.run_report([r.out_dir, "-o", tp.fresh_dir("grouped"), "--group-by-input-shape", "--format", "csv",
                             "--row-limit", "0"])
    check_eq(grouped.rc, 0, "report --group-by-input-shape")
    lines = [l for l in grouped.stdout.decode().splitlines() if l.startswith("aten::addmm,")]
    check_eq(len(lines), len(expected), "aten::addmm CSV rows grouped by shape")


def with_stack():
    r = train(["--with-stack"])
    s = r.summary
    check(b"RecordFunction callbacks are off" not in r.stderr, "stacks through torch's RecordFunction callbacks")
    check(calls_of(s, "aten::linear") == STEPS * ADDMM_PER_STEP, "the op tree: aten::linear above aten::addmm")
    check_eq(calls_of(s, "aten::addmm"), STEPS * ADDMM_PER_STEP, "aten::addmm calls")
    # As torch.profiler's stacks show a frame entered while profiling: at its first line.
    forward = f"{PROGRAM}({line_of(PROGRAM, 'def train_step(')}): train_step"
    backward = forward
    addmm = rows_named(s, "aten::addmm")
    check_eq(len(addmm), 1, "aten::addmm rows (one call site)")
    check_eq(addmm[0]["stack"][0], forward, "innermost frame of aten::addmm")
    check(all(f.startswith(PROGRAM) for f in addmm[0]["stack"]), f"only the program's frames: {addmm[0]['stack']}")
    check_eq({o["stack"][0] for o in rows_named(s, "aten::mm")}, {backward}, "innermost frame of aten::mm")
    for ev in op_events(r, "aten::addmm"):
        check(ev["args"].get("Call stack", "").startswith(forward + ";"), f"Call stack of {ev}")
    text = open(os.path.join(r.out_dir, "table.txt")).read()
    lines = text.split("\n")
    check(lines[1].rstrip().endswith("# of Calls  Source Location"), f"Source Location column: {lines[1]!r}")
    row = next(l for l in lines if l.lstrip().startswith("aten::addmm "))
    check(row.rstrip().endswith("  " + forward) or ("..." in row and forward.endswith(row.rstrip().split("...")[-1])),
          f"aten::addmm's Source Location is the forward call: {row!r}")

    # --group-by-stack N, as key_averages(group_by_stack_n=N): 0 one row per name and no
    # Source Location; 1 rows keyed by the innermost frame alone, each stack that one frame.
    by_name = tp.run_report([r.out_dir, "-o", tp.fresh_dir("by_name"), "--group-by-stack", "0", "--format", "json",
                             "--row-limit", "0"])
    check_eq(by_name.rc, 0, "report --group-by-stack 0")
    rows0 = [o for o in json.loads(by_name.stdout)["rows"] if o.get("kind") == "cpu_op"]
    names0 = [o["name"] for o in rows0]
    check_eq(len(names0), len(set(names0)), "one row per operator with --group-by-stack 0")
    check(not any(o.get("stack") for o in rows0), "no stacks in the rows with --group-by-stack 0")
    check_eq({n: calls_of(s, n) for n in names0}, {o["name"]: o["calls"] for o in rows0}, "calls per operator")
    one = tp.run_report([r.out_dir, "-o", tp.fresh_dir("one_frame"), "--group-by-stack", "1", "--format", "json",
                         "--row-limit", "0"])
    rows1 = [o for o in json.loads(one.stdout)["rows"] if o.get("kind") == "cpu_op"]
    check(all(len(o.get("stack", [])) <= 1 for o in rows1), "one frame a row with --group-by-stack 1")
    keys1 = [(o["name"], tuple(o.get("stack", []))) for o in rows1]
    check_eq(len(keys1), len(set(keys1)), "rows keyed by (name, innermost frame)")
    want1 = {}
    for o in s["ops"]:
        if o.get("kind") == "cpu_op":
            key = (o["name"], tuple(o.get("stack", [])[:1]))
            want1[key] = want1.get(key, 0) + o["calls"]
    check_eq({k: o["calls"] for k, o in zip(keys1, rows1)}, want1, "calls per (name, innermost frame)")

    folded = tp.run_report([r.out_dir, "-o", tp.fresh_dir("folded"), "--format", "folded"])
    check_eq(folded.rc, 0, "report --format folded")
    out = folded.stdout.decode()
    op_names = {o["name"] for o in s["ops"] if o.get("kind") in ("cpu_op", "user_annotation")}
    parsed = []
    for line in out.splitlines():
        m = re.fullmatch(r"(.+) (\d+)", line)
        check(m, f"folded line {line!r} is 'frames value'")
        frames = m.group(1).split(";")
        check(frames[-1] in op_names, f"leaf of {line!r} is an op")
        check(int(m.group(2)) > 0, f"value of {line!r}")
        parsed.append((frames, int(m.group(2))))
    check(parsed, "folded output has lines")
    check(any(f[-1] == "aten::addmm" and f[-2] == forward for f, _ in parsed),
          "a folded stack ends in the forward call and aten::addmm")
    check(any(f[0].endswith("): <module>") for f, _ in parsed), "folded stacks start at the script's <module>")
    check_eq(open(os.path.join(r.out_dir, "stacks.folded")).read(), out, "stacks.folded beside the run")


def no_stack_folded():
    r = train(["--pytorch-ops"], steps=2)
    folded = tp.run_report([r.out_dir, "-o", tp.fresh_dir("folded"), "--format", "folded"])
    check_eq(folded.rc, 0, "report --format folded without stacks")
    check_eq(folded.stdout, b"", "no folded lines without --with-stack")
    check(b"--with-stack" in folded.stderr, "stderr says how to get stacks")


def workers():
    # Batches from a DataLoader with two forked workers: they inherit the op capture
    # and record into processes of their own; the training ops stay in the parent's.
    r = train(["--pytorch-ops"], "--loader", "2")
    check_eq(calls_of(r.summary, "aten::addmm"), STEPS * ADDMM_PER_STEP, "aten::addmm calls")
    addmm_pids = {ev["pid"] for ev in op_events(r, "aten::addmm")}
    check_eq(len(addmm_pids), 1, "aten::addmm in one process")
    other = {ev["pid"] for ev in op_events(r)} - addmm_pids
    check(len(other) >= 1, "cpu_op events from the DataLoader workers")


def own_mode():
    # Step 0 inside the program's own TorchDispatchMode: it sees what it would see
    # alone (same count printed). torch's RecordFunction callbacks keep recording inside
    # it, and each op the mode calls again passes the dispatcher twice: a global
    # callback sees both, nested, and the table counts one, as torch's does (an op whose
    # only child is the same op is one call: EventList._remove_dup_nodes). With the
    # dispatch-mode capture (an unknown layout here), ours leaves the stack and those
    # ops are not recorded.
    r = train(["--pytorch-ops"], "--own-mode")
    check("own mode saw" in r.stdout.decode(), "the program's mode ran")
    check_eq(calls_of(r.summary, "aten::addmm"), STEPS * ADDMM_PER_STEP, "aten::addmm calls")
    nested = [e for e in tp.all_trace_events(r, ph="X", cat="cpu_op") if e["name"] == "aten::addmm"]
    check_eq(len(nested), (STEPS + 1) * ADDMM_PER_STEP, "the traces keep both addmm ranges of step 0")
    r = run_py([PROGRAM, str(STEPS), "--batch", "8", "--sizes", SIZES, "--own-mode"], options=["--pytorch-ops"],
               env=clean_env(TORCHPROF_TORCH_LAYOUT="unknown"))
    check("own mode saw" in r.stdout.decode(), "the program's mode ran")
    check_eq(calls_of(r.summary, "aten::addmm"), (STEPS - 1) * ADDMM_PER_STEP, "aten::addmm calls (dispatch mode)")


def own_profiler():
    # Step 0 under torch.profiler: its counts are the same as without torchprof
    # (compared through stdout), and torchprof records the other steps. Torch 1.13's
    # own profiler now and then records an op twice when the CPU is contended, with
    # no torchprof anywhere (3 of 20 plain runs beside one busy loop: aten::div_ twice
    # under aten::mean): up to three fresh pairs of runs are compared. An op of
    # torchprof's reaching the program's profiler would differ in every pair.
    args = [PROGRAM, str(STEPS), "--batch", "8", "--sizes", SIZES, "--own-profiler"]
    for attempt in range(3):
        r = run_py(args, options=["--with-stack", "--record-shapes"])
        plain = run_plain(args)
        if r.stdout == plain.stdout or attempt == 2:
            break
        print(f"own_profiler: stdout differs in attempt {attempt + 1}, running both again", file=sys.stderr)
    check_eq(r.stdout, plain.stdout, "stdout with and without torchprof")
    check("own profiler saw" in r.stdout.decode(), "the program's profiler ran")
    check_eq(calls_of(r.summary, "aten::addmm"), (STEPS - 1) * ADDMM_PER_STEP, "aten::addmm calls")


def exit_code():
    # An error raised inside an op reaches the program unchanged: same exit code,
    # stdout and exception (the traceback has the dispatch mode's frames in between).
    args = [PROGRAM, "3", "--batch", "8", "--sizes", SIZES, "--fail-at", "1"]
    plain = run_plain(args)
    check_eq(plain.returncode, 1, "exit code of the failing program alone")
    r = run_py(args, options=["--with-stack", "--record-shapes", "-q"], expect_rc=plain.returncode)
    check_eq(r.stdout, plain.stdout, "stdout")
    last = plain.stderr.decode().strip().splitlines()[-1]
    check(last.startswith("RuntimeError: "), f"the program fails inside an op: {last!r}")
    check_eq(r.stderr.decode().strip().splitlines()[-1], last, "the exception the program died of")


EMIT_NVTX_PROGRAM = """
import torchprof
with torchprof.range("forward"):
    for seq in range(3):
        with torchprof.range("aten::addmm, seq = %d, op_id = %d, sizes = [[2, 3], [3, 4], []], "
                             "input_op_ids = [(0,0), (0,0)]" % (seq, 10 + seq)):
            pass
    with torchprof.range("aten::mm, seq = x"):
        pass
print("done")
"""


def emit_nvtx_messages():
    # emit_nvtx's messages (torch's format) arriving as default-domain NVTX ranges, as on
    # a CUDA build: pushed here through torchprof.range, the same record an NVTX push makes.
    r = run_py(["-c", EMIT_NVTX_PROGRAM])
    check_eq(r.stdout, b"done\n", "stdout")
    s = r.summary
    check_eq([(o["name"], o["calls"]) for o in cpu_op_rows(s)], [("aten::addmm", 3)], "cpu_op rows")
    names = {o["name"]: o["kind"] for o in s["ops"]}
    check_eq(names.get("forward"), "nvtx", "a plain range stays an NVTX row")
    check_eq(names.get("aten::mm, seq = x"), "nvtx", "a malformed message keeps its text")
    events = sorted(op_events(r, "aten::addmm"), key=lambda ev: float(ev["ts"]))
    check_eq([ev["args"].get("Sequence number") for ev in events], [0, 1, 2], "Sequence number")
    check(all(ev["args"].get("Input Dims") == [[2, 3], [3, 4], []] for ev in events), "Input Dims")
    # No optimizer step, so no bootstrap step ranges (start/end records): the table
    # alone is streamed, op rows included, and equals the full report's.
    tp.check_streamed_table(r.out_dir)
    tp.check_streamed_table(r.out_dir, ["--group-by-input-shape"])


def environment():
    probe = "import os; print(os.environ.get('TORCHPROF_PYTORCH_OPS'))"
    for options, value in (([], "None"), (["--pytorch-ops"], "ops"), (["--record-shapes"], "ops,shapes"),
                           (["--with-stack"], "ops,stack"), (["--group-by-input-shape"], "ops,shapes"),
                           (["--record-shapes", "--with-stack"], "ops,shapes,stack")):
        r = run_py(["-c", probe], options=options)
        check_eq(r.stdout.decode().strip(), value, f"TORCHPROF_PYTORCH_OPS with {options}")


SCENARIOS = [counts, off, shapes, group_by_shape, with_stack, no_stack_folded, workers, own_mode, own_profiler,
             exit_code, emit_nvtx_messages, environment]

if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in SCENARIOS}))
