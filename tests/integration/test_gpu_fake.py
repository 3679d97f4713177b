"""GPU tracing end to end without a GPU: gpu_workload drives the fake libcupti
(tests/fake_cupti) under torchprof-run, and what torchprof reports is compared with
the exact values `gpu_workload --expect` computes from the same script: every
kernel, copy and memset once with its duration and stream, Self CUDA / CUDA total
of the NVTX ranges, per-stream work, memory peak, CUPTI's dropped count, and ac2g
flows that pair up. FAKE_CUPTI_FAIL=unknown: GPU tracing off with one notice line,
the program's exit code and its NVTX ranges unchanged.

Needs TP_FAKE_CUPTI_LIB (the fake library) besides tp.py's variables."""

import collections
import json
import os
import subprocess

import tp
from tp import check, check_eq

CUDA_REL_TOL = 0.01  # Self CUDA / CUDA total: within 1% (exact up to ns rounding in practice)
SCENARIOS = ("nested", "steps", "streams", "memory", "graph", "drops", "driver", "blocking", "repeat")
ACTIVITY_SCENARIOS = ("nested", "steps", "streams", "graph", "driver", "blocking")


def fake_cupti():
    path = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    check(os.path.isfile(path), f"fake libcupti not built: {path}")
    return path


def drop_in_runtime(env):
    """`env` (changed and returned) for a program that loads libcudart.so.13: the drop-in
    runtime of tests/fake_cupti first on LD_LIBRARY_PATH, tracing through the fake
    libcupti, which fails nothing on purpose."""
    env.pop("FAKE_CUPTI_FAIL", None)
    env["TORCHPROF_CUPTI_LIB"] = fake_cupti()
    env["LD_LIBRARY_PATH"] = tp.lib_path("fake_cuda") + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


def expectations(scenario):
    path = os.path.join(tp.fresh_dir("expect_" + scenario), "expect.json")
    proc = subprocess.run([tp.bin_path("gpu_workload"), "--no-run", "--expect", path, scenario],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check_eq(proc.returncode, 0, f"gpu_workload --expect {scenario} ({proc.stderr.decode(errors='replace')})")
    with open(path) as f:
        return json.load(f)


def run_workload(scenario, extra_env=None, options=()):
    parent = tp.fresh_dir("gpu_" + scenario)
    out_dir = os.path.join(parent, "out")
    env = dict(os.environ)
    env.pop("FAKE_CUPTI_FAIL", None)
    env.update(TORCHPROF_CUPTI_LIB=fake_cupti(), **(extra_env or {}))
    result = tp.run_tool(["-o", out_dir, *options, "--", tp.bin_path("gpu_workload"), scenario], timeout=120,
                         env=env)
    result.out_dir = out_dir
    return result


def check_cuda(actual, expected, what):
    check(actual is not None, f"{what}: missing")
    slack = max(expected * CUDA_REL_TOL, 2)  # a few ns of rounding at most
    check(abs(actual - expected) <= slack, f"{what}: {actual} ns, expected {expected} ns")


def ops_of_kind(summary, *kinds):
    return [o for o in summary["ops"] if o["kind"] in kinds]


def nvtx_row(summary, name):
    # ProfilerStep#N ranges fold into ProfilerStep*, as in key_averages().
    row_name = "ProfilerStep*" if name.startswith("ProfilerStep#") else name
    rows = [o for o in summary["ops"] if o["kind"] == "nvtx" and o["name"] == row_name]
    check_eq(len(rows), 1, f"nvtx rows named {row_name!r}")
    return rows[0]


def check_ranges(summary, expect):
    folded = collections.OrderedDict()
    for r in expect["ranges"]:
        key = "ProfilerStep*" if r["name"].startswith("ProfilerStep#") else r["name"]
        acc = folded.setdefault(key, {"calls": 0, "self_cuda_ns": 0, "cuda_total_ns": 0, "cpu_total_min_ns": 0})
        for k in acc:
            acc[k] += r[k]
    for name, want in folded.items():
        row = nvtx_row(summary, name)
        check_eq(row["calls"], want["calls"], f"calls of range {name!r}")
        check_cuda(row["self_cuda_ns"], want["self_cuda_ns"], f"self_cuda_ns of range {name!r}")
        check_cuda(row["cuda_total_ns"], want["cuda_total_ns"], f"cuda_total_ns of range {name!r}")
        check(row["cpu_total_ns"] >= want["cpu_total_min_ns"],
              f"cpu_total_ns of range {name!r}: {row['cpu_total_ns']} < {want['cpu_total_min_ns']}")


def check_gpu_rows(summary, expect, api_calls=True):
    rows = {o.get("mangled_name", o["name"]): o for o in ops_of_kind(summary, "kernel", "memcpy", "memset")}
    check_eq(sorted(rows), sorted(g["name"] for g in expect["gpu_ops"]), "GPU rows (by recorded name)")
    for g in expect["gpu_ops"]:
        row = rows[g["name"]]
        check_eq(row["kind"], g["kind"], f"kind of {g['name']!r}")
        check_eq(row["calls"], g["calls"], f"calls of {g['name']!r}")
        check_cuda(row["self_cuda_ns"], g["total_ns"], f"self_cuda_ns of {g['name']!r}")
        check_eq(row["cpu_total_ns"], 0, f"cpu_total_ns of GPU row {g['name']!r}")
    if not api_calls:
        return
    api = {o["name"]: o["calls"] for o in ops_of_kind(summary, "cuda_api")}
    for name, calls in expect["api_calls"].items():
        check_eq(api.get(name), calls, f"calls of API {name!r}")


def gpu_trace_events(result):
    events = []
    for cat in ("kernel", "gpu_memcpy", "gpu_memset"):
        events += tp.all_trace_events(result, ph="X", cat=cat)
    return events


def check_trace_rows(result, expect):
    device = expect["device"]["id"]
    got = collections.Counter()
    for ev in gpu_trace_events(result):
        check_eq(ev["pid"], device, f"pid of GPU row {ev['name']!r}")
        check_eq(ev["tid"], ev["args"]["stream"], f"tid of GPU row {ev['name']!r}")
        name = ev["args"].get("mangled name", ev["name"])
        got[(ev["cat"], name, ev["tid"], tp.dur_ns(ev))] += 1
    want = collections.Counter()
    for k in expect["kernels"]:
        want[("kernel", k["name"], k["stream"], k["dur_ns"])] += 1
    for m in expect["memcpys"]:
        want[("gpu_memcpy", m["name"], m["stream"], m["dur_ns"])] += 1
    for m in expect["memsets"]:
        want[("gpu_memset", m["name"], m["stream"], m["dur_ns"])] += 1
    check_eq(got, want, "GPU rows of the traces (cat, name, stream, dur_ns)")
    for m in expect["memcpys"] + expect["memsets"]:
        rows = [ev for ev in gpu_trace_events(result) if ev["name"] == m["name"] and ev["args"]["bytes"] == m["bytes"]]
        check(rows, f"no GPU row {m['name']!r} with {m['bytes']} bytes")


def check_flows(result):
    for path, trace in result.traces:
        starts = collections.Counter(ev["id"] for ev in tp.trace_events(trace, ph="s", cat="ac2g"))
        finishes = collections.Counter(ev["id"] for ev in tp.trace_events(trace, ph="f", cat="ac2g"))
        check(all(n == 1 for n in starts.values()), f"{path}: a flow id starts twice")
        check_eq(set(starts), set(finishes), f"{path}: flow ids of starts and finishes")
        for ev in tp.trace_events(trace, ph="f", cat="ac2g"):
            check_eq(ev.get("bp"), "e", f"{path}: bp of flow finish {ev['id']}")
        gpu = [ev for cat in ("kernel", "gpu_memcpy", "gpu_memset") for ev in tp.trace_events(trace, ph="X", cat=cat)]
        check_eq(sum(finishes.values()), len(gpu), f"{path}: one flow finish per GPU row")
        for ev in gpu:
            check(ev["args"]["correlation"] in starts, f"{path}: GPU row {ev['name']!r} has no flow start")


def check_device(summary, expect):
    devices = summary["gpu"]["devices"]
    check_eq(len(devices), 1, "GPU devices in summary.json")
    d = devices[0]
    check_eq(d["name"], expect["device"]["name"], "device name")
    streams = {int(k): v for k, v in d["streams"].items()}
    for sid, want in expect["streams"].items():
        got = streams.get(int(sid))
        check(got is not None, f"stream {sid} missing from summary.json")
        check_eq(got["ops"], want["ops"], f"ops on stream {sid}")
        check_eq(got["busy_ns"], want["busy_ns"], f"busy_ns of stream {sid}")
    totals = expect["totals"]
    check_eq(d["kernel_ns"], totals["kernel_ns"], "kernel_ns")
    check_eq(d["memcpy_ns"], totals["memcpy_ns"], "memcpy_ns")
    check_eq(d["memset_ns"], totals["memset_ns"], "memset_ns")


def check_device_and_memory(summary, expect):
    check_device(summary, expect)
    mem = expect["memory"]
    check_eq(summary["memory"]["allocations"], mem["allocations"], "allocations")
    check_eq(summary["memory"]["frees"], mem["frees"], "frees")
    if mem["allocations"]:
        check_eq(summary["memory"]["peak_bytes_per_device"].get(str(expect["device"]["id"])), mem["peak_bytes"],
                 "peak bytes")
    check_eq(summary["cupti_dropped"], expect["dropped"], "cupti_dropped")


def scenario_check(scenario, extra_env=None):
    def run():
        expect = expectations(scenario)
        result = run_workload(scenario, extra_env)
        check_eq(result.rc, 0, f"exit code ({result.describe()})")
        summary = result.summary
        api = (extra_env or {}).get("TORCHPROF_CUDA_API", "callbacks")
        check_eq({p.get("cuda_api") for p in tp.processes_with_events(summary)}, {api}, "where the API calls came from")
        check_ranges(summary, expect)
        check_gpu_rows(summary, expect)
        check_device_and_memory(summary, expect)
        check_trace_rows(result, expect)
        check_flows(result)
        tp.validate_traces(result, nvtx_names=[r["name"] for r in expect["ranges"]])
        if expect["dropped"]:
            check(f"{expect['dropped']} GPU activity records lost" in result.stderr_text,
                  "the dropped count is reported on stderr")
        check("Self CUDA time total:" in result.table, "table has the Self CUDA trailer")
        tp.check_streamed_table(result.out_dir)
    return run


def gpu_only():
    """TORCHPROF_TRACE=gpu: no ranges and no API calls, CUPTI's GPU records alone (what a
    process of a tree sends when only its GPU work is wanted). Every kernel, copy and set is
    a row of the table with its GPU time, the device figures and the traces have them, and
    one line says they count in no range."""
    expect = expectations("streams")
    result = run_workload("streams", {"TORCHPROF_TRACE": "gpu"})
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    summary = result.summary
    check_eq(ops_of_kind(summary, "nvtx", "cuda_api"), [], "range and API rows")
    check_gpu_rows(summary, expect, api_calls=False)
    check_device(summary, expect)
    check_trace_rows(result, expect)
    launched = sum(g["calls"] for g in expect["gpu_ops"])
    check(f"{launched} GPU records have no recorded launching API call" in result.stderr_text,
          f"no line about the {launched} GPU records outside every range")
    check("nothing was recorded" not in result.stderr_text, "the run is said to have recorded nothing")
    check("Self CUDA time total:" in result.table, "table has the Self CUDA trailer")


def cupti_unknown():
    expect = expectations("nested")
    plain = subprocess.run([tp.bin_path("gpu_workload"), "nested"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=dict(os.environ, TORCHPROF_CUPTI_LIB=fake_cupti()),
                           timeout=60)
    result = run_workload("nested", {"FAKE_CUPTI_FAIL": "unknown"})
    check_eq(result.rc, plain.returncode, "exit code with GPU tracing off")
    notices = [line for line in result.stderr_text.splitlines() if "GPU tracing off" in line]
    check_eq(len(notices), 1, f"notice lines on stderr ({notices})")
    summary = result.summary
    check_eq(len(summary["gpu_notices"]), 1, "gpu_notices in summary.json")
    for r in expect["ranges"]:
        check_eq(nvtx_row(summary, r["name"])["calls"], r["calls"], f"calls of range {r['name']!r}")
    check_eq(ops_of_kind(summary, "kernel", "memcpy", "memset"), [], "GPU rows with GPU tracing off")
    tp.check_streamed_table(result.out_dir)


# The overview's workloads (tests/fake_cupti/workload_scenarios.cpp): each built to have
# one problem must give exactly its recommendation, the healthy one none.
ADVICE = {"loader": ["dataloader"], "tiny": ["short_kernels"], "pageable": ["pageable_copies"],
          "syncstep": ["sync"], "healthy": []}


def check_breakdown(overview, steps):
    breakdown = overview["breakdown"]
    check_eq(len(breakdown["steps"]), steps, "steps in the breakdown")
    for s in breakdown["steps"]:
        parts = sum(s[p + "_ns"] for p in breakdown["parts"])
        check_eq(parts, s["dur_ns"], f"parts of step {s['name']} (they sum to the step time)")
    total = breakdown["total"]
    check_eq(sum(total[p + "_ns"] for p in breakdown["parts"]), total["dur_ns"], "parts of the total")
    for d in overview["devices"]:
        check_eq(d["busy_ns"] + d["idle_ns"], d["steps_ns"], f"busy + idle of GPU {d['device']}")
        check_eq(d["host_wait_ns"] + d["kernel_wait_ns"] + d["other_ns"], d["idle_ns"], "idle split")


def check_figures(scenario, overview):
    pct = overview["breakdown"]["pct"]
    device = overview["devices"][0]
    host_wait = 100 * device["host_wait_ns"] / device["steps_ns"]
    if scenario == "loader":
        # Step 0 is 3ms of loading + 1ms of kernel; later steps load 2ms beside the kernel.
        tp.check_timing(45 <= pct["dataloader"] <= 95, f"DataLoader share {pct['dataloader']}%")
        tp.check_timing(host_wait > 50, f"GPU waiting for the host {host_wait:.1f}%")
    elif scenario == "tiny":
        launches = overview["launches"]
        check_eq(launches["kernels"], 400, "kernels")
        check_eq(launches["short_kernels"], 400, "kernels shorter than 10us")
        check_eq(launches["short_kernel_time_pct"], 100.0, "short kernels' share of kernel time")
        check_eq(launches["duration"]["p50_ns"], 3000, "median kernel duration")
    elif scenario == "pageable":
        pageable = overview["copies"]["pageable"]
        check_eq((pageable["calls"], pageable["bytes"], pageable["total_ns"]), (4, 4 * 16777216, 4 * 2000000),
                 "pageable copies (calls, bytes, GPU time)")
        tp.check_timing(pct["memcpy"] > 70, f"memcpy share {pct['memcpy']}%")
    elif scenario == "syncstep":
        syncs = overview["syncs"]
        check_eq((syncs["calls"], syncs["per_step"]), (4, 1.0), "synchronisations in the steps")
        check_eq(syncs["rows"][0]["name"], "cudaDeviceSynchronize", "the synchronising call")
        tp.check_timing(syncs["step_pct"] > 50, f"CPU blocked {syncs['step_pct']}% of the step")
    else:
        tp.check_timing(device["utilization_pct"] > 75, f"utilisation {device['utilization_pct']}%")


def advice_check(scenario):
    def run():
        result = run_workload(scenario, options=["--advice"])
        check_eq(result.rc, 0, f"exit code ({result.describe()})")
        overview = result.summary["overview"]
        check_breakdown(overview, 4)
        ids = [r["id"] for r in overview["recommendations"]]
        check_eq(ids, ADVICE[scenario], f"recommendations ({[r['text'] for r in overview['recommendations']]})")
        check_figures(scenario, overview)
        with open(os.path.join(result.out_dir, "advice.txt")) as f:
            advice = f.read()
        check("Step time breakdown, 4 steps" in advice, "advice.txt has the breakdown")
        check(advice in result.stderr_text, "the advice is printed after the table")
        for r in overview["recommendations"]:
            check("  - " + r["text"] in advice, f"advice.txt lists {r['id']}")
        if not ADVICE[scenario]:
            check("Recommendations\n  none:" in advice, "no recommendation is said plainly")
        # `report --advice` on the saved capture says the same.
        report = tp.run_report([result.out_dir, "--advice", "-o", tp.fresh_dir("report_" + scenario)])
        check_eq(report.rc, 0, "report --advice exit code")
        check(advice in report.stdout.decode(), "report --advice prints the same overview")
    return run


def advice_diff():
    """`torchprof diff` shows both runs' breakdowns side by side."""
    loader = run_workload("loader")
    healthy = run_workload("healthy")
    check_eq((loader.rc, healthy.rc), (0, 0), "exit codes")
    diff = tp._run([tp.bin_path("torchprof"), "diff", loader.out_dir, healthy.out_dir, "--format", "json"], 60, None,
                   None)
    check_eq(diff.rc, 0, "diff exit code")
    breakdown = json.loads(diff.stdout)["breakdown"]
    before, after = breakdown["before"], breakdown["after"]
    for side, summary in ((before, loader.summary), (after, healthy.summary)):
        check_eq(side, dict(steps=4, **summary["overview"]["breakdown"]["avg"]), "a side is its run's average")
    check(before["dataloader_ns"] > 1_000_000 and after["dataloader_ns"] == 0, f"DataLoader: {before} -> {after}")
    text = tp._run([tp.bin_path("torchprof"), "diff", loader.out_dir, healthy.out_dir], 60, None, None)
    table = text.stdout.decode()
    check("Step time breakdown, average per step (before: 4 steps, after: 4 steps)" in table, table)
    row = next(line for line in table.splitlines() if line.startswith("DataLoader "))
    check(row.split()[-1] == "-100.00%", f"the DataLoader row: {row!r}")
    markdown = tp._run([tp.bin_path("torchprof"), "diff", loader.out_dir, healthy.out_dir, "--format", "markdown"],
                       60, None, None).stdout.decode()
    check("| DataLoader |" in markdown, "markdown breakdown table")


SCENARIO_FUNCS = {name: scenario_check(name) for name in SCENARIOS}
# The same expectations with the API calls from CUPTI's RUNTIME/DRIVER activity records,
# placed on their threads by time (TORCHPROF_CUDA_API=activity).
SCENARIO_FUNCS.update({name + "_activity": scenario_check(name, {"TORCHPROF_CUDA_API": "activity"})
                       for name in ACTIVITY_SCENARIOS})
SCENARIO_FUNCS["advice_diff"] = advice_diff
SCENARIO_FUNCS["cupti_unknown"] = cupti_unknown
SCENARIO_FUNCS["gpu_only"] = gpu_only
SCENARIO_FUNCS.update({"advice_" + name: advice_check(name) for name in ADVICE})

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIO_FUNCS))
