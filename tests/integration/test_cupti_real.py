"""Real CUPTI's awkward behaviours, reproduced by the fake libcupti (tests/fake_cupti)
and handled by torchprof, end to end under torchprof-run: a second CUPTI client in
the process (torch.profiler's Kineto), records without times, a libcupti already
loaded, conversion before CUDA's teardown at exit, unreadable records, peer-to-peer
copies, records arriving while the program runs (SIGKILL), callbacks only for the
informative API calls, the EXIT without ENTER of the call that starts CUDA, 32-bit
correlation ids that wrap, the record layouts of every CUPTI from 12.4 to 13.3, slow flushes inside
callbacks, and a program that links CUDA but never starts it.

Needs tp.py's variables; the fake library is found as in test_gpu_fake.py."""

import json
import os
import signal
import subprocess
import time

import test_gpu_fake as gf
import tp
from tp import check, check_eq

SECOND_CLIENT = ("range:before{ kernel:_Z6beforev:100us } ; sync ; client_start ;"
                 " range:watched{ kernel:_Z7watchedv:300us ; memcpy:htod:4096:20us ; kernel:_Z7watchedv:200us } ;"
                 " sync ; client_stop ; range:after{ kernel:_Z5afterv:150us } ; sync")
# Per block: cudaLaunchKernel and its 2 driver calls, cudaDeviceSynchronize and its 1.
IDS_PER_BLOCK = 5
# Four skips and four blocks: 2^32 ids, block 4 reuses block 0's. The skips differ in their
# low bits, so that blocks 0 to 3 never share a slot of the analysis's launch table (calls
# 2^30 ids apart would: a test artefact, never met in a real run) and the result does not
# hang on when the flusher happens to send each block's GPU records.
WRAP_SKIPS = [(1 << 30) - IDS_PER_BLOCK + d for d in (1000, 2000, 3000, -6000)]
assert sum(WRAP_SKIPS) + 4 * IDS_PER_BLOCK == 1 << 32


def expectations(script):
    """gpu_workload --expect for a script (test_gpu_fake's helper names directories after its argument)."""
    path = os.path.join(tp.fresh_dir("expect"), "expect.json")
    proc = subprocess.run([tp.bin_path("gpu_workload"), "--no-run", "--expect", path, script],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check_eq(proc.returncode, 0, f"gpu_workload --expect ({proc.stderr.decode(errors='replace')})")
    with open(path) as f:
        return json.load(f)


def run_workload(script, extra_env=None):
    out_dir = os.path.join(tp.fresh_dir("gpu"), "out")
    env = dict(os.environ)
    env.pop("FAKE_CUPTI_FAIL", None)
    env.update(TORCHPROF_CUPTI_LIB=gf.fake_cupti(), **(extra_env or {}))
    result = tp.run_tool(["-o", out_dir, "--", tp.bin_path("gpu_workload"), script], timeout=120, env=env)
    result.out_dir = out_dir
    return result


def full_check(script, env=None, rc=0):
    """The workload under torchprof-run against its own expectations (test_gpu_fake's checks)."""
    expect = expectations(script)
    result = run_workload(script, env)
    check_eq(result.rc, rc, f"exit code ({result.describe()})")
    summary = result.summary
    gf.check_ranges(summary, expect)
    gf.check_gpu_rows(summary, expect)
    gf.check_trace_rows(result, expect)
    gf.check_flows(result)
    check_span(result)
    return result


def check_span(result):
    """No process reaches back before the test began (a record at time 0 would place it at boot)."""
    began_ns = (time.time() - result.elapsed_s - 60) * 1e9
    for p in result.summary["processes"]:
        check(p["start_ns"] >= began_ns, f"pid {p['pid']} starts at {p['start_ns']}, before the run")


def api_rows(summary):
    return {o["name"]: o for o in gf.ops_of_kind(summary, "cuda_api")}


def second_client():
    result = full_check(SECOND_CLIENT)  # exit 0: the client got exactly its own records, in its clock
    notices = result.summary["gpu_notices"]
    check(any("shared with a second client" in n for n in notices), f"no notice of the second client: {notices}")
    check("unknown buffer" not in result.stderr_text, "the client was handed torchprof's buffers")


def second_client_periodic():
    """The client stays on across several of torchprof's periodic flushes, as torch.profiler's
    Kineto does over its active steps: it still has a buffer out at its stop (Kineto's
    activityBuffers() returns nothing otherwise), and no more buffers come back than its
    records fill (each holds 4 MiB until the trace is processed)."""
    script = ("client_start ; range:a{ kernel:_Z5stepav:100us } ; sync ; sleep:120ms ;"
              " range:b{ kernel:_Z5stepbv:200us ; memcpy:htod:4096:20us } ; sync ; sleep:120ms ;"
              " range:c{ kernel:_Z5stepcv:300us } ; sync ; sleep:120ms ; client_stop")
    result = full_check(script, env={"TORCHPROF_GPU_FLUSH_MS": "20"})
    check("buffers of" not in result.stderr_text, f"the client was handed a buffer per flush: {result.stderr_text[-2000:]}")


def second_client_twice():
    """Two torch.profiler sessions one after the other: each gets the records of its own window,
    and those of the first that torchprof had not yet received when it stopped."""
    full_check("client_start ; range:one{ kernel:_Z3onev:100us } ; sync ; client_stop ;"
               " range:between{ kernel:_Z7betweenv:50us } ; sync ;"
               " client_start ; range:two{ kernel:_Z3twov:200us ; kernel:_Z3twov:100us } ; sync ; client_stop")


def second_client_direct():
    """A client that calls CUPTI through its own handle, past the interposed functions:
    torchprof cannot share, but says what happened."""
    result = run_workload(SECOND_CLIENT.replace("client_start", "client_start:direct"))
    notices = " | ".join(result.summary["gpu_notices"])
    check("another CUPTI client" in notices and "kept" in notices, f"no notice of the lost buffers: {notices}")


def incomplete():
    """The program exits while a kernel is still queued: its record comes without times."""
    result = run_workload("range:tail{ kernel:_Z5quickv:50us ; sync ; kernel:_Z4slowv:5s }")
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    summary = result.summary
    check_eq(summary.get("gpu_incomplete_records"), 1, "gpu_incomplete_records")
    check_eq(summary["processes"][0].get("gpu_incomplete_records"), 1, "the process's gpu_incomplete_records")
    rows = {o.get("mangled_name", o["name"]): o for o in gf.ops_of_kind(summary, "kernel")}
    check_eq(sorted(rows), ["_Z5quickv"], "kernel rows")
    gf.check_cuda(rows["_Z5quickv"]["self_cuda_ns"], 50000, "the complete kernel")
    check(any("came without times" in w for w in summary["warnings"]), f"no warning: {summary['warnings']}")
    check_span(result)


def profiler_stop_queued():
    """cudaProfilerStop with a kernel queued: the flush there must not cut it short."""
    full_check("range:r{ kernel:_Z4longv:300ms ; profiler_stop } ; sync")


def loaded_cupti():
    """The program has libcupti loaded already (its own copy): torchprof uses that one,
    not the toolkit's (a second CUPTI in the process)."""
    link_dir = tp.fresh_dir("loaded_cupti")
    link = os.path.join(link_dir, "libcupti.so.13")
    os.symlink(gf.fake_cupti(), link)
    env = dict(os.environ)
    env.pop("TORCHPROF_CUPTI_LIB", None)
    env.pop("FAKE_CUPTI_FAIL", None)
    env["FAKE_CUPTI_PATH"] = link
    out_dir = os.path.join(link_dir, "out")
    result = tp.run_tool(["-o", out_dir, "--", tp.bin_path("gpu_workload"), "nested"], timeout=120, env=env)
    result.out_dir = out_dir
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    check("GPU tracing off" not in result.stderr_text, f"GPU tracing refused: {result.stderr_text}")
    gf.check_gpu_rows(result.summary, expectations("nested"))


def unreadable():
    result = run_workload("range:r{ kernel:_Z6beforev:10us ; unreadable ; kernel:_Z5afterv:10us } ; sync")
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    summary = result.summary
    rows = {o.get("mangled_name", o["name"]) for o in gf.ops_of_kind(summary, "kernel")}
    check("_Z6beforev" in rows, f"the record before the unreadable one: {rows}")
    check(summary.get("gpu_unreadable_bytes", 0) > 0, f"gpu_unreadable_bytes: {summary.get('gpu_unreadable_bytes')}")
    check(any("could not be read" in w for w in summary["warnings"]), f"no warning: {summary['warnings']}")


def p2p():
    full_check("range:copy{ p2p:1048576:50us ; memcpy:dtod:4096:10us } ; sync")


def sigkill():
    """Records arrive while the program runs: a SIGKILL keeps what was launched before."""
    out_dir = os.path.join(tp.fresh_dir("gpu_sigkill"), "out")
    env = dict(os.environ, TORCHPROF_CUPTI_LIB=gf.fake_cupti(), TORCHPROF_GPU_FLUSH_MS="200")
    env.pop("FAKE_CUPTI_FAIL", None)
    script = "range:early{ kernel:_Z5earlyv:100us ; kernel:_Z5earlyv:100us } ; sync ; ready ; sleep:60s"
    argv = [tp.bin_path("torchprof-run"), "-o", out_dir, "--", tp.bin_path("gpu_workload"), script]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    line = proc.stdout.readline().decode()
    check(line.startswith("ready pid="), f"the workload did not get ready: {line!r}")
    time.sleep(1.5)  # several periodic flushes
    os.kill(int(line.split("=")[1]), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    check_eq(proc.returncode, 128 + signal.SIGKILL, f"exit code of torchprof-run ({err.decode()[-2000:]})")
    r = tp.Result(argv, subprocess.CompletedProcess(argv, proc.returncode, b"", err), out_dir, 0)
    rows = {o.get("mangled_name", o["name"]): o for o in gf.ops_of_kind(r.summary, "kernel")}
    check("_Z5earlyv" in rows and rows["_Z5earlyv"]["calls"] == 2, f"kernels before the kill: {rows}")


def informative():
    """The runtime calls Kineto records (all but its blocklist), the driver calls a direct
    driver user makes; not cudaGetDevice and the like, nor driver calls inside runtime calls."""
    script = ("range:r{ api:cudaGetDevice ; api:cudaGetLastError ; api:cuCtxGetCurrent ; kernel:_Z1kv:10us ;"
              " api:cudaEventRecord ; api:cudaGetDevice ; malloc:a:512 ; free:a ; api:cudaEventCreate ;"
              " api:cudaEventQuery ; api:cudaGetDeviceCount ; api:cudaFuncSetAttribute ; api:cudaEventDestroy } ; sync")
    result = full_check(script)
    rows = api_rows(result.summary)
    for name in ("cudaLaunchKernel", "cudaEventRecord", "cudaMalloc", "cudaFree", "cudaDeviceSynchronize",
                 "cudaEventQuery", "cudaGetDeviceCount", "cudaFuncSetAttribute"):
        check_eq(rows.get(name, {}).get("calls"), 1, f"calls of {name}")
    for name in ("cudaGetDevice", "cudaGetLastError", "cuCtxGetCurrent", "cudaEventCreate", "cudaEventDestroy",
                 "cuLaunchKernel", "cuMemAlloc_v2"):
        check(name not in rows, f"{name} recorded: {rows.get(name)}")


def in_flight():
    """The cudaFree(0) and cuInit that start CUDA are in flight when callbacks start:
    their EXIT comes without an ENTER, and no call starting at time 0 is made up."""
    result = full_check("nested")
    rows = api_rows(result.summary)
    for name in ("cudaFree", "cuInit"):
        check(name not in rows, f"{name} recorded from an EXIT without ENTER: {rows.get(name)}")
    wall_ns = result.elapsed_s * 1e9
    for name, row in rows.items():
        check(row["cpu_total_ns"] < wall_ns, f"{name}: {row['cpu_total_ns']} ns, longer than the run")


def correlation_wrap():
    blocks = [f"range:w{i}{{ kernel:_Z2k{i}v:{(i + 1) * 100}us }} ; sync ; cupti_flush" for i in range(5)]
    script = blocks[0]
    for skip, block in zip(WRAP_SKIPS, blocks[1:]):
        script += f" ; skip_ids:{skip} ; {block}"
    full_check(script)


# CUPTI releases by the API version they report, each writing its own record layouts
# (the fake writes them as those releases do: 12.x a prefix of 13.0's structs, 13.1+ more
# after them): CUDA 12.4, 12.6, 12.8, 13.0, 13.1, 13.2, 13.3.
CUPTI_RELEASES = ("22", "24", "26", "130001", "130100", "130200", "130300")
LAYOUT_SCRIPT = ("range:train{ kernel:_Z6matmulPfS_S_i:2000us ; memcpy:htod:1048576:100us ; memset:4096:20us ;"
                 " malloc:a:1048576 ; free:a ; kernel:_Z4reluPfi:300us:stream=13 ; sync:13 } ; sync ; client_start ;"
                 " range:watched{ kernel:_Z7watchedv:300us ; memcpy:dtoh:4096:20us } ; sync ; client_stop")


def layouts():
    """One build traces every CUPTI from 12.4 to 13.3: the workload's kernels, copies, sets and
    allocations as expected, the second client its own records, with each release's layouts."""
    for version in CUPTI_RELEASES:
        print(f"CUPTI API version {version}")
        result = full_check(LAYOUT_SCRIPT, env={"FAKE_CUPTI_VERSION": version})
        check_eq(result.summary["processes"][0].get("gpu_tracing"), "on", f"gpu_tracing with CUPTI {version}")
        gf.check_device_and_memory(result.summary, expectations(LAYOUT_SCRIPT))


def older_cupti_refused():
    """CUPTI before CUDA 12.0 (API version 18: 11.8) writes layouts this build does not read:
    one line says so, GPU tracing is off, the NVTX ranges are still recorded."""
    result = run_workload("nested", {"FAKE_CUPTI_VERSION": "18"})
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    lines = [line for line in result.stderr_text.splitlines() if "GPU tracing off" in line]
    check(len(lines) == 1 and "API version 18" in lines[0] and "12.0" in lines[0], f"notice lines: {lines}")
    summary = result.summary
    check_eq(gf.ops_of_kind(summary, "kernel", "memcpy", "memset"), [], "GPU rows")
    check_eq(summary["processes"][0].get("gpu_tracing"), "off", "gpu_tracing")
    check_eq(gf.nvtx_row(summary, "train")["calls"], 1, "NVTX ranges still recorded")


NSYS_INJECTION = "/opt/nvidia/nsight-systems/2025.3.1/target-linux-x64/libToolsInjection64.so"


def outside_tool():
    """Another tool outside holds CUDA's injection (nsys profile torchprof-run …): torchprof
    leaves its variable alone (the program sees nsys's value), says so in one line naming the
    tool, and still records the NVTX ranges; no line about GPU tracing never starting."""
    env = dict(os.environ, CUDA_INJECTION64_PATH=NSYS_INJECTION)
    out_dir = os.path.join(tp.fresh_dir("outside"), "out")
    probe = tp.run_tool(["-o", out_dir, "--", "/usr/bin/python3", "-c",
                         "import os; print('CUDA=' + os.environ.get('CUDA_INJECTION64_PATH', ''));"
                         " print('NVTX=' + os.environ.get('NVTX_INJECTION64_PATH', ''))"], env=env)
    probe.out_dir = out_dir
    check_eq(probe.rc, 0, f"exit code ({probe.describe()})")
    check(f"CUDA={NSYS_INJECTION}" in probe.stdout.decode(), f"the program's CUDA_INJECTION64_PATH: {probe.stdout.decode()}")
    check("NVTX=" + tp.lib_path("libtorchprof_inject.so") in probe.stdout.decode() or
          "libtorchprof_inject.so" in probe.stdout.decode(), f"NVTX's injection stays torchprof's: {probe.stdout.decode()}")
    lines = [line for line in probe.stderr_text.splitlines() if "holds the injection" in line]
    check(len(lines) == 1 and lines[0].startswith("torchprof: warning: Nsight Systems holds the injection")
          and "CUDA_INJECTION64_PATH=" + NSYS_INJECTION in lines[0], f"the line about nsys: {lines}")
    check_eq(probe.summary["outside_tools"],
             [{"variable": "CUDA_INJECTION64_PATH", "library": NSYS_INJECTION, "tool": "Nsight Systems"}],
             "summary.json outside_tools")
    result = run_workload("nested", {"CUDA_INJECTION64_PATH": NSYS_INJECTION})
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    check_eq(gf.nvtx_row(result.summary, "train")["calls"], 1, "NVTX ranges still recorded")
    check_eq(gf.ops_of_kind(result.summary, "kernel", "memcpy", "memset"), [], "GPU rows (nsys has CUDA)")
    check("never started" not in result.stderr_text, f"a line about GPU tracing never starting: {result.stderr_text}")


def flush_bounded():
    """A flush that takes 3 s (CUPTI waiting on the device) holds the program's
    cudaProfilerStop and cudaDeviceReset a bounded time only."""
    script = "range:stop_here{ kernel:_Z1av:10us ; profiler_stop } ; range:reset_here{ device_reset } ; sync"
    result = run_workload(script, {"FAKE_CUPTI_FLUSH_DELAY_MS": "3000"})
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    for name in ("stop_here", "reset_here"):
        ns = gf.nvtx_row(result.summary, name)["cpu_total_ns"]
        check(ns < 1.5e9, f"range {name} lasted {ns / 1e9:.2f} s: the flush in its callback was not bounded")


def never_started():
    """A program linked against libcudart, on a machine without a driver: one line says
    GPU tracing never started, stderr and summary.json alike."""
    probe = tp.bin_path("torchprof_inject_cudart_probe")
    if not os.path.isfile(probe):
        print(f"skipped: {probe} is not built (the toolkit has no libcudart)")
        return
    if os.path.exists("/proc/driver/nvidia/version"):
        print("skipped: this machine has an NVIDIA driver")
        return
    out_dir = os.path.join(tp.fresh_dir("never_started"), "out")
    result = tp.run_tool(["-o", out_dir, "--", probe], timeout=60)
    result.out_dir = out_dir
    check_eq(result.rc, 3, f"the program's own exit code ({result.describe()})")
    lines = [line for line in result.stderr_text.splitlines() if "GPU tracing" in line]
    check(len(lines) == 1 and "never started" in lines[0] and "libcudart" in lines[0] and "no NVIDIA driver" in lines[0],
          f"notice lines: {lines}")
    summary = result.summary
    check(any("never started" in n for n in summary["gpu_notices"]), f"gpu_notices: {summary['gpu_notices']}")
    procs = tp.processes_with_events(summary)
    check_eq(procs[0].get("gpu_tracing"), "not_started", "gpu_tracing")


# What gpu-check.sh --dry must run and pass: every case, the stand-ins labelled as such.
GPU_CHECK_VERDICTS = (
    "deps", "nvcc13.shared.exit_code", "nvcc13.shared.kernels", "nvcc13.shared.attributed",
    "nvcc13.shared.launch_api", "nvcc13.shared_activity.kernels", "nvcc13.shared_activity.attributed",
    "nvcc13.shared_activity.launch_api", "sync.shared.event_query", "trace.shared.stream_wait_event",
    "trace.shared.external_id", "trace.shared.stream_unsigned", "trace.shared.occupancy",
    "trace.shared.device_properties", "nvcc13.static[stand-in].notice", "nvcc13.static[stand-in].nvtx",
    "[events/stand-in] gpu-op counts equal", "[events/stand-in] gpu-op summed time within 2%",
    "[torch/stand-in] gpu-op counts equal", "[torch/stand-in] gpu-op summed time within 2%",
    "[torch/stand-in] top-10 ops", "trace.torch[stand-in].external_id", "trace.torch[stand-in].device_properties",
    "perf.slowdown[stand-in]", "cupti.second_client.notice[stand-in]",
    "cupti.second_client.torchprof[spin_kernel(long long)][stand-in]", "cupti.profiler_stop.kernels[stand-in]",
    "cupti.no_sync_exit.accounted[stand-in]", "cupti.sigkill.exit_code[stand-in]",
    "cupti.sigkill.delivered[stand-in]", "launch_cost.gpu/fake.kernels", "launch_cost.callbacks/fake.kernels",
    "launch_cost.callbacks/fake.api", "launch_cost.activity/fake.kernels", "launch_cost.activity/fake.api",
    "launch_cost.same_calls/fake", "perf.launch_cost/fake")


def gpu_check_dry():
    """scripts/gpu-check.sh --dry: every case against the fake (the nvcc samples on the
    drop-in libcudart.so.13), every verdict PASS, the table printed last, and in $OUT only
    what the device could return: report.txt and one tarball, nothing left in TMPDIR."""
    import tarfile

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu-check.sh")
    base = tp.fresh_dir("gpu_check_dry")
    out, tmp = os.path.join(base, "out"), os.path.join(base, "tmp")
    os.makedirs(tmp)
    build = os.path.dirname(os.path.normpath(os.environ["TP_BIN_DIR"]))
    env = dict(os.environ, OUT=out, TMPDIR=tmp, PYTHON="/usr/bin/python3")
    env.pop("TORCHPROF_CUPTI_LIB", None)
    proc = subprocess.run(["bash", script, "--dry", build], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=env, timeout=320)
    text = proc.stdout.decode(errors="replace")
    check_eq(proc.returncode, 0, f"exit code of gpu-check.sh --dry ({text[-3000:]})")
    files = []
    for root, dirs, names in os.walk(out):
        depth = os.path.relpath(root, out).count(os.sep) + (root != out)
        check(depth <= 2, f"{root} is more than 2 folders deep")
        files += [os.path.join(root, n) for n in names]
    check_eq(sorted(os.path.relpath(f, out) for f in files), ["gpu-check.tar.gz", "report.txt"], "files in $OUT")
    for f in files:
        check(os.path.getsize(f) <= 16 << 20, f"{f}: {os.path.getsize(f)} bytes")
    check_eq(os.listdir(tmp), [], "left in TMPDIR")
    with tarfile.open(os.path.join(out, "gpu-check.tar.gz")) as tar:
        verdicts = tar.extractfile("keep/verdicts.txt").read().decode().splitlines()
        members = tar.getnames()
    check("keep/nvcc13_shared.summary.json" in members and "keep/torch_ref.json" in members, f"tarball: {members}")
    names = {line.split(" ", 1)[1].split(": ")[0] for line in verdicts}
    for name in GPU_CHECK_VERDICTS:
        check(any(n.startswith(name) for n in names), f"verdict {name} missing: {sorted(names)}")
    failed = [line.split(" ", 1)[1].split(": ")[0] for line in verdicts if line.startswith("FAIL")]
    # A build without CUDA 13's __cudaLaunchKernel callbacks (-DTORCHPROF_OMIT_CBIDS) must
    # turn the launch attribution red, and only that.
    cache = os.path.join(build, "CMakeCache.txt")
    omitted = ""
    if os.path.isfile(cache):
        with open(cache) as f:
            omitted = "".join(line for line in f if line.startswith("TORCHPROF_OMIT_CBIDS:"))
    expect_failed = (["nvcc13.shared.attributed", "nvcc13.shared.launch_api", "nvcc13.shared_activity.attributed",
                      "nvcc13.shared_activity.launch_api", "launch_cost.callbacks/fake.api",
                      "launch_cost.activity/fake.api"]
                     if "__cudaLaunchKernel_v13000" in omitted else [])
    check_eq(failed, expect_failed, f"FAIL verdicts ({omitted.strip() or 'no callback ids omitted'})")
    # The table is the last thing printed: its header, then one row per verdict, then the tally.
    lines = text.rstrip().splitlines()
    header = max(i for i, line in enumerate(lines) if line.split()[:3] == ["check", "verdict", "detail"])
    rows = lines[header + 2:]
    check_eq(len(rows), len(verdicts) + 2, f"rows after the table's header: {rows[-3:]}")
    tally = f"{len(verdicts) - len(failed)} PASS, {len(failed)} FAIL"
    check(rows[-2].startswith(tally), f"tally: {rows[-2]}, not {tally}")
    check(rows[-1].startswith("results: "), f"last line: {rows[-1]}")


SCENARIO_FUNCS = {f.__name__: f for f in (second_client, second_client_periodic, second_client_twice, second_client_direct, incomplete, profiler_stop_queued,
                                          loaded_cupti, unreadable, p2p, sigkill, informative, in_flight,
                                          correlation_wrap, layouts, older_cupti_refused, outside_tool, flush_bounded, never_started,
                                          gpu_check_dry)}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIO_FUNCS))
