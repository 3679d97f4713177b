#!/usr/bin/env python3
"""Verdicts of scripts/gpu-check.sh's CUPTI cases (docs/gpu.md): one PASS or
FAIL line per check, INFO lines with the figures. Exit status 0 whatever they say.

  cupti_verdicts.py profiler-stop --summary S --case CASE.json
  cupti_verdicts.py no-sync-exit  --summary S --case CASE.json [--rc RC]
  cupti_verdicts.py sigkill       --summary S --case CASE.json --rc RC --before N
  cupti_verdicts.py second-client --summary S [--inside REF.json --alone REF.json] [--launched NAME=N ...]
                                  [--rc RC]

CASE.json is what scripts/gpu/cupti_cases.cu (or the dry run) writes: mode, kernel (the
row name), launched, each_ns. REF.json is torch_train.py --torch-profiler's output.
"""

import argparse
import json
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


def verdict(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case_name", choices=["profiler-stop", "no-sync-exit", "sigkill", "second-client"])
    p.add_argument("--summary", required=True)
    p.add_argument("--case")
    p.add_argument("--rc", type=int)
    p.add_argument("--before", type=int, default=0)
    p.add_argument("--inside")
    p.add_argument("--alone")
    p.add_argument("--launched", action="append", default=[])
    a = p.parse_args()
    try:
        {"profiler-stop": profiler_stop, "no-sync-exit": no_sync_exit, "sigkill": sigkill,
         "second-client": second_client}[a.case_name](a)
    except (OSError, ValueError, KeyError) as e:
        verdict(False, f"cupti.{a.case_name.replace('-', '_')}", f"cannot read the results: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
