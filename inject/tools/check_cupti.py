#!/usr/bin/env python3
"""GPU tracing of libtorchprof_inject.so through the fake libcupti, end to end.

Runs tests/fake_cupti's gpu_workload (which calls our InitializeInjection the way
the CUDA driver does) under mini_collector and compares the records with the
workload's own expectations (gpu_workload --expect): every kernel exactly once
with its duration, stream and correlation id; each GPU record's correlation id
names an API record on the launching thread, inside the expected NVTX range and
on the same clock; memcpy/memset bytes; allocations and frees; the device
record; CUPTI's dropped count; the profiler records. Then the failure modes:
no driver (FAKE_CUPTI_FAIL=unknown), subscriber taken, wrong CUPTI version —
each one notice line, NVTX still recorded, exit code unchanged. Last, a program
linked against the real libcudart (no driver here) keeps its exit code and NVTX.

Usage: check_cupti.py LIB WORKLOAD FAKE_CUPTI [CUDART_PROGRAM]   (exit 0 = all passed)
"""
import collections, json, os, subprocess, sys, tempfile, threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mini_collector as mc  # noqa: E402

FAILURES = []
SCENARIOS = ["nested", "steps", "streams", "memory", "graph", "drops", "driver", "blocking"]
LAUNCH_LATENCY_NS = 5000
CONVERSION_SLACK_NS = 2000
CPY = {"htod": 1, "dtoh": 2, "dtod": 8, "ptop": 10}


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
    return cond


def run(lib, argv, extra_env=None, connections=1):
    sock = os.path.join(tempfile.mkdtemp(prefix="tpcupti"), "s")
    args = mc.parse_args([sock, "--connections", str(connections), "--timeout", "30", "--gpu"])
    args.print = False
    srv = mc.listen(sock)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", mc.collect(srv, args)))
    t.start()
    env = dict(os.environ, LD_PRELOAD=lib, NVTX_INJECTION64_PATH=lib, CUDA_INJECTION64_PATH=lib,
               TORCHPROF_LIB=lib, TORCHPROF_SOCKET=sock)
    env.update(extra_env or {})
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    t.join()
    srv.close()
    return proc, sorted(out.get("r", []), key=lambda r: r["hello"]["pid"])


def accounting_ok(r):
    ok = r["bye"] is not None and r["records"] + r["bye"]["dropped"] == r["bye"]["emitted"]
    for th in r["threads"].values():
        d = th["last_dropped"]
        ok = ok and d is not None and th["heads"] + d[0] == d[1]
    return ok


def innermost_range(r, tid, ts):
    """Name of the innermost NVTX push/pop range open on `tid` at `ts`."""
    stack = []
    for t, k, ets, name in r["stack_events"]:
        if t != tid or ets > ts:
            continue
        if k == "push":
            stack.append(name)
        elif stack:
            stack.pop()
    return stack[-1] if stack else None


def by_kind(r):
    g = collections.defaultdict(list)
    for rec in r["gpu"]:
        g[rec["kind"]].append(rec)
    return g


def check_kernels(g, exp, r):
    apis = {rec["b"]: rec for rec in g["cuda_runtime"] + g["cuda_driver"]}
    got = sorted((k["name"], k["a"] - k["ts"], k["stream"], k["graph_id"] or None) for k in g["kernel"])
    want = sorted((k["name"], k["dur_ns"], k["stream"], k["graph_id"]) for k in exp["kernels"])
    check(got == want, f"kernels: each exactly once with duration/stream/graph\n  got  {got}\n  want {want}")
    for k in g["kernel"]:
        api = apis.get(k["b"])
        if not check(api is not None, f"kernel {k['name']} corr {k['b']}: no API record with that correlation id"):
            continue
        # GPU times reach our clock when CUPTI delivers their buffer, by a conversion that
        # may be off by a little (as CUPTI's own); a wrong clock would be off by far more.
        check(api["tid"] != k["tid"] and api["ts"] - CONVERSION_SLACK_NS <= k["queued"] <= api["a"] + CONVERSION_SLACK_NS,
              f"kernel {k['name']}: queued {k['queued']} within its API call [{api['ts']}, {api['a']}] (one clock)")
        check(k["ts"] >= api["ts"] + LAUNCH_LATENCY_NS - CONVERSION_SLACK_NS,
              f"kernel {k['name']}: starts after its launch + latency")
    ranges = sorted((k["name"], innermost_range(r, apis[k["b"]]["tid"], apis[k["b"]]["ts"]))
                    for k in g["kernel"] if k["b"] in apis)
    check(ranges == sorted((k["name"], k["range"]) for k in exp["kernels"]), f"kernels: launching ranges {ranges}")
    check(all(k["domain"] == exp["device"]["id"] and k["context"] == exp["device"]["context"] for k in g["kernel"]),
          "kernels: device and context")


def check_copies(g, exp):
    got = sorted((m["bytes"], m["a"] - m["ts"], m["stream"], m["copy_kind"]) for m in g["memcpy"])
    want = sorted((m["bytes"], m["dur_ns"], m["stream"], CPY[m["kind"]]) for m in exp["memcpys"])
    check(got == want, f"memcpy bytes/duration/stream/kind: {got} vs {want}")
    got = sorted((m["bytes"], m["a"] - m["ts"], m["stream"]) for m in g["memset"])
    want = sorted((m["bytes"], m["dur_ns"], m["stream"]) for m in exp["memsets"])
    check(got == want, f"memset bytes/duration/stream: {got} vs {want}")


def check_memory(g, exp):
    api_corr = {rec["b"]: rec["name"] for rec in g["cuda_runtime"]}
    live = peak = 0
    for m in sorted(g["memory"], key=lambda m: m["ts"]):
        live += m["b"] if m["operation"] == 1 else -m["b"]
        peak = max(peak, live)
        want_api = "cudaMalloc" if m["operation"] == 1 else "cudaFree"
        check(api_corr.get(m["correlation"]) == want_api, f"memory record {m}: correlation names {want_api}")
    ops = collections.Counter(m["operation"] for m in g["memory"])
    mem = exp["memory"]
    check((ops[1], ops[2], peak, live) == (mem["allocations"], mem["frees"], mem["peak_bytes"], mem["final_bytes"]),
          f"memory: allocs/frees/peak/final {ops[1]} {ops[2]} {peak} {live} vs {mem}")


def check_device_and_api(g, exp):
    devs = g["device"]
    check(len(devs) == 1 and devs[0]["name"] == exp["device"]["name"] and devs[0]["num_sms"] == 132 and
          devs[0]["warp_size"] == 32 and devs[0]["total_global_mem"] == 150754820096 and
          (devs[0]["compute_major"], devs[0]["compute_minor"]) == (9, 0) and
          devs[0]["max_threads_per_multiprocessor"] == 2048, f"device record: {devs}")
    calls = collections.Counter(rec["name"] for rec in g["cuda_runtime"] + g["cuda_driver"])
    want = collections.Counter(exp["api_calls"])
    check(calls == want, f"API calls by name: {dict(calls)} vs {dict(want)}")
    check(all(rec["a"] >= rec["ts"] > 0 for rec in g["cuda_runtime"]), "API records: enter <= exit")
    drops = [rec["a"] for rec in g["gpu_dropped"]]
    check(drops and drops[-1] == exp["dropped"] and drops == sorted(drops), f"CUPTI dropped (cumulative): {drops}")
    syncs = calls["cudaDeviceSynchronize"] + calls["cudaStreamSynchronize"]
    check(len(g["sync"]) == syncs and all(s["b"] in {r["b"] for r in g["cuda_runtime"]} for s in g["sync"]),
          f"sync records: {len(g['sync'])} for {syncs} sync calls, correlated")


def check_full(lib, workload, fake, env=None):
    exp_file = os.path.join(tempfile.mkdtemp(prefix="tpcupti"), "expect.json")
    proc, rs = run(lib, [workload, "--expect", exp_file] + SCENARIOS, dict(env or {}, TORCHPROF_CUPTI_LIB=fake))
    check(proc.returncode == 0 and "torchprof" not in proc.stderr, f"full: rc {proc.returncode}, {proc.stderr!r}")
    if not check(len(rs) == 1, "full: one connection"):
        return
    r = rs[0]
    exp = json.load(open(exp_file))
    g = by_kind(r)
    check(accounting_ok(r) and r["bye"]["dropped"] == 0 and r["seq_gaps"] == 0, "full: accounting, no loss")
    check(r["unresolved_names"] == 0, "full: every name id resolved")
    gpu_tids = {rec["tid"] for rec in g["kernel"] + g["memcpy"] + g["device"]}
    check(gpu_tids == {r["hello"]["pid"] | 0x40000000}, f"full: GPU stream tid is pid|0x40000000: {gpu_tids}")
    check_kernels(g, exp, r)
    check_copies(g, exp)
    check_memory(g, exp)
    check_device_and_api(g, exp)
    check(not g["gpu_notice"], "full: no notice")


def check_profiler(lib, workload, fake):
    proc, rs = run(lib, [workload, "kernel:_Z1av:10us ; profiler_stop ; kernel:_Z1bv:10us ; device_reset"],
                   {"TORCHPROF_CUPTI_LIB": fake})
    g = by_kind(rs[0]) if rs else {}
    check(proc.returncode == 0 and [p["a"] for p in g.get("cuda_profiler", [])] == [0],
          "profiler: one kCudaProfiler(stop) record")
    check(len(g.get("kernel", [])) == 2, "profiler: kernels before and after the stop delivered")


def check_off(lib, workload, fake, env, expect_in_notice, what):
    proc, rs = run(lib, [workload, "nested"], dict(env, TORCHPROF_CUPTI_LIB=fake))
    lines = [line for line in proc.stderr.splitlines() if line.startswith("torchprof:")]
    check(proc.returncode == 0, f"{what}: exit code {proc.returncode}")
    check(len(lines) == 1 and "GPU tracing off:" in lines[0] and expect_in_notice in lines[0],
          f"{what}: exactly one notice line, got {lines}")
    if not check(len(rs) == 1, f"{what}: one connection"):
        return
    g = by_kind(rs[0])
    check(rs[0]["names"].get("push:train") == 1 and rs[0]["names"].get("push:inner") == 1, f"{what}: NVTX recorded")
    check(not g["kernel"] and not g["cuda_runtime"], f"{what}: no GPU/API records")
    notes = [n["name"] for n in g["gpu_notice"]]
    check(len(notes) == 1 and "GPU tracing off" in notes[0] and accounting_ok(rs[0]),
          f"{what}: kGpuNotice record {notes}")


def check_trace_filter(lib, workload, fake):
    proc, rs = run(lib, [workload, "nested"], {"TORCHPROF_CUPTI_LIB": fake, "TORCHPROF_TRACE": "nvtx"})
    g = by_kind(rs[0]) if rs else {}
    check(proc.returncode == 0 and rs and not g.get("kernel") and not g.get("cuda_runtime") and
          rs[0]["names"].get("push:train") == 1, "TORCHPROF_TRACE=nvtx: no CUDA/GPU records, NVTX kept")
    proc, rs = run(lib, [workload, "nested"], {"TORCHPROF_CUPTI_LIB": fake, "TORCHPROF_TRACE": "nvtx,gpu"})
    g = by_kind(rs[0]) if rs else {}
    check(rs and len(g.get("kernel", [])) == 4 and not g.get("cuda_runtime"), "TORCHPROF_TRACE=nvtx,gpu: kernels only")


EXIT_PROGRAM = """
import ctypes, os, sys
f = ctypes.CDLL(os.environ["TORCHPROF_CUPTI_LIB"])
f.fakecuda_launch_kernel.restype = ctypes.c_uint32
f.fakecuda_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p]
f.fakecuda_init()
for _ in range(3):
    f.fakecuda_launch_kernel(b"_Z6beforev", 1000, 7, None)
mode = sys.argv[1]
if mode == "fork":
    pid = os.fork()
    if pid == 0:
        tp = ctypes.CDLL(os.environ["TORCHPROF_LIB"])
        tp.torchprof_range_push(b"child")
        tp.torchprof_range_pop()
        os._exit(0)
    os.waitpid(pid, 0)
    f.fakecuda_launch_kernel(b"_Z5afterv", 1000, 7, None)
elif mode == "_exit":
    os._exit(4)
elif mode == "kill":
    os.kill(os.getpid(), 15)
"""


def check_exit_paths(lib, fake):
    """GPU records still in CUPTI's buffers at _exit / a fatal signal are flushed; a forked child gets none."""
    env = {"TORCHPROF_CUPTI_LIB": fake}
    for mode, rc, bye in [("_exit", 4, (0, 4)), ("kill", -15, (1, 15))]:
        proc, rs = run(lib, [sys.executable, "-c", EXIT_PROGRAM, mode], env)
        g = by_kind(rs[0]) if rs else {}
        check(proc.returncode == rc and rs and (rs[0]["bye"]["kind"], rs[0]["bye"]["status"]) == bye,
              f"{mode}: rc {proc.returncode}, bye {rs[0]['bye'] if rs else None}")
        check(len(g.get("kernel", [])) == 3 and rs and accounting_ok(rs[0]), f"{mode}: 3 kernels flushed at exit")
    proc, rs = run(lib, [sys.executable, "-c", EXIT_PROGRAM, "fork"], env, connections=2)
    check(proc.returncode == 0 and len(rs) == 2, f"fork: rc {proc.returncode}, {len(rs)} connections")
    if len(rs) == 2:
        parent, child = by_kind(rs[0]), by_kind(rs[1])
        check(rs[1]["names"].get("push:child") == 1 and rs[1]["hello"]["ppid"] == rs[0]["hello"]["pid"],
              "fork: the child is a new connection with its own events")
        check(len(parent["kernel"]) == 4 and not child["kernel"] and not child["cuda_runtime"],
              f"fork: parent 4 kernels ({len(parent['kernel'])}), child none ({len(child['kernel'])})")


def check_cudart(lib, program):
    proc, rs = run(lib, [program])
    check(proc.returncode == 3, f"cudart: own exit code kept ({proc.returncode}), stderr {proc.stderr!r}")
    check(len(rs) == 1 and rs[0]["names"].get("push:cudart_outer") == 1 and
          rs[0]["names"].get("push:cudart_inner") == 1 and accounting_ok(rs[0]), "cudart: NVTX ranges recorded")


def main():
    lib, workload, fake = sys.argv[1:4]
    check_full(lib, workload, fake)
    check_profiler(lib, workload, fake)
    check_off(lib, workload, fake, {"FAKE_CUPTI_FAIL": "unknown"}, "CUPTI_ERROR_UNKNOWN", "no driver")
    check_off(lib, workload, fake, {"FAKE_CUPTI_FAIL": "subscriber"}, "MULTIPLE_SUBSCRIBERS", "subscriber taken")
    # One build reads every CUPTI from CUDA 12.0 on (CUDA 12.9, 13.2 and a later 14.0's
    # records alike); CUDA 11.8's is refused.
    for version in ("28", "130200", "140000"):
        check_full(lib, workload, fake, {"FAKE_CUPTI_VERSION": version})
    check_off(lib, workload, fake, {"FAKE_CUPTI_VERSION": "18"}, "version 18", "CUDA 11.8 CUPTI")
    check_trace_filter(lib, workload, fake)
    check_exit_paths(lib, fake)
    if len(sys.argv) > 4:
        check_cudart(lib, sys.argv[4])
    print("cupti checks:", "FAILED" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
