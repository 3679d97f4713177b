"""--capture-range (cudaProfilerApi, nvtx:NAME) on `run` and `report`: what lies
outside the capture windows (ranges, API calls, the GPU work they launch) is in no
op, step or trace, and steps are counted inside the windows only. --trace LIST
reaches the injected library; unknown values of either option exit 2 naming them.

The GPU scenarios drive the fake libcupti with gpu_workload scripts."""

import os

import tp
from tp import check, check_eq

# No step markers: the whole run is one step, so only the window decides what is in.
PROFILER_SCRIPT = ("range:before{ kernel:_Z6beforePf:100us } ; sync ; profiler_start ;"
                   " range:inside{ kernel:_Z6insidePf:200us ; kernel:_Z6insidePf:200us } ; sync ; profiler_stop ;"
                   " range:after{ kernel:_Z5afterPf:300us } ; sync")
NVTX_SCRIPT = ("range:ProfilerStep#0{ kernel:_Z4stepPf:100us } ;"
               " range:capture{ range:ProfilerStep#1{ kernel:_Z4stepPf:100us } ;"
               " range:ProfilerStep#2{ kernel:_Z4stepPf:100us } } ;"
               " range:ProfilerStep#3{ kernel:_Z4stepPf:100us } ; sync")


def fake_env():
    lib = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    check(os.path.isfile(lib), f"fake libcupti not built: {lib}")
    env = dict(os.environ, TORCHPROF_CUPTI_LIB=lib)
    env.pop("FAKE_CUPTI_FAIL", None)
    return env


def run_gpu(script, options=(), expect_rc=0):
    out_dir = os.path.join(tp.fresh_dir("capture_range"), "out")
    r = tp.run_tool(["-o", out_dir] + list(options) + ["--", tp.bin_path("gpu_workload"), script],
                    timeout=120, env=fake_env())
    r.out_dir = out_dir
    if expect_rc is not None:
        check_eq(r.rc, expect_rc, "exit code of torchprof-run")
    return r


def report(result, options):
    out = os.path.join(tp.fresh_dir("capture_range_report"), "again")
    rep = tp.run_report([result.out_dir, "-o", out, "-q"] + list(options))
    check_eq(rep.rc, 0, f"exit code of torchprof report {' '.join(options)}")
    rep.out_dir = out
    return rep


def calls(summary):
    return {(o["kind"], o["name"]): o["calls"] for o in summary["ops"]}


def trace_names(result):
    return {ev["name"] for ev in tp.all_trace_events(result, ph="X") if isinstance(ev.get("pid"), int)}


def step_rows(summary):
    return [(s["name"], s["action"]) for s in sorted(summary["steps"], key=lambda s: s["index"])]


def check_profiler_window(result):
    got = calls(result.summary)
    check_eq(got.get(("nvtx", "inside")), 1, "ranges inside the window")
    check_eq(got.get(("kernel", "inside(float*)")), 2, "kernels launched inside the window")
    check_eq(got.get(("cuda_api", "cudaLaunchKernel")), 2, "cudaLaunchKernel calls inside the window")
    check_eq(got.get(("cuda_api", "cudaDeviceSynchronize")), 1, "syncs inside the window")
    check_eq(got.get(("cuda_api", "cudaProfilerStop")), 1, "cudaProfilerStop (starts inside the window)")
    for kind, name in (("nvtx", "before"), ("nvtx", "after"), ("kernel", "before(float*)"),
                       ("kernel", "after(float*)"), ("cuda_api", "cudaProfilerStart")):
        check((kind, name) not in got, f"{kind} {name!r} lies outside the window but is in ops: {sorted(got)}")
    names = trace_names(result)
    check_eq(len(result.traces), 1, "trace files")
    check({"inside", "inside(float*)", "cudaLaunchKernel"} <= names, f"window's events in the trace: {names}")
    check(not names & {"before", "after", "before(float*)", "after(float*)", "cudaProfilerStart"},
          f"events outside the window in the trace: {sorted(names)}")
    tp.validate_traces(result)


def cuda_profiler_api():
    r = run_gpu(PROFILER_SCRIPT, ["--capture-range", "cudaProfilerApi"])
    check_profiler_window(r)
    # The capture holds everything: a report without the range sees the rest again.
    everything = calls(report(r, ["--capture-range", "none"]).summary)
    for key in (("nvtx", "before"), ("nvtx", "after"), ("kernel", "before(float*)"), ("kernel", "after(float*)")):
        check_eq(everything.get(key), 1, f"{key} in a report without --capture-range")


def report_profiler_api():
    r = run_gpu(PROFILER_SCRIPT)
    check_eq(calls(r.summary).get(("kernel", "after(float*)")), 1, "kernel after the window without --capture-range")
    check_profiler_window(report(r, ["--capture-range", "cudaProfilerApi"]))


def no_profiler_start():
    r = run_gpu("range:work{ kernel:_Z4workPf:100us } ; sync", ["--capture-range", "cudaProfilerApi"])
    check_eq(r.summary["ops"], [], "ops of a run that never called cudaProfilerStart")
    check_eq(r.traces, [], "traces of a run that never called cudaProfilerStart")
    check("capture window" in r.stderr_text, f"no warning that nothing was captured:\n{r.stderr_text}")


def nvtx_range():
    r = run_gpu(NVTX_SCRIPT, ["--capture-range", "nvtx:capture", "--schedule", "wait=1,warmup=1,active=1"])
    # Steps are counted inside the window only: #1 is step 0 (wait), #2 step 1 (warmup).
    check_eq(step_rows(r.summary), [("ProfilerStep#1", "none"), ("ProfilerStep#2", "warmup")], "steps")
    check_eq(r.traces, [], "traces (no step of the window is recorded)")
    rep = report(r, ["--capture-range", "nvtx:capture", "--schedule", "wait=0,warmup=1,active=1"])
    check_eq(step_rows(rep.summary), [("ProfilerStep#1", "warmup"), ("ProfilerStep#2", "record_and_save")],
             "steps of the report")
    got = calls(rep.summary)
    check_eq(got.get(("nvtx", "ProfilerStep*")), 1, "recorded steps in the report's ops")
    check_eq(got.get(("kernel", "step(float*)")), 1, "kernels of the recorded step")
    names = trace_names(rep)
    check("ProfilerStep#2" in names and not names & {"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#3"},
          f"steps in the report's trace: {sorted(n for n in names if n.startswith('ProfilerStep'))}")


def nvtx_cpu():
    r = tp.profile("nvtx_steps", [5, 1, 1, 1], options=["--capture-range", "nvtx:ProfilerStep#3"])
    check_eq(step_rows(r.summary), [("ProfilerStep#3", "record_and_save")], "steps inside nvtx:ProfilerStep#3")
    check_eq(tp.op(r.summary, "forward")["calls"], 1, "forward calls inside the window")
    check("between_steps" not in tp.ops_by_name(r.summary), "between_steps is outside the window")
    rep = report(r, ["--capture-range", "nvtx:nothing_named_so"])
    check_eq(rep.summary["ops"], [], "ops when no range has the capture name")


def bad_values():
    for option, value in (("--capture-range", "cudaProfiler"), ("--capture-range", "nvtx:"),
                          ("--trace", "nvtx,bogus"), ("--trace", "nvtx,,gpu")):
        out = os.path.join(tp.fresh_dir("bad_value"), "out")
        r = tp.run_tool(["-o", out, option, value, "--", tp.program("nvtx_steps"), 1])
        check_eq(r.rc, 2, f"exit code of {option} {value!r}")
        word = value.split(",")[-1] if value.startswith("cuda") or "bogus" in value else value
        check(word in r.stderr_text, f"{option} {value!r}: the error does not name {word!r}:\n{r.stderr_text}")
        check(not os.path.exists(os.path.join(out, "summary.json")), f"{option} {value!r}: the program ran")
    rep = tp.run_report([os.path.join(tp.fresh_dir("nothing"), "x.tprof"), "--capture-range", "bogus"])
    check_eq(rep.rc, 2, "exit code of torchprof report --capture-range bogus")
    check("bogus" in rep.stderr_text, f"report: the error does not name the value:\n{rep.stderr_text}")


def trace_list():
    r = run_gpu("range:outer{ kernel:_Z4workPf:100us } ; sync", ["--trace", "nvtx"])
    kinds = {o["kind"] for o in r.summary["ops"]}
    check_eq(kinds, {"nvtx"}, "op kinds with --trace nvtx")
    r = run_gpu("range:outer{ kernel:_Z4workPf:100us } ; sync", ["--trace", "cuda,gpu"])
    kinds = {o["kind"] for o in r.summary["ops"]}
    check("kernel" in kinds and "nvtx" not in kinds, f"op kinds with --trace cuda,gpu: {kinds}")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (cuda_profiler_api, report_profiler_api, no_profiler_start,
                                                       nvtx_range, nvtx_cpu, bad_values, trace_list)}))
