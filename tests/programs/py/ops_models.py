"""Training steps of a ResNet-18 (torchvision's, or the same architecture written out
here when torchvision is not installed) or a small transformer encoder, for comparing
torchprof's op table with torch.profiler's.

    ops_models.py MODEL STEPS [--torch-profiler OUT.json [--shapes] [--stacks] [--flops]] [--memory-profiler OUT.json]
                  [--thread] [--check-profiler]

--torch-profiler runs torch.profiler around the same steps (one ProfilerStep#k per
step) and writes, per step, the op names and calls, the (op, parent) pairs and the
threads of autograd nodes to OUT.json; with --shapes (record_shapes=True), also the
calls per (op name, input shapes) as torch's FunctionEvents list them; with --stacks
(with_stack=True), the calls per (op name, innermost frame of the program's); with --flops
(with_flops=True), the FLOPs per op name, summed over its FunctionEvents. --memory-profiler runs torch.profiler with
profile_memory=True and the schedule wait=1, warmup=1, active=STEPS-2, and writes each
op name's CPU Mem and Self CPU Mem over the active steps, the records its placing of them may have
moved (memory_edges), and the bytes allocated in them. --thread runs one more forward pass of a small
model on a second Python thread in every step. --check-profiler prints whether torch's
profiler reads as enabled inside a step.
"""

import bisect
import json
import sys
import threading

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18():
    try:
        import torchvision

        return torchvision.models.resnet18(num_classes=10)
    except ImportError:
        return ResNet18()


def make(model_name):
    if model_name == "resnet18":
        model = resnet18()
        data = torch.randn(2, 3, 64, 64)
        target = torch.randint(0, 10, (2,))
        loss_fn = nn.CrossEntropyLoss()
    else:
        layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=2), nn.Flatten(), nn.Linear(8 * 32, 4))
        data = torch.randn(4, 8, 32)
        target = torch.randint(0, 4, (4,))
        loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, data, target, loss_fn, opt


def side_work(done):
    lin = nn.Linear(16, 16)
    with torch.no_grad():
        lin(torch.randn(4, 16)).tanh()
    done.append(True)


def step(model, data, target, loss_fn, opt, with_thread, check):
    if check:
        print("profiler enabled inside a step:", torch.autograd._profiler_enabled())
    opt.zero_grad()
    loss = loss_fn(model(data), target)
    loss.backward()
    opt.step()
    if with_thread:
        done = []
        t = threading.Thread(target=side_work, args=(done,), name="side-thread")
        t.start()
        t.join()
    return float(loss)


def fwdbwd_links(prof, nodes):
    """(forward op, backward op) pairs as Kineto links them for torch's own trace
    (generateForwardBackwardLinks): ops in the order of their ends; a forward op keyed by
    (its thread, sequence number), the latest started holding the key; a backward op by
    (its forward thread, sequence number), taking the key's op and freeing the key."""
    fwd_tid = {e.correlation_id(): e.fwd_thread_id() for e in prof.profiler.kineto_results.events()}
    ops = [n for n in nodes if getattr(n.extra_fields, "sequence_number", -1) >= 0]
    ops.sort(key=lambda n: n.end_time_ns)
    held, links = {}, []
    for n in ops:
        seq, fwd = n.extra_fields.sequence_number, fwd_tid.get(n.correlation_id, 0)
        if fwd > 0:
            f = held.pop((fwd, seq), None)
            if f is not None:
                links.append((f, n))
        elif n.start_tid != 0:
            key = (n.start_tid, seq)
            if key not in held or n.start_time_ns >= held[key].start_time_ns:
                held[key] = n
    return links


def rows_per_step(prof, key_of):
    """Per ProfilerStep#k: {"name\tkey_of(event)": calls} over torch's FunctionEvents
    (which name every step "ProfilerStep*"). Their microsecond times are fine for this:
    a step is long."""
    events = list(prof.events())
    steps = sorted((e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start)
    out = []
    for s in steps:
        lo, hi = s.time_range.start, s.time_range.end
        rows = {}
        for e in events:
            if e.name.startswith("ProfilerStep") or not (lo <= e.time_range.start and e.time_range.end <= hi):
                continue
            key = e.name + "\t" + key_of(e)
            rows[key] = rows.get(key, 0) + 1
        out.append(rows)
    return out


def input_types(prof):
    """{"name\tshapes": sorted distinct dtype lists} over the whole run, from Kineto's own
    events (KinetoEvent.dtypes(), what its trace writes as "Input type"); None where this
    torch has no Kineto (Debian's 1.13)."""
    results = getattr(prof.profiler, "kineto_results", None)
    if results is None:
        return None
    out = {}
    for e in results.events():
        if not hasattr(e, "dtypes") or not e.shapes():
            continue
        key = e.name() + "\t" + json.dumps(list(e.shapes()))
        types = json.dumps(list(e.dtypes()))
        out.setdefault(key, set()).add(types)
    return {k: sorted(v) for k, v in out.items()}


def flops_per_step(prof):
    """Per ProfilerStep#k: {name: FLOPs} summed over torch's FunctionEvents in the step
    (what key_averages() adds up per name), for the names with FLOPs."""
    events = list(prof.events())
    steps = sorted((e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start)
    out = []
    for s in steps:
        lo, hi = s.time_range.start, s.time_range.end
        rows = {}
        for e in events:
            if e.flops and lo <= e.time_range.start and e.time_range.end <= hi:
                rows[e.name] = rows.get(e.name, 0) + e.flops
        out.append(rows)
    return out


def innermost_program_frame(stack):
    """The first "file(line): function" of a torch stack that is not torch's own (torch
    writes its files as "torch/..."), the file as its base name; "" when there is none."""
    for entry in stack:
        head, sep, func = entry.partition("): ")
        if not sep or "(" not in head or head.startswith(("torch/", "<")):
            continue
        path, _, line = head.rpartition("(")
        return "%s(%s): %s" % (path.rsplit("/", 1)[-1], line, func)
    return ""


def summarize(prof):
    """Per ProfilerStep#k: {name: calls}, {"name\tparent": calls}, autograd node threads,
    {"forward\tbackward": links} of the fwdbwd flows whose backward op starts in the step.

    Parents come from torch's own event tree (experimental_event_tree(), built from the
    order of each op's begin and end in nanoseconds); the FunctionEvents' cpu_parent is
    rebuilt from microsecond times, which cannot nest ops shorter than a microsecond."""
    nodes = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        n = stack.pop()
        nodes.append(n)
        stack.extend(n.children)
    steps = sorted((n for n in nodes if n.name.startswith("ProfilerStep#")), key=lambda n: n.start_time_ns)
    links = fwdbwd_links(prof, nodes)
    out = []
    for s in steps:
        lo, hi = s.start_time_ns, s.end_time_ns
        names, pairs, threads = {}, {}, {}
        for n in nodes:
            if n.name.startswith("ProfilerStep#") or not (lo <= n.start_time_ns and n.end_time_ns <= hi):
                continue
            names[n.name] = names.get(n.name, 0) + 1
            parent = n.parent.name if n.parent is not None else ""
            if parent.startswith("ProfilerStep#"):
                parent = ""
            key = n.name + "\t" + parent
            pairs[key] = pairs.get(key, 0) + 1
            if "Backward" in n.name or n.name.startswith("autograd::engine::evaluate_function"):
                threads[n.name] = n.start_tid
        flows = {}
        for f, b in links:
            if lo <= b.start_time_ns <= hi:
                key = f.name + "\t" + b.name
                flows[key] = flows.get(key, 0) + 1
        out.append({"names": names, "pairs": pairs, "threads": threads, "flows": flows})
    return {"steps": out, "main_thread": threading.get_native_id()}


def memory_edges(prof, ops):
    """Where torch's placing of [memory] records differs from their order on the op's
    thread (how torchprof places them), per op name, into `ops`.

    torch counts a record for every op whose closed interval holds the record's time, on
    any thread (other_threads: the bytes of other threads' records it counted).
    - torch 1.13 keeps whole microseconds, an op's end its start plus its truncated
      duration. A record on the op's thread in the interval's first or last microsecond
      may have been made before or after the op (edge_in, counted by torch), and one in
      the microsecond after it inside the op (edge_out, not counted).
    - torch 2.x keeps nanoseconds, but compares them after a round trip through float
      microseconds (start_ns() / 1000 * 1000), which moves the interval's edges by up to
      the float's spacing (0.25 µs at today's epoch time). Records it counted that lie
      outside the op, and records inside that it did not, are known: `correction` is the
      bytes to add to torch's value for them. A record at an edge's very nanosecond is
      an edge_in or edge_out record."""
    result = prof.profiler.kineto_results
    records = [e for e in result.events() if e.name() == "[memory]" and int(e.device_type()) == 0]
    fine = hasattr(result, "trace_start_ns")
    if fine:
        start = result.trace_start_ns()
        times = [e.start_ns() for e in records]
    else:
        start = result.trace_start_us()
        times = [e.start_us() for e in records]
    order = sorted(range(len(records)), key=lambda i: times[i])
    sorted_times = [times[i] for i in order]
    for fe in prof.profiler.function_events:
        row = ops.get(fe.key)
        if row is None or fe.name == "[memory]" or fe.name.startswith("ProfilerStep"):
            continue
        if fine:
            lo, hi = start + round(fe.time_range.start * 1000), start + round(fe.time_range.end * 1000)
            counted_lo, counted_hi = lo / 1000 * 1000, hi / 1000 * 1000
            margin = 2000
        else:
            lo, hi = start + fe.time_range.start, start + fe.time_range.end
            counted_lo, counted_hi = lo, hi
            margin = 1
        for k in range(bisect.bisect_left(sorted_times, lo - margin),
                       bisect.bisect_right(sorted_times, hi + margin)):
            rec, t = records[order[k]], sorted_times[k]
            counted = counted_lo <= t <= counted_hi
            if rec.start_thread_id() != fe.thread:
                row["other_threads"] += rec.nbytes() if counted else 0
            elif fine:
                if t == lo or t == hi:
                    row["edge_in" if counted else "edge_out"].append(rec.nbytes())
                elif counted != (lo < t < hi):
                    row["correction"] += rec.nbytes() if not counted else -rec.nbytes()
            elif counted and (t == lo or t == hi):
                row["edge_in"].append(rec.nbytes())
            elif not counted and t == hi + 1:
                row["edge_out"].append(rec.nbytes())


def main():
    model_name = sys.argv[1]
    steps = int(sys.argv[2])
    args = sys.argv[3:]
    with_thread = "--thread" in args
    check = "--check-profiler" in args
    model, data, target, loss_fn, opt = make(model_name)
    if "--torch-profiler" in args:
        out = args[args.index("--torch-profiler") + 1]
        from torch.profiler import ProfilerActivity, profile, schedule

        # A schedule, so that torch marks each step with a ProfilerStep#k range.
        shapes = "--shapes" in args
        stacks = "--stacks" in args
        flops = "--flops" in args
        with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes, with_stack=stacks, with_flops=flops,
                     schedule=schedule(wait=0, warmup=0, active=steps, repeat=1)) as prof:
            for _ in range(steps):
                step(model, data, target, loss_fn, opt, with_thread, check)
                prof.step()
        result = summarize(prof)
        if shapes:
            result["shapes"] = rows_per_step(prof, lambda e: json.dumps(e.input_shapes))
            result["types"] = input_types(prof)
        if flops:
            result["flops"] = flops_per_step(prof)
        if stacks:
            result["stacks"] = rows_per_step(prof, lambda e: innermost_program_frame(e.stack or []))
        with open(out, "w") as f:
            json.dump(result, f)
    elif "--memory-profiler" in args:
        out = args[args.index("--memory-profiler") + 1]
        from torch.profiler import ProfilerActivity, profile, schedule

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                     schedule=schedule(wait=1, warmup=1, active=steps - 2, repeat=1)) as prof:
            for _ in range(steps):
                step(model, data, target, loss_fn, opt, with_thread, check)
                prof.step()
        ops = {}
        for avg in prof.key_averages():
            ops[avg.key] = {"cpu_memory_usage": avg.cpu_memory_usage,
                            "self_cpu_memory_usage": avg.self_cpu_memory_usage, "count": avg.count,
                            "edge_in": [], "edge_out": [], "other_threads": 0, "correction": 0}
        memory_edges(prof, ops)
        allocated = sum(e.nbytes() for e in prof.profiler.kineto_results.events()
                        if e.name() == "[memory]" and e.nbytes() > 0)
        with open(out, "w") as f:
            json.dump({"ops": ops, "allocated_bytes": allocated}, f)
    else:
        for _ in range(steps):
            step(model, data, target, loss_fn, opt, with_thread, check)
    print("done", model_name, steps)


if __name__ == "__main__":
    main()
