"""The overview's second computation (overview_reference.py, from a Kineto trace) on
hand-built traces with worked figures, then against torchprof's own overview
(summary.json) on the fake-GPU workloads built for it, where both must agree to the
nanosecond, and on the real traces of tests/fixtures/kineto_real/ (the breakdown and
idle split computed there; test_kineto_replay compares torchprof's overview of each
replayed trace with this computation on the trace torchprof wrote).

Needs TP_FAKE_CUPTI_LIB (or the built fake) besides tp.py's variables."""

import glob
import os

import overview_reference as ref
import test_gpu_fake
import tp
from tp import check, check_eq


def x(name, cat, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def gpu(name, cat, ts, dur, corr, stream=7):
    return x(name, cat, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr)


# The worked example of tests/unit/overview_test.cpp, as Kineto writes it (µs).
WORKED = {"traceEvents": [
    x("ProfilerStep#0", "user_annotation", 0, 100),
    x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", 0, 30),
    x("forward", "cpu_op", 30, 60),
    x("cudaLaunchKernel", "cuda_runtime", 40, 5, correlation=1),
    x("cudaMemcpyAsync", "cuda_runtime", 60, 2, correlation=2),
    x("cudaMemsetAsync", "cuda_runtime", 62, 1, correlation=3),
    x("ProfilerStep#1", "user_annotation", 100, 100),
    x("forward", "cpu_op", 110, 40),
    x("cudaLaunchKernel", "cuda_runtime", 120, 5, correlation=4),
    x("cudaLaunchKernel", "cuda_runtime", 126, 1, correlation=5),
    gpu("k1", "kernel", 50, 20, 1),
    gpu("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 65, 15, 2, stream=8),
    gpu("Memset (Device)", "gpu_memset", 88, 7, 3),
    gpu("k2", "kernel", 130, 20, 4),
    gpu("k3", "kernel", 190, 40, 5),
    {"ph": "s", "cat": "ac2g", "id": 1, "ts": 40, "pid": 1, "tid": 1},
]}

US = 1000


def worked():
    t = ref.Trace(WORKED)
    steps = t.breakdown()
    check_eq([(s["start_ns"], s["dur_ns"]) for s in steps], [(0, 100 * US), (100 * US, 130 * US)],
             "widened steps (step 1 ends with k3 at 230 µs)")
    want0 = {"kernel": 20, "memcpy": 10, "memset": 7, "cuda_runtime": 5, "dataloader": 30, "cpu_exec": 23, "other": 5}
    want1 = {"kernel": 60, "memcpy": 0, "memset": 0, "cuda_runtime": 6, "dataloader": 0, "cpu_exec": 14, "other": 50}
    for got, want in ((steps[0], want0), (steps[1], want1)):
        check_eq({p: got[p + "_ns"] // US for p in ref.PARTS}, want, "breakdown (µs)")
        check_eq(sum(got[p + "_ns"] for p in ref.PARTS), got["dur_ns"], "parts sum to the step")
    idle = t.device_idle()[0]
    check_eq([(r["host_wait_ns"] // US, r["kernel_wait_ns"] // US, r["other_ns"] // US, r["busy_ns"] // US) for r in idle],
             [(55, 8, 0, 37), (30, 0, 40, 60)], "device idle per step (host, kernel, other, busy in µs)")
    streams = t.stream_idle()
    check_eq({k: {n: v // US for n, v in split.items()} for k, split in streams.items()},
             {(0, 7): {"host_wait_ns": 35, "kernel_wait_ns": 18, "other_ns": 40},
              (0, 8): {"host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0}}, "HTA's split per stream (µs)")


def no_gpu():
    """CPU only: steps keep their host interval; ranges are CPU exec, the rest other."""
    t = ref.Trace({"traceEvents": [x("ProfilerStep#0", "user_annotation", 0, 10), x("op", "cpu_op", 2, 3),
                                   x("ProfilerStep#1", "user_annotation", 10, 10)]})
    steps = t.breakdown()
    check_eq([(s["dur_ns"], s["cpu_exec_ns"], s["other_ns"]) for s in steps], [(10 * US, 3 * US, 7 * US),
                                                                                (10 * US, 0, 10 * US)], "steps")
    check_eq(t.device_idle(), {}, "no device")


def compare_with_torchprof(scenario):
    result = test_gpu_fake.run_workload(scenario)
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    check_overview_against_trace(result)


def check_overview_against_trace(result):
    """summary.json's overview equals the reference computed on the run's own trace (one
    process, one cycle), to the nanosecond. Returns the number of steps compared."""
    overview = result.summary["overview"]
    traces = sorted(glob.glob(os.path.join(result.out_dir, "traces", "*.pt.trace.json*")))
    check_eq(len(traces), 1, "trace files")
    t = ref.Trace(ref.load_trace(traces[0]))
    base = ref.load_trace(traces[0])["baseTimeNanoseconds"]
    mine = overview["breakdown"]["steps"]
    theirs = t.breakdown()
    check_eq(len(theirs), len(mine), "steps")
    for a, b in zip(mine, theirs):
        check_eq(a["start_ns"] - base, b["start_ns"], f"start of {a['name']}")
        for key in ["dur_ns"] + [p + "_ns" for p in ref.PARTS]:
            check_eq(a[key], b[key], f"{key} of {a['name']} (summary.json against the reference on the trace)")
    idle = t.device_idle()
    for d in overview["devices"]:
        for a, b in zip(d["steps"], idle[d["device"]]):
            for key in ("busy_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"):
                check_eq(a[key], b[key], f"{key} of GPU {d['device']} in step {a['index']}")
        streams = t.stream_idle()
        for s in d["streams"]:
            want = streams[(d["device"], s["stream"])]
            check_eq({k: s[k] for k in want}, want, f"HTA's split of stream {s['stream']}")
    return len(mine)


def fake_workloads():
    for scenario in ("loader", "tiny", "syncstep", "pageable", "steps"):
        compare_with_torchprof(scenario)


def check_real(paths):
    for path in paths:
        t = ref.Trace(ref.load_trace(path))
        steps = t.breakdown()
        for s in steps:
            check_eq(sum(s[p + "_ns"] for p in ref.PARTS), s["dur_ns"], f"{path}: parts of a step")
        for device, rows in t.device_idle().items():
            for r, s in zip(rows, steps):
                check(0 <= r["busy_ns"] <= s["dur_ns"], f"{path}: GPU {device} busy within the step")
        total = sum(s["dur_ns"] for s in steps) or 1
        shares = {p: round(100 * sum(s[p + "_ns"] for s in steps) / total, 1) for p in ref.PARTS}
        print(f"{os.path.basename(path)}: {len(steps)} steps, {shares}")


def real_traces():
    """The reference on the small real torch.profiler traces: every step's parts sum to
    it, the idle split fits in it; the figures are printed for the comparison to come."""
    check_real([tp.fixture("kineto_real/sampled_rank0.json.gz")])
    t = ref.Trace(ref.load_trace(tp.fixture("kineto_real/sampled_rank0.json.gz")))
    check_eq(len(t.breakdown()), 2, "ProfilerStep#551 and #552 in the sampled trace")
    check_eq(sorted(t.stream_idle()), [(0, 7), (0, 23), (0, 25), (0, 84), (0, 203)], "its five streams")


def real_traces_all():
    """Every real trace, the two 100k-event ResNet ones included (~10 s of CPU: not in
    ctest). Run by hand: python3 test_overview_reference.py real_traces_all"""
    check_real(sorted(glob.glob(tp.fixture("kineto_real/*.json.gz"))))
    resnet = ref.Trace(ref.load_trace(tp.fixture("kineto_real/resnet_a100_control.json.gz")))
    steps = resnet.breakdown()
    check_eq(len(steps), 6, "ProfilerStep#1009..1014 in the A100 ResNet trace")
    check(sum(s["dataloader_ns"] for s in steps) > 0, "its DataLoader ranges count")


SCENARIOS = {"worked": worked, "no_gpu": no_gpu, "fake_workloads": fake_workloads, "real_traces": real_traces,
             "real_traces_all": real_traces_all}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
