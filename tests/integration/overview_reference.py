"""A second, separate computation of the overview's step time breakdown and GPU idle
split, from a Kineto trace (JSON) rather than from torchprof's analysed model, to check
analysis/overview.cpp against. Stdlib only; times in integer nanoseconds (a trace's
`ts`/`dur` are microseconds with three decimals, read exactly as decimals).

Definitions, from the sources the overview follows:

- Events: those of the steps, as torchprof assigns them (CPU events by start time, GPU
  ops by their launching call), which is what torchprof's trace of the steps holds.
- Steps: `ProfilerStep#N` events (cat `user_annotation` or `cpu_op`), widened as the
  TensorBoard profiler plugin widens them (event_parser.py, _find_device_steps and
  _update_steps_duration): a step's GPU work is what the `cuda_runtime` calls lying wholly
  inside its host interval launched (same `correlation`); the first step starts no
  earlier than the end of GPU work launched outside any step that ends before the first
  step's own GPU work; each step starts at max(its host start, the previous step's end)
  and ends at max(its host end, its GPU work's end). The plugin's removal of trailing
  steps (for kernels a profiler may have missed) is not done.
- Breakdown (overall_parser.py): the moments of the steps go, in this order, to kernel
  (`kernel`), memcpy (`gpu_memcpy`), memset (`gpu_memset`), CUDA runtime (`cuda_runtime`),
  DataLoader (`enumerate(DataLoader)#...` / `enumerate(DataPipe)#...` ranges), CPU exec
  (other `cpu_op`, `user_annotation` and `python` events; step events excluded) and
  other (the rest). The plugin's communication part (NCCL kernels) is not split off, and
  `gpu_user_annotation` events are left out (torchprof records none).
- GPU idle (HolisticTraceAnalysis, breakdown_analysis.py, _analyze_idle_time_for_stream):
  GPU ops are `kernel`, `gpu_memcpy`, `gpu_memset` events; an op's launch is the start
  of the CPU event with its correlation (`cuda_runtime` or `cuda_driver`). A gap before
  an op is host wait when the op was launched after the gap began, else kernel wait when
  shorter than 30 µs (HTA's consecutive_kernel_delay), else other. `stream_idle` is
  HTA's split per stream; `device_idle` applies the rule to each device's gaps (no GPU op
  on any of its streams) clipped to each step, a gap with no op after it being host wait.
"""

import decimal
import gzip
import json

KERNEL_WAIT_NS = 30_000
PARTS = ("kernel", "memcpy", "memset", "cuda_runtime", "dataloader", "cpu_exec", "other")
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
CPU_RANGE_CATS = ("cpu_op", "user_annotation", "python")
INF = float("inf")


def load_trace(path):
    """A trace file (.json or .json.gz), numbers with a fraction read as Decimal."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"), parse_float=decimal.Decimal)


def ns(us):
    return int((decimal.Decimal(us) * 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def _span(e):
    start = ns(e["ts"])
    return start, start + ns(e.get("dur", 0))


def is_dataloader(name):
    return name.startswith("enumerate(DataLoader)#") or name.startswith("enumerate(DataPipe)#")


def is_step(e):
    return e.get("cat") in ("user_annotation", "cpu_op") and e.get("name", "").startswith("ProfilerStep#")


# --- intervals: lists of (start, end), sorted and disjoint once merged ---

def merge(intervals):
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b):
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > s:
                out.append((s, b[k][0]))
            s = max(s, b[k][1])
            k += 1
        if s < e:
            out.append((s, e))
    return out


def length_within(merged, s, e):
    return sum(min(e, b) - max(s, a) for a, b in merged if a < e and b > s)


class Trace:
    """The events of one trace the computations need."""

    def __init__(self, trace):
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        self.steps = sorted(_span(e) for e in events if is_step(e))
        if not self.steps:
            # No step markers: the profiled span is one step (the "Trace" event Kineto and
            # torchprof write around a cycle, "PyTorch Profiler (0)").
            self.steps = sorted(_span(e) for e in events if e.get("cat") == "Trace")[:1]
        self.gpu = []  # (kind, start, end, device, stream, correlation)
        self.cpu_by_corr = {}  # correlation -> (start, end, cat)
        self.ranges = []  # (name, start, end)
        self.runtime = []
        for e in events:
            cat = e.get("cat")
            args = e.get("args") or {}
            if cat in GPU_CATS:
                s, t = _span(e)
                self.gpu.append((GPU_CATS[cat], s, t, args.get("device", e.get("pid")), args.get("stream"),
                                 args.get("correlation")))
            elif cat in ("cuda_runtime", "cuda_driver"):
                s, t = _span(e)
                if "correlation" in args:
                    self.cpu_by_corr[args["correlation"]] = (s, t, cat)
                if cat == "cuda_runtime":
                    self.runtime.append((s, t))
            elif cat in CPU_RANGE_CATS and not is_step(e):
                self.ranges.append((e.get("name", ""),) + _span(e))
        self.gpu.sort(key=lambda g: g[1])
        if self.steps:
            self._keep_steps_events()

    def _in_step(self, t):
        return any(hs <= t <= he for hs, he in self.steps)

    def _keep_steps_events(self):
        """Only what belongs to a step, as torchprof (and HTA's iterations) assign it: CPU
        events by their start, GPU ops by the CPU call that launched them (else by start)."""
        self.ranges = [r for r in self.ranges if self._in_step(r[1])]
        self.runtime = [r for r in self.runtime if self._in_step(r[0])]

        def kept(g):
            cpu = self.cpu_by_corr.get(g[5])
            return self._in_step(cpu[0] if cpu is not None else g[1])
        self.gpu = [g for g in self.gpu if kept(g)]

    def launch(self, g):
        cpu = self.cpu_by_corr.get(g[5])
        return cpu[0] if cpu is not None else None

    def widened_steps(self):
        host = self.steps
        if not host:
            return []
        dev = [None] * len(host)
        matched = set()
        for i, g in enumerate(self.gpu):
            cpu = self.cpu_by_corr.get(g[5])
            if cpu is None or cpu[2] != "cuda_runtime":
                continue
            for k, (hs, he) in enumerate(host):
                if hs <= cpu[0] and cpu[1] <= he:
                    lo, hi = dev[k] or (g[1], g[2])
                    dev[k] = (min(lo, g[1]), max(hi, g[2]))
                    matched.add(i)
                    break
        if not matched:
            return list(host)
        prev_end = host[0][0]
        if dev[0] is not None:
            for i, g in enumerate(self.gpu):
                if i not in matched and g[2] < dev[0][0]:
                    prev_end = max(prev_end, g[2])
        out = []
        for k, (hs, he) in enumerate(host):
            start = max(prev_end, hs)
            end = max(he, start) if dev[k] is None else max(he, dev[k][1], start)
            out.append((start, end))
            prev_end = end
        return out

    def breakdown(self):
        """[{"start_ns", "dur_ns", "<part>_ns"...}] per step."""
        steps = self.widened_steps()
        roles = [merge([(s, e) for kind, s, e, *_ in self.gpu if kind == part]) for part in ("kernel", "memcpy", "memset")]
        roles.append(merge(self.runtime))
        roles.append(merge([(s, e) for name, s, e in self.ranges if is_dataloader(name)]))
        roles.append(merge([(s, e) for name, s, e in self.ranges if not is_dataloader(name)]))
        slots = merge(steps)
        parts = []
        for role in roles:
            part = intersect(role, slots)
            parts.append(part)
            slots = subtract(slots, part)
        parts.append(slots)
        out = []
        for s, e in steps:
            row = {"start_ns": s, "dur_ns": e - s}
            for name, part in zip(PARTS, parts):
                row[name + "_ns"] = length_within(part, s, e)
            out.append(row)
        return out

    def _classify(self, gap_start, gap_end, launch):
        if gap_end == INF:
            return "host_wait_ns"
        if launch is not None and launch > gap_start:
            return "host_wait_ns"
        if gap_start != -INF and gap_end - gap_start < KERNEL_WAIT_NS:
            return "kernel_wait_ns"
        return "other_ns"

    def device_idle(self):
        """{device: [{"busy_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"} per step]}."""
        steps = self.widened_steps()
        out = {}
        for device in sorted({g[3] for g in self.gpu}):
            blocks = []  # [start, end, earliest launch among the ops starting the block]
            for g in self.gpu:
                if g[3] != device:
                    continue
                launch = self.launch(g)
                if not blocks or g[1] > blocks[-1][1]:
                    blocks.append([g[1], g[2], launch])
                    continue
                b = blocks[-1]
                b[1] = max(b[1], g[2])
                if g[1] == b[0] and launch is not None and (b[2] is None or launch < b[2]):
                    b[2] = launch
            rows = []
            edges = [-INF] + [x for b in blocks for x in (b[0], b[1])] + [INF]
            for s, e in steps:
                row = {"host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0}
                for i in range(len(blocks) + 1):
                    gap_start, gap_end = edges[2 * i], edges[2 * i + 1]
                    lo, hi = max(s, gap_start), min(e, gap_end)
                    if lo < hi:
                        launch = blocks[i][2] if i < len(blocks) else None
                        row[self._classify(gap_start, gap_end, launch)] += int(hi - lo)
                row["busy_ns"] = (e - s) - row["host_wait_ns"] - row["kernel_wait_ns"] - row["other_ns"]
                rows.append(row)
            out[device] = rows
        return out

    def stream_idle(self):
        """HTA's split: {(device, stream): {"host_wait_ns", "kernel_wait_ns", "other_ns"}}."""
        by_stream = {}
        for g in self.gpu:
            by_stream.setdefault((g[3], g[4]), []).append(g)
        out = {}
        for key, ops in sorted(by_stream.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
            split = {"host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0}
            for prev, op in zip(ops, ops[1:]):
                gap = op[1] - prev[2]
                launch = self.launch(op)
                if launch is not None and launch > prev[2]:
                    split["host_wait_ns"] += gap
                elif gap < KERNEL_WAIT_NS:
                    split["kernel_wait_ns"] += gap
                else:
                    split["other_ns"] += gap
            out[key] = split
        return out
