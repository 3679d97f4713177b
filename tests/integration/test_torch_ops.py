"""PyTorch ops through torch's RecordFunction callbacks (inject/torch_observer.cpp,
python/torchprof/_torch_ops.py), compared with torch's own profiler run on the same
script and steps (tests/programs/py/ops_models.py), on Debian's CPU torch 1.13.

torch.profiler runs in a plain run of the program (no torchprof) and writes, per
ProfilerStep#k, its op names and calls and (op, parent) pairs; the torchprof run's
traces give the same for its ProfilerStep#k (one per optimizer.step()). A middle step
of each is compared: its boundaries differ by where the step ends (torch's after the
loss is read, torchprof's at the end of optimizer.step()), which moves no op between
the middle steps' counts."""

import decimal
import glob
import gzip
import json
import math
import os
import stat

import tp
from tp import check, check_eq
from test_python import clean_env, run_plain, run_py, script

PROGRAM = script("ops_models.py")
STEPS = 4
MIDDLE = 2


def cache_env(**extra):
    cache = tp.fresh_dir("cache")
    return cache, clean_env(XDG_CACHE_HOME=cache, **extra)


def torch_view(model, *extra):
    out = os.path.join(tp.fresh_dir("torch"), "torch.json")
    plain = run_plain([PROGRAM, model, str(STEPS), "--torch-profiler", out] + list(extra), timeout=600)
    check_eq(plain.returncode, 0, f"plain run of {model} with torch.profiler: {plain.stderr.decode()[-2000:]}")
    with open(out) as f:
        return json.load(f)


def exact_events(result, flows=None):
    """X events of every trace with ts and dur as integer nanoseconds: floats would lose
    them (microseconds since the epoch with three decimals need 19 digits). `flows`, a
    list, gets each trace's fwdbwd flows as (forward X event, backward X event)."""
    out = []
    for path in sorted(glob.glob(os.path.join(result.out_dir, "traces", "*.pt.trace.json*"))):
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        at, ends = {}, {}
        for ev in json.loads(data.decode("utf-8"), parse_float=decimal.Decimal).get("traceEvents", []):
            if ev.get("ph") == "X":
                ev["start"] = int(decimal.Decimal(ev["ts"]) * 1000)
                ev["end"] = ev["start"] + int(decimal.Decimal(ev["dur"]) * 1000)
                out.append(ev)
                if ev.get("cat") == "cpu_op":
                    at.setdefault((ev["tid"], ev["start"]), ev)
            elif ev.get("cat") == "fwdbwd" and ev.get("ph") in ("s", "f"):
                ends.setdefault(ev["id"], {})[ev["ph"]] = (ev["tid"], int(decimal.Decimal(ev["ts"]) * 1000))
        if flows is not None:
            for flow_id, pair in ends.items():
                check(set(pair) == {"s", "f"}, f"fwdbwd flow {flow_id} has both ends")
                fwd, bwd = at.get(pair["s"]), at.get(pair["f"])
                check(fwd is not None and bwd is not None, f"fwdbwd flow {flow_id}'s ends sit on ops: {pair}")
                flows.append((fwd, bwd))
    return out


def nest(events):
    """(event, parent event or None) for X events of one thread, nested by their times."""
    out = []
    stack = []
    for ev in sorted(events, key=lambda e: (e["start"], -e["end"])):
        while stack and not (ev["start"] >= stack[-1]["start"] and ev["end"] <= stack[-1]["end"]):
            stack.pop()
        out.append((ev, stack[-1] if stack else None))
        stack.append(ev)
    return out


def torchprof_view(result):
    """Per ProfilerStep#k: names -> calls, 'op\\tparent' -> calls, name -> tids."""
    links = []
    events = exact_events(result, links)
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["start"])
    by_tid = {}
    for ev in events:
        if ev.get("cat") in ("cpu_op", "user_annotation") and not ev["name"].startswith("ProfilerStep#"):
            by_tid.setdefault((ev["pid"], ev["tid"]), []).append(ev)
    nested = [pair for evs in by_tid.values() for pair in nest(evs)]
    out = []
    for s in steps:
        names, pairs, tids = {}, {}, {}
        for ev, parent in nested:
            if not (s["start"] <= ev["start"] and ev["end"] <= s["end"]):
                continue
            names[ev["name"]] = names.get(ev["name"], 0) + 1
            key = ev["name"] + "\t" + (parent["name"] if parent is not None else "")
            pairs[key] = pairs.get(key, 0) + 1
            tids.setdefault(ev["name"], set()).add(ev["tid"])
        flows = {}
        for fwd, bwd in links:
            if s["start"] <= bwd["start"] <= s["end"]:
                key = fwd["name"] + "\t" + bwd["name"]
                flows[key] = flows.get(key, 0) + 1
        out.append({"names": names, "pairs": pairs, "tids": tids, "flows": flows})
    return out


def compare(model, *extra):
    torch_steps = torch_view(model, *extra)["steps"]
    check_eq(len(torch_steps), STEPS, "torch.profiler's steps")
    cache, env = cache_env()
    r = run_py([PROGRAM, model, str(STEPS), "--check-profiler"] + list(extra), options=["--pytorch-ops"], env=env,
               timeout=600)
    check("ops through torch's RecordFunction callbacks are off" not in r.stderr_text,
          f"the observer was used: {r.stderr_text[-1500:]}")
    check_eq(r.stdout.decode().count("profiler enabled inside a step: False"), STEPS,
             "torch's profiler is off inside every step of a torchprof run")
    ours_steps = torchprof_view(r)
    check(len(ours_steps) >= MIDDLE + 1, f"torchprof's steps: {len(ours_steps)}")
    theirs, ours = torch_steps[MIDDLE], ours_steps[MIDDLE]
    # Every step runs the same ops: a count torch gives differently in the steps beside
    # this one is its own profiler's noise (torch 1.13 records some ops twice or not at
    # all, a different one each run), and that name or pair is not compared.
    beside = [torch_steps[k] for k in (MIDDLE - 1, MIDDLE + 1) if 0 < k < len(torch_steps)]
    noisy_names = {n for n, c in theirs["names"].items() if any(b["names"].get(n) != c for b in beside)}
    noisy_pairs = {k for k, c in theirs["pairs"].items() if any(b["pairs"].get(k) != c for b in beside)}
    names = {n: c for n, c in theirs["names"].items() if n not in noisy_names}
    missing = sorted(n for n in theirs["names"] if n not in ours["names"])
    check(not missing, f"op names torch lists that torchprof's step lacks: {missing}")
    equal = [n for n in names if ours["names"].get(n) == names[n]]
    share = len(equal) / len(names)
    unequal = {n: (names[n], ours["names"].get(n)) for n in names if n not in equal}
    print(f"{model}: {len(names)} names, {len(equal)} with equal calls ({100 * share:.1f}%); "
          f"torch {sum(names.values())} calls, torchprof {sum(ours['names'].values())}; unequal {unequal}; "
          f"not compared, torch's steps disagree: {sorted(noisy_names)}")
    check(len(noisy_names) <= 2, f"torch's own steps disagree on {sorted(noisy_names)}")
    check(share >= 0.98, f"names with equal calls: {100 * share:.1f}% < 98%: {unequal}")
    pairs = {k: c for k, c in theirs["pairs"].items() if k not in noisy_pairs}
    same = sum(min(c, ours["pairs"].get(k, 0)) for k, c in pairs.items())
    total = sum(pairs.values())
    worst = sorted(((c - ours["pairs"].get(k, 0), k) for k, c in pairs.items() if ours["pairs"].get(k, 0) != c),
                   reverse=True)[:8]
    print(f"{model}: (op, parent) pairs equal for {same} of {total} calls ({100 * same / total:.1f}%); worst {worst}; "
          f"not compared: {sorted(noisy_pairs)}")
    check(same / total >= 0.98, f"(op, parent) calls equal: {100 * same / total:.1f}% < 98%: {worst}")
    # fwdbwd flows: each forward op linked to the backward op torch links it to.
    flows = theirs["flows"]
    check(flows, "torch links forward ops to backward ops")
    linked = sum(min(c, ours["flows"].get(k, 0)) for k, c in flows.items())
    wrong = sorted((k, c, ours["flows"].get(k, 0)) for k, c in flows.items() if ours["flows"].get(k, 0) != c)[:8]
    extra = sorted(k for k in ours["flows"] if k not in flows)[:8]
    print(f"{model}: fwdbwd flows: torch {sum(flows.values())}, torchprof {sum(ours['flows'].values())}, "
          f"equal {linked}; unequal {wrong}; only torchprof's {extra}")
    check(linked == sum(flows.values()) == sum(ours["flows"].values()),
          f"fwdbwd flows differ from torch's: unequal {wrong}, only torchprof's {extra}")
    # Autograd nodes and evaluate_function rows, on the thread torch runs them on (on a
    # CPU build the thread that called backward(): the main thread).
    nodes = [n for n in names if n.endswith("Backward0") or n.startswith("autograd::engine::evaluate_function")]
    check(nodes, "torch lists autograd nodes")
    main = tp.processes_with_events(r.summary)[0]["pid"]
    for n in nodes:
        check_eq(ours["tids"].get(n), {main}, f"threads of {n}")
    events = tp.all_trace_events(r, ph="X", cat="cpu_op")
    with_seq = [e for e in events if "Sequence number" in e["args"]]
    check(with_seq, "ops with sequence numbers")
    check(all(e["args"]["Record function id"] > 0 for e in events), "every op has its Record function id")
    check_eq(len({e["args"]["Record function id"] for e in events}), len(events), "Record function ids are unique")
    fwd = {e["args"]["Sequence number"] for e in with_seq if not e["name"].endswith("Backward0")}
    bwd = {e["args"]["Sequence number"] for e in with_seq if e["name"].endswith("Backward0")}
    check(bwd and bwd <= fwd, "every autograd node's sequence number is a forward op's")
    verdicts = os.listdir(os.path.join(cache, "torchprof"))
    check_eq(len(verdicts), 1, "one cached verdict")
    path = os.path.join(cache, "torchprof", verdicts[0])
    with open(path) as f:
        check_eq(f.read().strip(), "ok", "the trial's verdict")
    check_eq(stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode), 0o700, "the cache directory is private")
    return r


def compare_shapes(model):
    """--record-shapes on the observer's path: the table's calls per (op, input shapes)
    for a middle step (--schedule, --group-by-input-shape), against the calls per (op,
    input shapes) of torch.profiler(record_shapes=True)'s FunctionEvents in the same
    step of the same script: the rows key_averages(group_by_input_shape=True) sums."""
    view = torch_view(model, "--shapes")
    theirs = view["shapes"][MIDDLE]
    cache, env = cache_env()
    r = run_py([PROGRAM, model, str(STEPS)], env=env, timeout=600,
               options=["--record-shapes", "--group-by-input-shape", "--schedule", f"wait={MIDDLE},warmup=0,active=1"])
    check("ops through torch's RecordFunction callbacks are off" not in r.stderr_text,
          f"the observer was used: {r.stderr_text[-1500:]}")
    ours = {}
    for row in r.summary["ops"]:
        if row.get("kind") in ("cpu_op", "user_annotation") and not row["name"].startswith("ProfilerStep"):
            key = row["name"] + "\t" + row.get("input_shapes", "?")
            ours[key] = ours.get(key, 0) + row["calls"]
    missing = sorted(k for k in theirs if k not in ours)
    equal = [k for k in theirs if ours.get(k) == theirs[k]]
    unequal = {k: (theirs[k], ours.get(k)) for k in theirs if k not in equal}
    only_ours = sorted(set(ours) - set(theirs))
    print(f"{model}: {len(theirs)} (op, shapes) rows, {len(equal)} with equal calls "
          f"({100 * len(equal) / len(theirs):.1f}%); only torchprof's {only_ours[:10]}; unequal {unequal}")
    check(not missing, f"(op, shapes) rows torch lists that torchprof's step lacks: {missing[:10]}")
    check(not only_ours, f"(op, shapes) rows torch does not list: {only_ours[:10]}")
    check(len(equal) / len(theirs) >= 0.98, f"(op, shapes) rows with equal calls < 98%: {unequal}")
    # Input type: each input's dtype, on every op with Input Dims, one per input.
    typed = {}
    for e in tp.all_trace_events(r, ph="X", cat="cpu_op"):
        dims = e["args"].get("Input Dims")
        if not dims:
            continue
        types = e["args"].get("Input type")
        check(isinstance(types, list) and len(types) == len(dims), f"Input type beside Input Dims: {e}")
        typed.setdefault(e["name"] + "\t" + json.dumps(dims), set()).add(json.dumps(types))
    addmm = [k for k in typed if k.startswith("aten::addmm\t")]
    check(addmm and all(json.loads(t)[:3] == ["float"] * 3 for k in addmm for t in typed[k]),
          f"aten::addmm's tensors are float: {[typed[k] for k in addmm]}")
    if view.get("types") is not None:  # torch with Kineto: its own Input type, per (op, shapes)
        kineto = view["types"]
        common = [k for k in typed if k in kineto]
        same = [k for k in common if sorted(typed[k]) == kineto[k]]
        print(f"{model}: Input type equal to Kineto's for {len(same)} of {len(common)} (op, shapes) keys")
        check(common and len(same) / len(common) >= 0.98,
              f"Input type unlike Kineto's: {[(k, sorted(typed[k]), kineto[k]) for k in common if k not in same][:5]}")


def compare_flops(model):
    """--with-flops: the table's FLOPs per op name for a middle step, against
    torch.profiler(with_flops=True)'s on the same step of the same script, which the
    running torch computes (computeFlops) from each op's inputs: the convs' strides,
    paddings and groups as well as their shapes. Equal per name, every name torch counts;
    the table's column as torch scales it."""
    theirs = torch_view(model, "--flops")["flops"][MIDDLE]
    check(theirs, f"torch counted FLOPs on {model}")
    cache, env = cache_env()
    r = run_py([PROGRAM, model, str(STEPS)], env=env, timeout=600,
               options=["--with-flops", "--schedule", f"wait={MIDDLE},warmup=0,active=1"])
    check("RecordFunction callbacks are off" not in r.stderr_text and "no FLOP counts" not in r.stderr_text,
          f"the observer gave FLOPs: {r.stderr_text[-1500:]}")
    ours = {}
    for row in r.summary["ops"]:
        if row.get("flops"):
            ours[row["name"]] = ours.get(row["name"], 0) + row["flops"]
    print(f"{model}: FLOPs per op, torch {theirs}, torchprof {ours}")
    check_eq(ours, theirs, "FLOPs per op name in the step")
    smallest = min(theirs.values())
    unit = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"][int(max(0, min(math.log10(smallest) / 3, 5)))]
    with open(os.path.join(r.out_dir, "table.txt")) as f:
        table = f.read()
    check(f"Total {unit}" in table, f"the column is Total {unit}: {table[:600]}")
    scale = 10 ** (-3 * int(max(0, min(math.log10(smallest) / 3, 5))))
    for name, flops in theirs.items():
        cell = "{0:8.3f}".format(flops * scale).strip()
        line = next((l for l in table.splitlines() if l.strip().startswith(name + " ")), "")
        check(line.rstrip().endswith(cell), f"{name}'s row ends with {cell}: {line!r}")


def flops_resnet18():
    compare_flops("resnet18")


def flops_transformer():
    compare_flops("transformer")


def compare_stacks(model):
    """--with-stack on the observer's path: the table's calls per (op, innermost frame of
    the program's) for a middle step, against torch.profiler(with_stack=True)'s in the
    same step of the same script: file, line and function of that frame. (Not on
    ResNet-18: torch 1.13 puts its backward ops under the frame of a Block's forward,
    which has returned by then; 792 of 1,280 calls there agree.)"""
    theirs = torch_view(model, "--stacks")["stacks"][MIDDLE]
    cache, env = cache_env()
    r = run_py([PROGRAM, model, str(STEPS)], env=env, timeout=600,
               options=["--with-stack", "--schedule", f"wait={MIDDLE},warmup=0,active=1"])
    check("ops through torch's RecordFunction callbacks are off" not in r.stderr_text,
          f"the observer was used: {r.stderr_text[-1500:]}")
    ours = {}
    for row in r.summary["ops"]:
        if row.get("kind") in ("cpu_op", "user_annotation") and not row["name"].startswith("ProfilerStep"):
            stack = row.get("stack") or []
            frame = ""
            if stack:
                head, _, func = stack[0].partition("): ")
                frame = "%s): %s" % (head.rsplit("/", 1)[-1], func)
            key = row["name"] + "\t" + frame
            ours[key] = ours.get(key, 0) + row["calls"]
    # Calls torch gave no frame (torch 1.13: AccumulateGrad and the ops it runs) say nothing
    # of where they were: torchprof gives them the frame of the backward() call. So a row
    # torch gave a frame is equal when torchprof has its calls, or more by at most torch's
    # frameless calls of that op; torch's frameless rows themselves are not compared.
    frameless = {k.split("\t", 1)[0]: c for k, c in theirs.items() if k.endswith("\t")}
    compared = [k for k in theirs if not k.endswith("\t")]
    equal = [k for k in compared if ours.get(k) == theirs[k]]
    moved = [k for k in compared if k not in equal
             and theirs[k] < ours.get(k, 0) <= theirs[k] + frameless.get(k.split("\t", 1)[0], 0)]
    calls = sum(theirs.values())
    same = sum(min(c, ours.get(k, 0)) for k, c in theirs.items())
    unequal = sorted(((theirs[k], ours.get(k, 0), k) for k in compared if k not in equal and k not in moved),
                     reverse=True)[:8]
    share = (len(equal) + len(moved)) / len(compared)
    print(f"{model}: {len(theirs)} (op, frame) rows, {len(compared)} with a frame in torch's; {len(equal)} with equal "
          f"calls, {len(moved)} more by torch's frameless calls of the op {moved} ({100 * share:.1f}%); torch's "
          f"frameless {frameless}; {same} of {calls} calls at the same frame; unequal {unequal}; "
          f"only torchprof's {sorted(set(ours) - set(theirs))[:6]}")
    check(share >= 0.95, f"(op, frame) rows with equal calls < 95%: {unequal}")


def resnet18():
    compare("resnet18")


def transformer():
    compare("transformer")


def second_thread():
    cache, env = cache_env()
    r = run_py([PROGRAM, "transformer", "3", "--thread"], options=["--pytorch-ops"], env=env, timeout=600)
    main = tp.processes_with_events(r.summary)[0]["pid"]
    events = tp.all_trace_events(r, ph="X", cat="cpu_op")
    tanh = [e for e in events if e["name"] == "aten::tanh"]
    # One per step, run after its optimizer step: the last one may lie after the last step.
    check(len(tanh) >= 2, f"aten::tanh calls on the second thread: {len(tanh)}")
    check(all(e["tid"] != main for e in tanh), "the second thread's ops are on its own thread")
    check(any(e["name"] == "aten::linear" and e["tid"] == tanh[0]["tid"] for e in events),
          "aten::linear on the second thread")
    check_eq(len({e["tid"] for e in tanh}), len(tanh), "each step's second thread is a thread of its own")


def stacks_on_threads():
    """--with-stack on the observer's path: each op's stack is its own thread's frames
    (the second thread's aten::tanh in side_work, the main thread's aten::linear and
    autograd nodes in step, each at its function's first line as torch.profiler shows
    frames entered while it profiles), and torch's own frames are left out."""
    cache, env = cache_env()
    r = run_py([PROGRAM, "transformer", "3", "--thread"], options=["--with-stack"], env=env, timeout=600)
    check("RecordFunction callbacks are off" not in r.stderr_text, f"the observer was used: {r.stderr_text[-1500:]}")
    with open(PROGRAM) as f:
        lines = f.read().splitlines()
    tanh_line = next(i for i, t in enumerate(lines, 1) if t.startswith("def side_work("))
    model_line = next(i for i, t in enumerate(lines, 1) if t.startswith("def step("))
    events = tp.all_trace_events(r, ph="X", cat="cpu_op")
    main = tp.processes_with_events(r.summary)[0]["pid"]
    tanh = [e for e in events if e["name"] == "aten::tanh"]
    check(len(tanh) >= 2, f"aten::tanh calls on the second thread: {len(tanh)}")
    for e in tanh:
        check(e["tid"] != main, "aten::tanh on its own thread")
        check(e["args"].get("Call stack", "").startswith(f"{PROGRAM}({tanh_line}): side_work;"),
              f"aten::tanh's stack is the second thread's: {e['args'].get('Call stack')!r}")
    first = [e for e in events if e["name"] == "aten::linear" and e["tid"] == main]
    check(first, "aten::linear on the main thread")
    check(any(e["args"].get("Call stack", "").startswith(f"{PROGRAM}({model_line}): step;") for e in first),
          f"the model's aten::linear calls are in step: {first[0]['args'].get('Call stack')!r}")
    stacks = [e["args"]["Call stack"] for e in events if "Call stack" in e["args"]]
    # The bootstrap's directory (<build>/share/torchprof/python), not any path that happens
    # to hold "torchprof" (a checkout in a directory of that name).
    bootstrap = os.path.join(os.path.dirname(os.path.normpath(os.environ["TP_BIN_DIR"])), "share", "torchprof")
    check(stacks and not any("torch/nn/" in st or bootstrap in st for st in stacks),
          "torch's and torchprof's own frames are left out")
    # Autograd nodes run inside loss.backward(): torch's stacks give them step's frame too.
    nodes = [e for e in events if e["name"].endswith("Backward0") and e["tid"] == main]
    check(nodes and all(e["args"].get("Call stack", "").startswith(f"{PROGRAM}({model_line}): step;") for e in nodes),
          "autograd nodes have the stack of the backward() call")


def fallback(layout, expect):
    args = [PROGRAM, "transformer", "2"]
    plain = run_plain(args, timeout=600)
    cache, env = cache_env(TORCHPROF_TORCH_LAYOUT=layout)
    r = run_py(args, options=["--pytorch-ops"], env=env, timeout=600)
    check_eq(r.stdout, plain.stdout, "stdout with and without torchprof")
    lines = [l for l in r.stderr_text.splitlines() if "RecordFunction callbacks are off" in l]
    check_eq(len(lines), 1, f"one line says why: {r.stderr_text[-1500:]}")
    check(expect in lines[0], f"{expect!r} in {lines[0]!r}")
    check("dispatch-mode capture" in lines[0], f"the fallback is named: {lines[0]!r}")
    # The dispatch mode's ops (flat, below autograd) are there instead.
    rows = {o["name"]: o["calls"] for o in r.summary["ops"] if o.get("kind") == "cpu_op"}
    check(rows.get("aten::addmm", 0) > 0, f"the fallback recorded ops: {sorted(rows)[:20]}")
    check("aten::linear" not in rows, "no composite ops: the fallback path ran")
    return r, cache


def unknown_version():
    fallback("9.99", "torch 9.99 is not in the op observer's table")


def wrong_layout():
    _, cache = fallback("test-wrong-layout", "scope")
    verdicts = os.listdir(os.path.join(cache, "torchprof"))
    with open(os.path.join(cache, "torchprof", verdicts[0])) as f:
        check(f.read().startswith("fail "), "the failed verdict is cached")


def stacks_transformer():
    compare_stacks("transformer")


def shapes_resnet18():
    compare_shapes("resnet18")


def shapes_transformer():
    compare_shapes("transformer")


def no_shapes():
    """A torch whose callbacks give ops but no input shapes (a layout that never asks torch
    for the inputs): --pytorch-ops keeps the observer, --record-shapes takes the older
    path for shapes, with one line saying why, the program's output unchanged."""
    args = [PROGRAM, "transformer", "2"]
    plain = run_plain(args, timeout=600)
    cache, env = cache_env(TORCHPROF_TORCH_LAYOUT="test-no-shapes")
    ops = run_py(args, options=["--pytorch-ops"], env=env, timeout=600)
    check("RecordFunction callbacks are off" not in ops.stderr_text, f"ops through the observer: {ops.stderr_text[-1500:]}")
    rows = {o["name"] for o in ops.summary["ops"] if o.get("kind") == "cpu_op"}
    check("aten::linear" in rows, "composite ops: the observer recorded them")
    verdicts = os.listdir(os.path.join(cache, "torchprof"))
    with open(os.path.join(cache, "torchprof", verdicts[0])) as f:
        verdict = f.read().strip()
    check(verdict.startswith("ok no-shapes ") and "[]" in verdict, f"the cached verdict: {verdict!r}")
    r = run_py(args, options=["--group-by-input-shape"], env=env, timeout=600)
    check_eq(r.stdout, plain.stdout, "stdout with and without torchprof")
    lines = [l for l in r.stderr_text.splitlines() if "RecordFunction callbacks are off" in l]
    check_eq(len(lines), 1, f"one line says why: {r.stderr_text[-1500:]}")
    check("no input shapes: aten::mm's input shapes read as []" in lines[0], f"the reason: {lines[0]!r}")
    check("dispatch-mode capture" in lines[0], f"the fallback is named: {lines[0]!r}")
    shapes = {o.get("input_shapes") for o in r.summary["ops"] if o.get("name") == "aten::addmm"}
    check(shapes and None not in shapes, f"aten::addmm rows carry input shapes from the fallback: {shapes}")


def gpu_time_on_ops(api="callbacks"):
    """An op that calls the CUDA runtime, as a CUDA build's ops do (ops_gpu.py: a
    torch.library op whose CPU kernel calls cudaMemset, inside record_function), on the
    drop-in libcudart.so.13 over the fake libcupti: the memset's GPU time lands on the op
    the observer recorded (Self CUDA) and on every range around it (CUDA total), through
    the correlation id of the runtime call made inside it, as on a GPU. The drop-in
    runtime's rule: a set of B bytes lasts 1 us + B/100 ns."""
    import test_gpu_fake as gf

    steps = 4
    set_ns = sum(1000 + 1000 * (k + 1) // 100 for k in range(steps))
    cache, env = cache_env()
    gf.drop_in_runtime(env)
    env["TORCHPROF_CUDA_API"] = api
    r = run_py([script("ops_gpu.py"), str(steps)], options=["--pytorch-ops"], env=env, timeout=300)
    check("RecordFunction callbacks are off" not in r.stderr_text, f"the observer was used: {r.stderr_text[-1500:]}")
    check_eq(r.stdout.decode().count("cudaMemset 0 bytes"), steps, f"the sets succeeded: {r.stdout.decode()}")
    check_eq({p.get("cuda_api") for p in tp.processes_with_events(r.summary)}, {api}, "where the API calls came from")
    rows = {(o["kind"], o["name"]): o for o in r.summary["ops"]}
    fill = rows.get(("cpu_op", "tp_gpu::fill"))
    check(fill is not None, f"the op is a row: {sorted(rows)}")
    check_eq(fill["calls"], steps, "calls of tp_gpu::fill")
    gf.check_cuda(fill["self_cuda_ns"], set_ns, "Self CUDA of tp_gpu::fill")
    section = rows.get(("cpu_op", "gpu_section"))
    check(section is not None, "record_function's range is a row")
    check_eq(section["self_cuda_ns"], 0, "Self CUDA of gpu_section (its op holds the set)")
    gf.check_cuda(section["cuda_total_ns"], set_ns, "CUDA total of gpu_section")
    memsets = gf.ops_of_kind(r.summary, "memset")
    check_eq(sum(m["calls"] for m in memsets), steps, "memsets counted")
    check_eq(rows.get(("cuda_api", "cudaMemset"), {}).get("calls"), steps, f"cudaMemset calls ({sorted(rows)})")
    check("no recorded launching" not in r.stderr_text, r.stderr_text[-1500:])
    # In the trace: the runtime call inside the op on the same thread, and the set's
    # External id that of the op, as Kineto links them.
    ops = [e for e in tp.all_trace_events(r, ph="X", cat="cpu_op") if e["name"] == "tp_gpu::fill"]
    calls = [e for e in tp.all_trace_events(r, ph="X", cat="cuda_runtime") if e["name"] == "cudaMemset"]
    sets = tp.all_trace_events(r, ph="X", cat="gpu_memset")
    check_eq((len(ops), len(calls), len(sets)), (steps, steps, steps), "ops, runtime calls and sets in the trace")
    for call in calls:
        around = [o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"]
                  and call["ts"] + call["dur"] <= o["ts"] + o["dur"]]
        check_eq(len(around), 1, f"cudaMemset at {call['ts']} lies inside one tp_gpu::fill")
    op_ids = {o["args"].get("External id") for o in ops}
    check({e["args"].get("External id") for e in sets} <= op_ids and None not in op_ids,
          f"each set's External id is its op's: {[e['args'].get('External id') for e in sets]} in {op_ids}")


def gpu_time_on_ops_activity():
    """The same, with the runtime call from CUPTI's RUNTIME activity record, placed inside
    the op by time (TORCHPROF_CUDA_API=activity)."""
    gpu_time_on_ops(api="activity")


SCENARIOS = [resnet18, transformer, shapes_resnet18, shapes_transformer, stacks_transformer,
             second_thread, stacks_on_threads, gpu_time_on_ops, gpu_time_on_ops_activity,
             unknown_version, wrong_layout, no_shapes, flops_resnet18, flops_transformer]

if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in SCENARIOS}))
