"""--profile-memory on Debian's CPU torch 1.13: torch's CPU tensor allocations through
c10::alloc_cpu/free_cpu (inject/torch_memory.cpp), attributed to ops as torch's
profile_memory does, compared with torch.profiler(profile_memory=True) run on the same
script and steps (tests/programs/py/ops_models.py); and the leak finding on loops whose
memory is known (tests/programs/py/memory_loops.py).

torch attributes a [memory] event to every op whose interval holds its time, on any
thread, in whole microseconds (torch 1.13) or in nanoseconds compared after a round trip
through float microseconds (torch 2.x); torchprof by the order of records on the op's
thread. ops_models.py reads torch's records and intervals and says, per op name, which
records torch's rule may have placed differently (memory_edges): a row passes when
torchprof's CPU Mem is torch's, or one that those records explain."""

import json
import os
import re
import subprocess

import tp
from tp import check, check_eq
from test_python import clean_env, run_plain, run_py, script

OPS = script("ops_models.py")
LOOPS = script("memory_loops.py")
COUNTERS = script("allocator_counters.py")
STEPS = 5          # torch: wait=1, warmup=1, active=3; torchprof the same schedule
LOOP_STEPS = 12


def torch_memory(model):
    out = os.path.join(tp.fresh_dir("torch"), "memory.json")
    plain = run_plain([OPS, model, str(STEPS), "--memory-profiler", out], timeout=600)
    check_eq(plain.returncode, 0, f"torch.profiler(profile_memory=True) on {model}: {plain.stderr.decode()[-2000:]}")
    with open(out) as f:
        return json.load(f)


def rows_by_name(summary):
    rows = {}
    for o in summary["ops"]:
        r = rows.setdefault(o["name"], {"cpu": 0, "self": 0, "calls": 0})
        r["cpu"] += o["cpu_memory_usage"]
        r["self"] += o["self_cpu_memory_usage"]
        r["calls"] += o["calls"]
    return rows


def possible_values(row, cap=20000):
    """The CPU Mem values that counting by the order of records on the op's thread may
    give, from torch's row: its value less the other threads' records, plus its
    correction, less any of its edge_in records, plus any of its edge_out records
    (ops_models.memory_edges). None when there are more than `cap` of them."""
    sums = {row["cpu_memory_usage"] - row["other_threads"] + row["correction"]}
    for b in [-x for x in row["edge_in"]] + row["edge_out"]:
        sums |= {v + b for v in sums}
        if len(sums) > cap:
            return None
    return sums


def compare(model):
    theirs = torch_memory(model)
    r = run_py([OPS, model, str(STEPS)], timeout=600,
               options=["--profile-memory", "--schedule", f"wait=1,warmup=1,active={STEPS - 2}"])
    check("RecordFunction callbacks are off" not in r.stderr_text, f"the op observer ran: {r.stderr_text[-1500:]}")
    ours = rows_by_name(r.summary)
    rows = {n: v for n, v in theirs["ops"].items()
            if not n.startswith("ProfilerStep") and (v["cpu_memory_usage"] != 0 or ours.get(n, {}).get("cpu"))}
    # Rows whose calls differ are not the same ops: torch's own profiler adds calls of its
    # own (the tensors behind its ProfilerStep ranges' handles: aten::zeros).
    other_calls = {n: (v["count"], ours.get(n, {}).get("calls")) for n, v in rows.items()
                   if ours.get(n, {}).get("calls") != v["count"]}
    possible = {n: possible_values(v) for n, v in rows.items() if n not in other_calls}
    open_rows = [n for n, p in possible.items() if p is None]
    eligible = [n for n, p in possible.items() if p is not None]
    equal = [n for n in eligible if ours[n]["cpu"] == rows[n]["cpu_memory_usage"]]
    edge = {n: (rows[n]["cpu_memory_usage"], ours[n]["cpu"]) for n in eligible
            if n not in equal and ours[n]["cpu"] in possible[n]}
    unequal = {n: (rows[n]["cpu_memory_usage"], ours[n]["cpu"]) for n in eligible
               if n not in equal and n not in edge}
    print(f"{model}: {len(theirs['ops'])} rows from torch, {len(rows)} with CPU Mem, {len(eligible)} compared "
          f"(calls differ, torch / torchprof: {other_calls}; too many records at their edges: {open_rows}); "
          f"CPU Mem equal for {len(equal)}, unequal by records at the ops' edges for {len(edge)}, otherwise for "
          f"{len(unequal)} ({100 * (len(equal) + len(edge)) / max(1, len(eligible)):.1f}% explained)")
    print(f"{model}: at the edges (torch, torchprof): {edge}")
    print(f"{model}: unexplained (torch, torchprof): {unequal}")
    check(len(eligible) >= 20, f"rows to compare: {len(eligible)}")
    check(len(equal) + len(edge) >= 0.95 * len(eligible),
          f"CPU Mem equal or unequal by edge records for {len(equal) + len(edge)} of {len(eligible)}: {unequal}")
    # The bytes allocated in the active steps. torch's own profiler allocates a little of
    # its own (the handles of its ProfilerStep ranges, outside any op): at most 1 KiB a step.
    bytes_theirs = theirs["allocated_bytes"]
    procs = [p for p in r.summary["memory"]["tensors"] if p["steps"]]
    check_eq(len(procs), 1, "one process with tensor memory")
    recorded = {s["index"] for s in r.summary["steps"] if s["action"] in ("record", "record_and_save")}
    allocated = sum(s["allocated_bytes"] for s in procs[0]["steps"] if s["index"] in recorded)
    print(f"{model}: bytes allocated in the active steps: torch {bytes_theirs}, torchprof {allocated}")
    check(abs(bytes_theirs - allocated) <= 1024 * (STEPS - 2),
          f"allocated bytes: torch {bytes_theirs}, torchprof {allocated}")
    check_eq(procs[0]["unpaired_frees"], 0, "every free paired with its allocation")
    return r


def resnet18():
    r = compare("resnet18")
    # The table: torch's columns, in torch's units.
    table = r.table
    header = next(l for l in table.splitlines() if "Name" in l and "# of Calls" in l)
    check(re.search(r"CPU time avg\s+CPU Mem\s+Self CPU Mem\s+# of Calls", header), f"header: {header}")
    check("CUDA Mem" not in header, "no CUDA Mem columns without CUDA memory")
    row = next(l for l in table.splitlines() if l.strip().startswith("aten::convolution_backward"))
    check(re.search(r"\s-?\d+\.\d\d (Kb|Mb|Gb)\s+-?\d+(\.\d\d (Kb|Mb|Gb)| b)\s+\d+\s*$", row), f"row: {row}")
    # [memory] instants in the traces: one per allocation and free of the recorded steps.
    events = tp.all_trace_events(r, ph="i")
    memory = [e for e in events if e["name"] == "[memory]"]
    check(memory, "[memory] events in the traces")
    for e in memory[:50]:
        check_eq(e["args"]["Device Type"], 0, "CPU tensors' device type")
        check_eq(e["args"]["Device Id"], -1, "CPU tensors' device id")
        check(e["args"]["Total Allocated"] >= 0 and e["args"]["Total Reserved"] >= e["args"]["Total Allocated"],
              f"totals of {e}")
    allocs = sum(e["args"]["Bytes"] for e in memory if e["args"]["Bytes"] > 0)
    check(allocs > 0, "allocations in the traces")
    # report.html: the CPU tensors' curve, its peak the summary's.
    with open(r.file("report.html"), encoding="utf-8") as f:
        page = f.read()
    data = json.loads(re.search(r'<script type="application/json" id="tp-data">(.*?)</script>', page,
                                  re.S).group(1))
    curves = [m for m in data["memory"] if m.get("label") == "CPU tensors"]
    check_eq(len(curves), 1, "one CPU tensor curve in report.html")
    check(max(p[1] for p in curves[0]["points"]) > 0, "the curve rises")
    # Sorted by torch's memory keys.
    out = os.path.join(tp.fresh_dir("rep"), "out")
    rep = tp.run_report([r.out_dir, "--sort", "self_cpu_memory_usage", "--row-limit", "3", "-o", out, "--table-only"])
    check_eq(rep.rc, 0, f"report --sort self_cpu_memory_usage: {rep.stderr_text[-500:]}")
    with open(os.path.join(out, "table.txt")) as f:
        sorted_table = f.read()
    best = max(rows_by_name(r.summary).items(), key=lambda kv: kv[1]["self"])[0]
    check(best in sorted_table.splitlines()[3], f"{best} first: {sorted_table[:600]}")


def transformer():
    compare("transformer")


def loop(mode, *options):
    r = run_py([LOOPS, mode, str(LOOP_STEPS)], options=["--profile-memory"] + list(options), timeout=300)
    return r, r.summary["memory"]["leak"]


def leak_append():
    r, leak = loop("append", "--advice")
    check(leak is not None, f"the leak is found: {json.dumps(r.summary['memory'])[:1500]}")
    check_eq(leak["bytes_per_step"], 4000, "bytes a step (1,000 floats)")
    check_eq(leak["ops"][0]["op"], "aten::empty", "the op that allocates what survives")
    check_eq(leak["ops"][0]["called_from"], "aten::randn", "the op around it")
    check_eq(leak["ops"][0]["bytes"], 4000 * leak["ops"][0]["allocations"], "4,000 bytes each")
    check(leak["ops"][0]["steps"] >= LOOP_STEPS - 2, f"made in every step: {leak['ops'][0]}")
    with open(os.path.join(r.out_dir, "advice.txt")) as f:
        text = f.read()
    check("Tensor memory grows by 4000 bytes" in text and "aten::empty (called from aten::randn)" in text,
          f"the finding in the advice: {text[-2000:]}")
    ids = [x["id"] for x in r.summary["overview"]["recommendations"]]
    check("memory_leak" in ids, f"the overview's recommendations: {ids}")


def leak_total():
    r, leak = loop("total")
    check(leak is not None, f"the leak is found: {json.dumps(r.summary['memory'])[:1500]}")
    check_eq(leak["bytes_per_step"], 2 * 32 * 64 * 4, "bytes a step (the graph's input and linear output)")
    ops = {(o["op"], o["called_from"]): o for o in leak["ops"]}
    check(("aten::addmm", "aten::linear") in ops and ("aten::empty", "aten::randn") in ops,
          f"the ops whose allocations the graph keeps: {list(ops)}")
    check_eq(ops[("aten::addmm", "aten::linear")]["bytes"], 8192 * ops[("aten::addmm", "aten::linear")]["allocations"],
             "the linear layer's outputs")


def steady():
    r, leak = loop("steady")
    check(leak is None, f"no leak in a steady loop: {leak}")
    steps = r.summary["memory"]["tensors"][0]["steps"]
    check_eq(len(steps), LOOP_STEPS, "a memory entry per step")
    check(all(s["peak_bytes"] >= max(s["start_bytes"], s["end_bytes"]) for s in steps), "peaks hold the ends")
    check(all(s["peak_op"] for s in steps), "the op at each step's peak")
    # The same at every boundary after the first step (the optimizer's first step).
    check_eq(len({s["start_bytes"] for s in steps[1:]}), 1, f"steady boundaries: {[s['start_bytes'] for s in steps]}")


def cache():
    r, leak = loop("cache")
    check(leak is None, f"a cache that fills, then holds, is no leak: {leak}")
    starts = [s["start_bytes"] for s in r.summary["memory"]["tensors"][0]["steps"]]
    check(starts[3] > starts[1] and starts[-1] == starts[4], f"it grows, then holds: {starts}")


def off():
    r = run_py([LOOPS, "append", "3"], options=["--pytorch-ops"], timeout=300)
    check("CPU Mem" not in r.table, "no memory columns without --profile-memory")
    check("tensors" not in r.summary["memory"] and "leak" not in r.summary["memory"], "no tensor memory")
    check(all("cpu_memory_usage" not in o for o in r.summary["ops"]), "no memory fields on the ops")
    plain = run_plain([LOOPS, "append", "3"])
    with_memory = run_py([LOOPS, "append", "3"], options=["--profile-memory"], timeout=300)
    check_eq(with_memory.stdout, plain.stdout, "the program's output with --profile-memory")


def fake_torch(keep, options=("--profile-memory",)):
    """tests/programs/fake_c10: 10 steps, each 4 KiB through c10::alloc_cpu and 1.5 MiB
    through the stand-in caching allocator (kept, a leak, when `keep`)."""
    r = tp.profile("fake_torch_loop", ["10", "4096", str(3 << 19), "1" if keep else "0"], options=list(options))
    # libc10's own function got every report: 10 blocks, all freed by the end.
    check_eq(r.stdout.decode().strip(), "reports 20 bytes 0", "the reports reached libc10's function")
    return r


def cuda_leak():
    r = fake_torch(keep=True)
    m = r.summary["memory"]
    leak = m["leak"]
    check(leak is not None and leak["device_type"] == "cuda", f"a CUDA leak: {json.dumps(m)[:1500]}")
    check_eq(leak["bytes_per_step"], 3 << 19, "bytes a step")
    check_eq([o["op"] for o in leak["ops"]], ["forward"], "the range that allocates what survives")
    frag = m["fragmentation"]
    check_eq(frag["allocated_bytes_at_peak"], 10 * (3 << 19), "allocated at the peak")
    check_eq(frag["reserved_bytes_at_peak"], 16 << 20, "reserved at the peak (2 MiB segments)")
    check_eq(frag["unused_reserved_bytes"], (16 << 20) - 10 * (3 << 19), "reserved beyond allocated")
    rows = {o["name"]: o for o in r.summary["ops"]}
    check_eq(rows["forward"]["self_cuda_memory_usage"], 10 * (3 << 19), "forward's Self CUDA Mem")
    check_eq(rows["forward"]["self_cpu_memory_usage"], 10 * 4096, "forward's Self CPU Mem")
    steps = [o for n, o in rows.items() if n.startswith("ProfilerStep")]
    check_eq(sum(o["self_cpu_memory_usage"] for o in steps), -10 * 4096, "the steps free the CPU bytes")
    check_eq(sum(o["cpu_memory_usage"] for o in steps), 0, "CPU Mem of the steps")
    header = next(l for l in r.table.splitlines() if "# of Calls" in l)
    check(re.search(r"CPU Mem\s+Self CPU Mem\s+CUDA Mem\s+Self CUDA Mem\s+# of Calls", header), f"header: {header}")
    fwd = next(l for l in r.table.splitlines() if l.strip().startswith("forward"))
    check("40.00 Kb" in fwd and "15.00 Mb" in fwd, f"forward's row: {fwd}")
    memory = [e for e in tp.all_trace_events(r, ph="i") if e["name"] == "[memory]" and e["args"]["Device Type"] == 1]
    check_eq(len(memory), 20, "CUDA [memory] events: 10 blocks and their frees")
    check_eq(max(e["args"]["Total Allocated"] for e in memory), 10 * (3 << 19), "Total Allocated as the allocator said")
    check_eq(max(e["args"]["Total Reserved"] for e in memory), 16 << 20, "Total Reserved as the allocator said")
    check_eq(sorted(e["args"]["Bytes"] for e in memory), [-(3 << 19)] * 10 + [3 << 19] * 10, "bytes of each")
    check_eq({e["args"]["Device Id"] for e in memory}, {0}, "device 0")


# The opcodes pytorch.org/memory_viz's own reader (torch/utils/viz/MemoryViz.js unpickle)
# takes; a pickle with any other does not open there.
VIZ_OPCODES = {"PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "SETITEMS", "SETITEM",
               "DICT", "LIST", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "APPEND", "APPENDS", "BININT", "BININT1",
               "BININT2", "LONG1", "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "SHORT_BINUNICODE", "BINUNICODE",
               "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET"}


def load_snapshot(r, name="memory_snapshot.pickle"):
    import pickle
    import pickletools
    with open(os.path.join(r.out_dir, name), "rb") as f:
        data = f.read()
    used = {op.name for op, _, _ in pickletools.genops(data)}
    check(used <= VIZ_OPCODES, f"opcodes memory_viz cannot read: {sorted(used - VIZ_OPCODES)}")
    return pickle.loads(data)


def replay(trace):
    """memory_viz's Active Memory Timeline: the bytes allocated after each entry, and the
    frees whose allocation is not in the trace (it shows those as allocated from the start)."""
    live, now, peak, unseen = {}, 0, 0, 0
    for e in trace:
        if e["action"] == "alloc":
            check(e["addr"] not in live, f"an address allocated twice without a free: {e}")
            live[e["addr"]] = e["size"]
            now += e["size"]
        elif e["action"] == "free_completed":
            if e["addr"] in live:
                check_eq(live.pop(e["addr"]), e["size"], f"the size freed at {e['addr']:#x}")
                now -= e["size"]
            else:
                unseen += 1
        peak = max(peak, now)
    return peak, now, unseen


def snapshot():
    """--memory-snapshot: the stand-in caching allocator's blocks in torch 2.x's snapshot
    format (torch.cuda.memory._snapshot(): segments, device_traces of dicts with action,
    addr, size, stream, time_us, frames of filename/line/name)."""
    r = fake_torch(keep=True, options=("--memory-snapshot",))
    check(f"memory snapshot in {r.out_dir}/memory_snapshot.pickle" in r.stderr_text, f"it names the file: {r.stderr_text}")
    snap = load_snapshot(r)
    check_eq(sorted(snap), ["device_traces", "segments"], "the snapshot's keys")
    check_eq(snap["segments"], [], "no segments: the allocator's reports name none")
    check_eq(len(snap["device_traces"]), 1, "one trace: device 0")
    trace = snap["device_traces"][0]
    check_eq([e["action"] for e in trace], ["alloc"] * 10 + ["free_completed"] * 10, "10 blocks kept, then freed")
    for e in trace:
        check_eq(sorted(e), ["action", "addr", "frames", "size", "stream", "time_us"], f"an entry's fields: {e}")
        check_eq(e["size"], 3 << 19, "a block's bytes")
        check_eq(e["stream"], 0, "the stream")
    times = [e["time_us"] for e in trace]
    check_eq(times, sorted(times), "entries in time order")
    check(abs(times[0] / 1e6 - __import__("time").time()) < 600, f"time_us in microseconds since the epoch: {times[0]}")
    for k, e in enumerate(trace[:10]):
        names = [(f["filename"], f["line"], f["name"]) for f in e["frames"]]
        check_eq(names, [("<range>", 0, "forward"), ("<range>", 0, f"ProfilerStep#{k}")], "the ranges open, innermost first")
    check(all(e["frames"] == [] for e in trace[10:]), "the frees after the loop: no range open")
    peak, end, unseen = replay(trace)
    frag = r.summary["memory"]["fragmentation"]
    check_eq(peak, frag["allocated_bytes_at_peak"], "the replayed peak is the allocator's")
    check_eq((end, unseen), (0, 0), "every block freed, every free paired")
    # Bounded: the last 5 entries are frees; nothing is live at the end to restore.
    small = fake_torch(keep=True, options=("--memory-snapshot", "--memory-snapshot-entries", "5"))
    trace = load_snapshot(small)["device_traces"][0]
    check_eq([e["action"] for e in trace], ["free_completed"] * 5, "the last 5 entries")
    check(any("15 older ones left out" in w for w in small.summary["warnings"]),
          f"the entries left out are counted: {small.summary['warnings']}")
    # CPU torch: nothing to write, and it says so; --memory-snapshot implies --profile-memory.
    cpu = run_py([LOOPS, "steady", "3"], options=["--memory-snapshot"], timeout=300)
    check(not os.path.exists(os.path.join(cpu.out_dir, "memory_snapshot.pickle")), "no snapshot without CUDA tensors")
    check("no CUDA tensor allocation was recorded" in cpu.stderr_text, f"it says why: {cpu.stderr_text[-800:]}")
    check("CPU Mem" in cpu.table, "--memory-snapshot records tensor memory")


def counters():
    """torch.cuda.memory_stats()'s num_alloc_retries and num_ooms, read by the bootstrap at
    exit (stand-ins on CPU torch: tests/programs/py/allocator_counters.py), in
    memory.fragmentation and the fragmentation recommendation."""
    r = run_py([COUNTERS, "3", "1"], options=["--profile-memory", "--advice"], timeout=300)
    check_eq(r.stdout.decode().strip(), "allocator_counters: done", "the program ran as without torchprof")
    frag = r.summary["memory"]["fragmentation"]
    check(frag is not None, f"fragmentation figures: {json.dumps(r.summary['memory'])[:800]}")
    check_eq((frag["alloc_retries"], frag["ooms"]), (3, 1), "retries and out-of-memory errors, summed over devices")
    check_eq(frag["allocated_bytes_at_peak"], None, "no CUDA tensor reports: the peak is unknown")
    recs = {x["id"]: x for x in r.summary["overview"]["recommendations"]}
    check("memory_fragmentation" in recs, f"the overview's recommendations: {sorted(recs)}")
    text = recs["memory_fragmentation"]["text"]
    check("retried cudaMalloc 3 times" in text and "ran out of memory 1 times" in text, f"its figures: {text}")
    with open(os.path.join(r.out_dir, "advice.txt")) as f:
        check("expandable_segments:True" in f.read(), "the advice says what to do")
    calm = run_py([COUNTERS, "0", "0"], options=["--profile-memory"], timeout=300)
    frag = calm.summary["memory"]["fragmentation"]
    check_eq((frag["alloc_retries"], frag["ooms"]), (0, 0), "no retries")
    ids = [x["id"] for x in calm.summary["overview"]["recommendations"]]
    check("memory_fragmentation" not in ids, f"no finding without evidence: {ids}")
    plain = run_py([COUNTERS, "3", "1"], options=["--pytorch-ops"], timeout=300)
    check("fragmentation" not in plain.summary["memory"], "nothing read without --profile-memory")


def cuda_steady():
    r = fake_torch(keep=False)
    check(r.summary["memory"]["leak"] is None, f"no leak: {r.summary['memory']['leak']}")
    plain = fake_torch(keep=False, options=())
    check("tensors" not in plain.summary["memory"], "nothing recorded without --profile-memory")


def torchprof(args):
    proc = subprocess.run([tp.bin_path("torchprof")] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=120)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def gates():
    leaking, _ = loop("append")
    steady_run, _ = loop("steady")
    rc, _, err = torchprof(["check", leaking.out_dir, "--max", "leak_bytes_per_step=0"])
    check_eq(rc, 1, f"a leak breaks leak_bytes_per_step=0: {err}")
    check("leak_bytes_per_step 3.91KB > 0" in err, f"the breach names its figure (4,000 bytes): {err}")
    rc, out, err = torchprof(["check", steady_run.out_dir, "--max", "leak_bytes_per_step=0", "--max", "peak_memory=1GB",
                              "--max", "op:aten::randn:cpu_memory_usage=1MB"])
    check_eq(rc, 0, f"a steady loop passes: {out} {err}")
    peak = max(p["peak_bytes"]["cpu"] for p in steady_run.summary["memory"]["tensors"])
    rc, _, err = torchprof(["check", steady_run.out_dir, "--max", f"peak_memory={peak - 1}B"])
    check_eq(rc, 1, f"peak_memory is the tensor peak ({peak} bytes): {err}")
    plain = run_py([LOOPS, "steady", "3"], options=["--pytorch-ops"], timeout=300)
    rc, _, err = torchprof(["check", plain.out_dir, "--max", "leak_bytes_per_step=0"])
    check_eq(rc, 2, f"no tensor memory recorded: an input error: {err}")
    check("--profile-memory" in err, f"the error says what to record: {err}")
    # diff by a memory column: the leaking run's aten::randn keeps what it allocates.
    rc, out, err = torchprof(["diff", steady_run.out_dir, leaking.out_dir, "--metric", "cpu_memory_usage",
                              "--format", "json"])
    check_eq(rc, 0, f"diff --metric cpu_memory_usage: {err}")
    d = json.loads(out)
    check_eq(d["unit"], "bytes", "the diff's unit")
    rows = {r["name"]: r for r in d["rows"]}
    check("aten::randn" in rows, f"aten::randn in the diff: {sorted(rows)[:20]}")
    check(rows["aten::randn"]["after"] > rows["aten::randn"]["before"], f"aten::randn keeps more: {rows['aten::randn']}")
    rc, _, err = torchprof(["diff", plain.out_dir, leaking.out_dir, "--metric", "cpu_memory_usage"])
    check_eq(rc, 2, f"a run without tensor memory cannot be compared by memory: {err}")


SCENARIOS = [resnet18, transformer, leak_append, leak_total, steady, cache, off, cuda_leak, cuda_steady, snapshot,
             counters, gates]

if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in SCENARIOS}))
