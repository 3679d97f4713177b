"""Programs nvcc 13 built (tests/nvcc/cuda13_sample.cu, with -cudart shared, and once
more with --default-stream per-thread) run under torchprof-run against the drop-in
libcudart.so.13 of tests/fake_cupti: <<<>>> (CUDA 13's __cudaLaunchKernel and its
_ptsz form), cudaLaunchKernelExC, a captured graph, two streams ordered by an event, a
second thread. Every kernel must be counted and attributed to its NVTX range, with the
times the drop-in runtime's rule gives (fake_cudart.cpp: 10 us + 10 ns per thread).

Needs TP_NVCC_SAMPLES (the sample's directory) besides tp.py's variables."""

import os

import test_gpu_fake as gf
import tp
from tp import check, check_eq


def kernel_ns(blocks, threads):
    return 10_000 + 10 * blocks * threads


# Self CUDA of each range, from the launches cuda13_sample.cu makes inside it.
RANGES = {
    "chevrons": 3 * kernel_ns(4, 256) + 2 * kernel_ns(1, 32),
    "launch_ex": 2 * kernel_ns(2, 128),
    "graph": 2 * (kernel_ns(1, 64) + kernel_ns(1, 32) + kernel_ns(2, 64)),
    "streams": kernel_ns(8, 128) + kernel_ns(1, 128),
    "outer": kernel_ns(1, 1),
    "inner": kernel_ns(1, 1),
    "worker": 2 * kernel_ns(1, 256),
}
TOTALS = {"outer": 2 * kernel_ns(1, 1)}
KERNELS = {"k_add": 3 + 2 * 2 + 1 + 2, "k_scale": 2 + 2 + 2 * 1 + 1 + 2}


def sample(name):
    path = os.path.join(os.environ.get("TP_NVCC_SAMPLES", tp.bin_path("")), name)
    check(os.path.isfile(path), f"nvcc sample not built: {path}")
    return path


def run_sample(name, api="callbacks"):
    out_dir = os.path.join(tp.fresh_dir("nvcc_" + name), "out")
    env = gf.drop_in_runtime(dict(os.environ))
    env["TORCHPROF_CUDA_API"] = api
    result = tp.run_tool(["-o", out_dir, "--", sample(name)], timeout=120, env=env)
    result.out_dir = out_dir
    return result


def check_sample(name, launch_api, ex_api, api="callbacks"):
    result = run_sample(name, api)
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    summary = result.summary
    check_eq([p.get("cuda_api") for p in tp.processes_with_events(summary)], [api], "where the API calls came from")
    kernels = gf.ops_of_kind(summary, "kernel")
    for kernel, calls in KERNELS.items():
        rows = [k for k in kernels if kernel in k["name"]]
        check_eq(sum(k["calls"] for k in rows), calls, f"kernels {kernel} counted ({[k['name'] for k in kernels]})")
    check_eq(sum(k["calls"] for k in kernels), sum(KERNELS.values()), "kernels counted")
    for range_name, self_ns in RANGES.items():
        row = gf.nvtx_row(summary, range_name)
        gf.check_cuda(row["self_cuda_ns"], self_ns, f"Self CUDA of range {range_name!r}")
        gf.check_cuda(row["cuda_total_ns"], TOTALS.get(range_name, self_ns), f"CUDA total of range {range_name!r}")
    attributed = sum(RANGES.values())
    gpu_sum = sum(k["self_cuda_ns"] for k in kernels)
    check_eq(gpu_sum, attributed, "kernel time, all of it inside the ranges")
    rows = {o["name"]: o for o in gf.ops_of_kind(summary, "cuda_api")}
    # 5 + 3 captured + 2 + 2 + 2 launches by <<<>>>; the captured ones are calls too.
    check_eq(rows.get(launch_api, {}).get("calls"), 14, f"calls of {launch_api} ({sorted(rows)})")
    check_eq(rows.get(ex_api, {}).get("calls"), 2, f"calls of {ex_api}")
    check_eq(rows.get("cudaGraphLaunch", {}).get("calls"), 2, "calls of cudaGraphLaunch")
    check("no recorded launching" not in result.stderr_text, result.stderr_text)
    # The event is polled until ready: only the query that found it done is a synchronisation.
    syncs = {row["name"]: row for row in summary["overview"]["syncs"]["rows"]}
    check_eq(syncs.get("cudaEventQuery", {}).get("calls"), 1, f"event query syncs ({syncs})")
    check(rows.get("cudaEventQuery", {}).get("calls", 0) >= 1, "cudaEventQuery calls recorded")
    # s2 waits for the event recorded on s1 (the first created stream: 13), as HTA reads it.
    waits = [e for e in tp.all_trace_events(result, ph="X", cat="cuda_sync") if e["name"] == "Stream Wait Event"]
    check_eq(len(waits), 1, "Stream Wait Event rows")
    check_eq(waits[0]["args"].get("stream"), 14, "the waiting stream")
    check_eq(waits[0]["args"].get("wait_on_stream"), 13, f"wait_on_stream ({waits[0]['args']})")
    check("wait_on_cuda_event_id" in waits[0]["args"], f"wait_on_cuda_event_id ({waits[0]['args']})")
    return result


def chevrons():
    check_sample("cuda13_sample", "__cudaLaunchKernel", "cudaLaunchKernelExC")


def per_thread():
    check_sample("cuda13_sample_ptds", "__cudaLaunchKernel_ptsz", "cudaLaunchKernelExC_ptsz")


def api_rows(result):
    return {o["name"]: o["calls"] for o in gf.ops_of_kind(result.summary, "cuda_api")}


def activity_records(name, launch_api, ex_api):
    """TORCHPROF_CUDA_API=activity: the API calls from CUPTI's RUNTIME and DRIVER records,
    placed on their threads by time. The same checks hold, and every API row of the
    callbacks' run is there with the same calls (cudaEventQuery polls as long as the event
    takes: its calls vary from run to run), and no other: the call that started CUDA
    (cudaFree(0)), in flight when tracing began, has a record but is left out, as the
    callbacks leave it out."""
    ours = check_sample(name, launch_api, ex_api, api="activity")
    check("by callbacks" not in ours.stderr_text, ours.stderr_text[-800:])
    theirs = api_rows(run_sample(name))
    rows = api_rows(ours)
    polled = "cudaEventQuery"
    check(rows.get(polled, 0) >= 1, f"{polled} calls")
    expected = {n: c for n, c in theirs.items() if n != polled}
    check_eq({n: c for n, c in rows.items() if n != polled}, expected,
             "API rows and calls, activity records against callbacks")


def chevrons_activity():
    activity_records("cuda13_sample", "__cudaLaunchKernel", "cudaLaunchKernelExC")


def per_thread_activity():
    activity_records("cuda13_sample_ptds", "__cudaLaunchKernel_ptsz", "cudaLaunchKernelExC_ptsz")


def static_no_driver():
    """nvcc's default build (the runtime linked statically) where libcuda cannot be loaded:
    one line says GPU tracing never started; exit code and NVTX ranges as without torchprof."""
    if os.path.exists("/proc/driver/nvidia/version"):
        print("a driver is installed here: libcuda loads, nothing to check")
        return
    path = sample("cuda13_sample_static")
    import subprocess
    plain = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out_dir = os.path.join(tp.fresh_dir("nvcc_static"), "out")
    result = tp.run_tool(["-o", out_dir, "--", path], timeout=120)
    result.out_dir = out_dir
    check_eq(result.rc, plain.returncode, f"exit code, as without torchprof ({result.describe()})")
    lines = [line for line in result.stderr_text.splitlines() if "GPU tracing" in line]
    check(len(lines) == 1 and "never started" in lines[0] and "statically linked CUDA runtime" in lines[0]
          and "no NVIDIA driver" in lines[0], f"GPU tracing lines: {lines}")
    summary = result.summary
    check_eq(summary["processes"][0].get("gpu_tracing"), "not_started", "gpu_tracing")
    for name in RANGES:
        check_eq(gf.nvtx_row(summary, name)["calls"], 1, f"calls of range {name!r}")


SCENARIO_FUNCS = {"chevrons": chevrons, "per_thread": per_thread, "static_no_driver": static_no_driver,
                  "chevrons_activity": chevrons_activity, "per_thread_activity": per_thread_activity}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIO_FUNCS))
