#!/usr/bin/env python3
"""Verdicts of scripts/gpu-check.sh's CUPTI cases (docs/gpu.md): one PASS or
FAIL line per check, INFO lines with the figures. Exit status 0 whatever they say.

  cupti_verdicts.py profiler-stop --summary S --case CASE.json
  cupti_verdicts.py no-sync-exit  --summary S --case CASE.json [--rc RC]
  cupti_verdicts.py sigkill       --summary S --case CASE.json --rc RC --before N
  cupti_verdicts.py second-client --summary S [--inside REF.json --alone REF.json] [--launched NAME=N ...]
                                  [--rc RC]
  cupti_verdicts.py nvcc13        --summary S --label L [--rc RC] [--launch-api NAME] [--trace-dir D]
                                  [--stderr LOG --no-driver --expect-rc RC_WITHOUT_TORCHPROF]
  cupti_verdicts.py trace         --trace-dir D --label L
  cupti_verdicts.py slowdown      --wall plain=NS --wall torchprof=NS --wall reference=NS [--label L]
  cupti_verdicts.py launch-cost   --figure MODE=NS ... --run MODE=SUMMARY ... --kernels-launched N [--label L]

nvcc13 checks tests/nvcc/cuda13_sample.cu's run (CUDA 13's __cudaLaunchKernel, its
kernels all attributed to their NVTX ranges, one synchronisation per polled event,
the trace fields TensorBoard and HTA read); --no-driver checks what a statically
linked sample does where no driver loads (the dry run's stand-in).

launch-cost checks scripts/gpu/launch_cost.cu's runs: MODE is plain (no torchprof), gpu
(TORCHPROF_TRACE without cuda), callbacks or activity (TORCHPROF_CUDA_API); a --figure per
run and round (ns per launch), a --run per torchprof mode (its summary.json).

CASE.json is what scripts/gpu/cupti_cases.cu (or the dry run) writes: mode, kernel (the
row name), launched, each_ns. REF.json is torch_train.py --torch-profiler's output.
"""

import argparse
import glob
import gzip
import json
import os
import sys
import time

KERNEL_TIME_TOL = 0.10
REF_TIME_TOL = 0.10
# A SIGKILL may lose what the last periodic flush (TORCHPROF_GPU_FLUSH_MS, 500 ms) had
# not handed over: at 25 ms per kernel, 20 of them, and 2 more in flight.
SIGKILL_MAX_LOST = 22


def load(path):
    with open(path) as f:
        return json.load(f)


SUFFIX = ""  # --label of the CUPTI cases ("[stand-in]" in the dry run)


def verdict(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}{SUFFIX}: {detail}")


def kernel_row(summary, name):
    for op in summary.get("ops", []):
        if op.get("kind") == "kernel" and name in (op.get("name"), op.get("mangled_name")):
            return op
    return None


def span_ok(summary):
    """Every process starts after the run began (a record at time 0 would place it at boot)."""
    floor = (time.time() - 3600) * 1e9
    starts = [p.get("start_ns", 0) for p in summary.get("processes", []) if p.get("events", 0) > 0]
    return all(s >= floor for s in starts), starts


def profiler_stop(a):
    s, case = load(a.summary), load(a.case)
    row = kernel_row(s, case["kernel"]) or {}
    calls, incomplete = row.get("calls", 0), s.get("gpu_incomplete_records", 0)
    verdict(calls == case["launched"] and incomplete == 0, "cupti.profiler_stop.kernels",
            f"{calls} of {case['launched']} kernels with their times, {incomplete} without "
            "(kernels queued at cudaProfilerStop)")
    queued_ns = 8 * case["each_ns"]
    got = row.get("self_cuda_ns", 0)
    verdict(got >= queued_ns * (1 - KERNEL_TIME_TOL), "cupti.profiler_stop.time",
            f"{got / 1e6:.3f} ms of kernel time, the 8 queued ones alone take {queued_ns / 1e6:.3f} ms")


def no_sync_exit(a):
    s, case = load(a.summary), load(a.case)
    row = kernel_row(s, case["kernel"]) or {}
    calls, incomplete = row.get("calls", 0), s.get("gpu_incomplete_records", 0)
    verdict(calls + incomplete == case["launched"], "cupti.no_sync_exit.accounted",
            f"{calls} kernels with times + {incomplete} without = {calls + incomplete} of {case['launched']}")
    ok, starts = span_ok(s)
    verdict(ok, "cupti.no_sync_exit.span", f"process starts {starts} (none at boot time)")
    if a.rc is not None:
        verdict(a.rc == 0, "cupti.no_sync_exit.exit_code", f"{a.rc}")


def sigkill(a):
    s = load(a.summary)
    case = load(a.case)
    row = kernel_row(s, case["kernel"]) or {}
    calls = row.get("calls", 0)
    verdict(a.rc == 137, "cupti.sigkill.exit_code", f"torchprof-run exited {a.rc} (128+9 expected)")
    verdict(calls >= a.before, "cupti.sigkill.delivered",
            f"{calls} kernels in the capture; {a.before} had ended before 'ready', over a second before the kill")
    if case.get("launched") is None:
        print("INFO cupti.sigkill.loss: the launched count at the kill is not known (dry run)")
        return
    lost = case["launched"] - calls
    verdict(lost <= SIGKILL_MAX_LOST, "cupti.sigkill.loss",
            f"{lost} of {case['launched']} launched kernels lost (at most {SIGKILL_MAX_LOST}: one flush interval)")


def second_client(a):
    s = load(a.summary)
    if a.rc is not None:
        verdict(a.rc == 0, "cupti.second_client.exit_code", f"{a.rc} (the program's own checks)")
    notices = " | ".join(s.get("gpu_notices", []))
    verdict("shared with a second client" in notices, "cupti.second_client.notice", notices or "no notice")
    for spec in a.launched:
        name, n = spec.rsplit("=", 1)
        calls = (kernel_row(s, name) or {}).get("calls", 0)
        verdict(calls == int(n), f"cupti.second_client.torchprof[{name}]", f"{calls} of {n} kernels")
    if a.inside and a.alone:
        inside, alone = load(a.inside).get("gpu_ops", {}), load(a.alone).get("gpu_ops", {})
        bad = []
        for name, ref in alone.items():
            got = inside.get(name, {"count": 0, "total_ns": 0})
            if got["count"] != ref["count"] or abs(got["total_ns"] - ref["total_ns"]) > REF_TIME_TOL * ref["total_ns"]:
                bad.append(f"{name[:50]}: {got['count']}x {got['total_ns'] / 1e6:.3f} ms vs "
                           f"{ref['count']}x {ref['total_ns'] / 1e6:.3f} ms")
        verdict(not bad and inside, "cupti.second_client.torch_profiler",
                f"torch.profiler under torchprof vs alone: {len(alone)} GPU ops" +
                (f"; differ: {'; '.join(bad[:5])}" if bad else ", same counts, times within 10%"))


# tests/nvcc/cuda13_sample.cu's launches: kernels by name, and the ranges they run in.
NVCC_KERNELS = {"k_add": 10, "k_scale": 9}
NVCC_RANGES = ("chevrons", "launch_ex", "graph", "streams", "outer", "inner", "worker")
NVCC_CHEVRON_LAUNCHES = 14  # 5 + 3 captured + 2 + 2 + 2 launches by <<<>>>
SLOWDOWN_MAX = 1.25  # torchprof's wall against the reference profiler's, same script


def nvtx_rows(summary, name):
    return [o for o in summary.get("ops", []) if o.get("kind") == "nvtx" and o.get("name") == name]


def load_traces(trace_dir):
    traces = []
    for path in sorted(glob.glob(os.path.join(trace_dir or "", "*.pt.trace.json*"))):
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        traces.append(json.loads(data.decode("utf-8")))
    return traces


def trace_fields(label, traces, need_waits=True):
    """Finding 6: the fields TensorBoard's plugin and HTA read, as Kineto writes them.
    need_waits: the program orders streams by events, so Stream Wait Event rows must be there."""
    events = [ev for t in traces for ev in t.get("traceEvents", [])]
    verdict(bool(events), f"trace.{label}.written", f"{len(traces)} trace files, {len(events)} events")
    if not events:
        return
    waits = [ev for ev in events if ev.get("name") == "Stream Wait Event"]
    bad = [ev.get("args", {}) for ev in waits
           if "wait_on_stream" not in ev.get("args", {}) or "wait_on_cuda_event_id" not in ev.get("args", {})]
    if not waits and not need_waits:
        print(f"INFO trace.{label}.stream_wait_event: no Stream Wait Event rows")
    else:
        verdict(bool(waits) and not bad, f"trace.{label}.stream_wait_event",
                f"{len(waits)} Stream Wait Event rows, {len(bad)} without wait_on_stream/wait_on_cuda_event_id"
                + (f" ({bad[0]})" if bad else ""))
    nulls = [ev.get("name") for ev in events if "External id" in ev.get("args", {}) and ev["args"]["External id"] is None]
    verdict(not nulls, f"trace.{label}.external_id", f"{len(nulls)} rows with \"External id\": null")
    minus = [ev.get("name") for ev in events if ev.get("args", {}).get("stream") == -1]
    verdict(not minus, f"trace.{label}.stream_unsigned", f"{len(minus)} rows with stream -1 {minus[:3]}")
    zero = [ev.get("name") for ev in events if ev.get("cat") == "kernel"
            and any(ev.get("args", {}).get(k) == 0 for k in ("blocks per SM", "warps per SM"))]
    verdict(not zero, f"trace.{label}.occupancy", f"{len(zero)} kernels with blocks or warps per SM of 0 "
            "(TensorBoard: 'is not positive!')")
    seen = {ev["args"]["device"] for ev in events if ev.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and isinstance(ev.get("args", {}).get("device"), int)}
    listed = {d.get("id") for t in traces for d in t.get("deviceProperties", [])}
    verdict(bool(seen) and seen <= listed, f"trace.{label}.device_properties",
            f"devices with rows {sorted(seen)}, in deviceProperties {sorted(x for x in listed if x is not None)}")


def nvcc13(a):
    s = load(a.summary)
    label = a.label
    if a.rc is not None:
        verdict(a.rc == a.expect_rc, f"nvcc13.{label}.exit_code",
                f"{a.rc} ({a.expect_rc}: {'as without torchprof' if a.no_driver else 'the sample checks its results'})")
    if a.no_driver:
        with open(a.stderr, errors="replace") as f:
            lines = [line.strip() for line in f if "GPU tracing" in line]
        verdict(len(lines) == 1 and "never started" in lines[0], f"nvcc13.{label}.notice", " | ".join(lines) or "no line")
        missing = [r for r in NVCC_RANGES if len(nvtx_rows(s, r)) != 1]
        verdict(not missing, f"nvcc13.{label}.nvtx", f"ranges missing: {missing}" if missing else
                f"all {len(NVCC_RANGES)} NVTX ranges recorded")
        return
    kernels = [o for o in s.get("ops", []) if o.get("kind") == "kernel"]
    counted = {k: sum(o.get("calls", 0) for o in kernels if k in o.get("name", "")) for k in NVCC_KERNELS}
    verdict(counted == NVCC_KERNELS and sum(o.get("calls", 0) for o in kernels) == sum(NVCC_KERNELS.values()),
            f"nvcc13.{label}.kernels", f"counted {counted}, launched {NVCC_KERNELS}")
    kernel_ns = sum(o.get("self_cuda_ns", 0) for o in kernels)
    ranges_ns = sum(r.get("self_cuda_ns", 0) for name in NVCC_RANGES for r in nvtx_rows(s, name))
    empty = [name for name in NVCC_RANGES if sum(r.get("self_cuda_ns", 0) for r in nvtx_rows(s, name)) <= 0]
    verdict(kernel_ns > 0 and not empty and abs(kernel_ns - ranges_ns) <= max(2 * len(NVCC_RANGES), kernel_ns * 1e-4),
            f"nvcc13.{label}.attributed",
            f"{ranges_ns / 1e6:.3f} ms Self CUDA in the NVTX ranges of {kernel_ns / 1e6:.3f} ms of kernels"
            + (f"; ranges with none: {empty}" if empty else ""))
    apis = {o["name"]: o for o in s.get("ops", []) if o.get("kind") == "cuda_api"}
    calls = apis.get(a.launch_api, {}).get("calls", 0)
    verdict(calls == NVCC_CHEVRON_LAUNCHES, f"nvcc13.{label}.launch_api",
            f"{calls} calls of {a.launch_api} (<<<>>> launches: {NVCC_CHEVRON_LAUNCHES})")
    syncs = {r.get("name"): r for r in s.get("overview", {}).get("syncs", {}).get("rows", [])}
    queries = apis.get("cudaEventQuery", {}).get("calls", 0)
    got = syncs.get("cudaEventQuery", {}).get("calls", 0)
    verdict(got == 1 and queries >= 1, f"sync.{label}.event_query",
            f"{got} synchronisation from {queries} cudaEventQuery calls polling one event (1 expected)")
    if a.trace_dir is not None:
        trace_fields(label, load_traces(a.trace_dir))


def trace(a):
    trace_fields(a.label, load_traces(a.trace_dir), need_waits=False)


def slowdown(a):
    walls = {}
    for item in a.wall:
        k, _, v = item.partition("=")
        walls[k] = int(v)
    plain, ours, ref = walls.get("plain"), walls.get("torchprof"), walls.get("reference")
    if not (plain and ours and ref):
        verdict(False, f"perf.slowdown{a.label}", f"a run is missing or failed: {walls}")
        return
    detail = (f"torchprof {ours / plain:.2f}x, reference profiler {ref / plain:.2f}x of the plain "
              f"{plain / 1e6:.0f} ms (at most {SLOWDOWN_MAX}x the reference's wall")
    if a.no_bound:
        # Stand-ins on a shared machine: the three walls were measured; their ratio is
        # a figure here, a verdict only on the device.
        verdict(True, f"perf.slowdown{a.label}", detail + " on a GPU only)")
        return
    verdict(ours <= ref * SLOWDOWN_MAX, f"perf.slowdown{a.label}", detail + ")")


LAUNCH_API = "__cudaLaunchKernel"  # what nvcc 13 makes of <<<>>>
LAUNCH_KERNEL = "empty_kernel"
LAUNCH_MODES = ("plain", "gpu", "callbacks", "activity")


def launch_cost(a):
    """Every empty kernel launched back to back is counted in each mode; the two ways of
    recording API calls record the same calls; ns per launch of each mode (the median of
    its rounds) is the figure the default way is chosen by."""
    runs = dict(item.split("=", 1) for item in a.run)
    api_rows = {}
    for mode in ("gpu", "callbacks", "activity"):
        if mode not in runs:
            verdict(False, f"launch_cost.{mode}{a.label}.kernels", "the run failed or is missing")
            continue
        s = load(runs[mode])
        calls = sum(o.get("calls", 0) for o in s.get("ops", [])
                    if o.get("kind") == "kernel" and LAUNCH_KERNEL in o.get("name", ""))
        verdict(calls == a.kernels_launched, f"launch_cost.{mode}{a.label}.kernels",
                f"{calls} of {a.kernels_launched} empty kernels counted (dropped: {s.get('dropped_events')})")
        if mode == "gpu":
            continue
        apis = {o["name"]: o.get("calls", 0) for o in s.get("ops", []) if o.get("kind") == "cuda_api"}
        api_rows[mode] = apis
        want = {k: a.kernels_launched for k in (LAUNCH_API, "cudaGetDeviceCount", "cudaPeekAtLastError")}
        got = {k: apis.get(k, 0) for k in want}
        blocked = sorted(k for k in ("cudaGetDevice", "cudaGetLastError") if k in apis)
        verdict(got == want and not blocked, f"launch_cost.{mode}{a.label}.api",
                f"calls {got}, expected {want}" + (f"; blocklisted calls recorded: {blocked}" if blocked else ""))
    if len(api_rows) == 2:
        diff = {k: (api_rows["callbacks"].get(k), api_rows["activity"].get(k))
                for k in set(api_rows["callbacks"]) | set(api_rows["activity"])
                if api_rows["callbacks"].get(k) != api_rows["activity"].get(k)}
        verdict(not diff, f"launch_cost.same_calls{a.label}",
                f"API rows differ (callbacks, activity): {diff}" if diff else
                f"callbacks and activity records give the same {len(api_rows['activity'])} API rows, call for call")
    figures = {}
    for item in a.figure:
        mode, _, ns = item.partition("=")
        figures.setdefault(mode, []).append(float(ns))
    med = {m: sorted(v)[len(v) // 2] for m, v in figures.items() if v}
    missing = [m for m in LAUNCH_MODES if m not in med]
    if missing:
        verdict(False, f"perf.launch_cost{a.label}", f"no figure for {missing}: {figures}")
        return
    base = med["plain"]
    # A figure, not a bound: which way of recording API calls costs less decides the default.
    verdict(True, f"perf.launch_cost{a.label}",
            f"ns per launch, median of {min(len(v) for v in figures.values())} rounds: plain {base:.0f}, "
            + ", ".join(f"{m} +{med[m] - base:.0f}" for m in LAUNCH_MODES[1:])
            + f"; activity/callbacks added {(med['activity'] - base) / max(med['callbacks'] - base, 1.0):.2f}")


def memory(a):
    """--profile-memory on CUDA tensors: the caching allocator's reports reached torchprof
    (its peak of allocated bytes is the one torch.cuda.max_memory_allocated() gives), and
    ops carry CUDA memory."""
    summary, ref = load(a.summary), load(a.memory_ref)
    m = summary.get("memory", {})
    frag = m.get("fragmentation") or {}
    peak = frag.get("allocated_bytes_at_peak")
    verdict(peak == ref["max_allocated"], f"memory.cuda_peak{a.label}",
            f"allocated at the peak {peak}, torch.cuda.max_memory_allocated() {ref['max_allocated']}")
    reserved = frag.get("reserved_peak_bytes")
    verdict(reserved == ref["max_reserved"], f"memory.cuda_reserved{a.label}",
            f"reserved at most {reserved}, torch.cuda.max_memory_reserved() {ref['max_reserved']}")
    rows = [o for o in summary.get("ops", []) if o.get("self_cuda_memory_usage", 0) > 0]
    verdict(bool(rows), f"memory.cuda_rows{a.label}",
            f"{len(rows)} rows with Self CUDA Mem > 0, e.g. {[o['name'] for o in rows[:3]]}")
    if "num_alloc_retries" in ref:
        retries = frag.get("alloc_retries")
        verdict(retries == ref["num_alloc_retries"], f"memory.alloc_retries{a.label}",
                f"alloc_retries {retries}, torch.cuda.memory_stats()['num_alloc_retries'] {ref['num_alloc_retries']}")
    if a.snapshot:
        snapshot(a, ref)


def snapshot(a, ref):
    """--memory-snapshot: memory_snapshot.pickle replays to torch's own peak, and where
    torch 2.x is at hand its memory_viz renders it."""
    import pickle
    try:
        with open(a.snapshot, "rb") as f:
            snap = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        verdict(False, f"memory.snapshot{a.label}", f"cannot load {a.snapshot}: {e}")
        return
    live, now, peak = {}, 0, 0
    for e in (snap.get("device_traces") or [[]])[0]:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            now += e["size"]
        elif e["action"] == "free_completed" and e["addr"] in live:
            now -= live.pop(e["addr"])
        peak = max(peak, now)
    verdict(peak == ref["max_allocated"], f"memory.snapshot{a.label}",
            f"replayed peak {peak}, torch.cuda.max_memory_allocated() {ref['max_allocated']}")
    try:
        from torch.cuda import _memory_viz
        plot = getattr(_memory_viz, "trace_plot", None)
    except ImportError:
        plot = None
    if plot is not None:
        try:
            html = plot(snap)
            verdict("device_traces" in html or len(html) > 1000, f"memory.snapshot_viz{a.label}",
                    f"torch's _memory_viz.trace_plot made {len(html)} characters of HTML")
        except Exception as e:  # noqa: BLE001 - any failure of torch's renderer is the finding
            verdict(False, f"memory.snapshot_viz{a.label}", f"torch's _memory_viz.trace_plot: {e!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case_name", choices=["profiler-stop", "no-sync-exit", "sigkill", "second-client", "nvcc13",
                                         "slowdown", "trace", "memory", "launch-cost"])
    p.add_argument("--summary")
    p.add_argument("--case")
    p.add_argument("--rc", type=int)
    p.add_argument("--before", type=int, default=0)
    p.add_argument("--inside")
    p.add_argument("--alone")
    p.add_argument("--launched", action="append", default=[])
    p.add_argument("--label", default="")
    p.add_argument("--no-bound", action="store_true", help="slowdown: the walls measured, the bound not applied")
    p.add_argument("--launch-api", default="__cudaLaunchKernel")
    p.add_argument("--trace-dir")
    p.add_argument("--stderr")
    p.add_argument("--no-driver", action="store_true")
    p.add_argument("--expect-rc", type=int, default=0)
    p.add_argument("--wall", action="append", default=[])
    p.add_argument("--memory-ref")
    p.add_argument("--snapshot")
    p.add_argument("--figure", action="append", default=[], help="launch-cost: MODE=NS per launch, one per run")
    p.add_argument("--run", action="append", default=[], help="launch-cost: MODE=SUMMARY of the last round")
    p.add_argument("--kernels-launched", type=int, default=0)
    a = p.parse_args()
    global SUFFIX
    if a.case_name not in ("nvcc13", "slowdown", "trace", "memory", "launch-cost"):
        SUFFIX = a.label
    try:
        {"profiler-stop": profiler_stop, "no-sync-exit": no_sync_exit, "sigkill": sigkill,
         "second-client": second_client, "nvcc13": nvcc13, "slowdown": slowdown,
         "trace": trace, "memory": memory, "launch-cost": launch_cost}[a.case_name](a)
    except (OSError, ValueError, KeyError, TypeError) as e:
        verdict(False, f"cupti.{a.case_name.replace('-', '_')}", f"cannot read the results: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
