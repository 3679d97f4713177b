"""The injected library's buffers under pressure, under torchprof-run: they grow instead
of dropping while the collector is held up, only past TORCHPROF_BUFFER_LIMIT are events
dropped (counted exactly and said why), the memory goes back once the records are sent,
and CUPTI's activity buffers count against the same cap."""

import os
import re
import signal
import subprocess
import time

import tp
from tp import check, check_eq

MIB = 1 << 20




def _stalled_burst(marks, stall_s, env_extra=None):
    """rel_burst under torchprof-run, the launcher (and so the collector) stopped for
    `stall_s` from just before the burst: the flusher cannot send, the buffers must hold it."""
    out = os.path.join(tp.fresh_dir("burst"), "out")
    proc = tp.start_tool(["-o", out, "--", tp.program("rel_burst"), marks, 300],
                         env=dict(os.environ, **(env_extra or {})))
    tp.wait_line(proc, "ready pid=")
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(stall_s)
    os.kill(proc.pid, signal.SIGCONT)
    rest, err = proc.communicate(timeout=120)
    r = tp.Result(proc.args, subprocess.CompletedProcess(proc.args, proc.returncode, rest, err), out, 0)
    tp._last_result = r
    check_eq(proc.returncode, 0, "exit code of torchprof-run")
    m = re.search(r"emitted=(\d+) rss_before_kb=(\d+) rss_burst_kb=(\d+) rss_after_kb=(\d+) settle_ms=(\d+)",
                  rest.decode())
    check(m, f"rel_burst printed no statistics: {rest.decode()!r}")
    stats = dict(zip(["emitted", "rss_before_kb", "rss_burst_kb", "rss_after_kb", "settle_ms"],
                     (int(g) for g in m.groups())))
    procs = tp.processes_with_events(r.summary)
    check_eq(len(procs), 1, "processes with events")
    return r, procs[0], stats


def grow_and_release():
    """The collector stopped while 1.5M marks (46 MiB of records) are made: the buffers
    grow to hold them, the peak is reported, and once they are sent the memory goes back."""
    r, p, s = _stalled_burst(1_500_000, 1.5)
    dropped = r.summary["dropped_events"]
    check_eq(p["events"] + dropped, s["emitted"], "delivered + dropped == emitted")
    check_eq(p["buffer_cap_bytes"], 256 * MIB, "buffer_cap_bytes: the default cap")
    check(p["buffer_peak_bytes"] >= 16 * MIB, f"the buffers did not grow: peak {p['buffer_peak_bytes']} bytes")
    check(p["buffer_peak_bytes"] <= p["buffer_cap_bytes"], "peak within the cap")
    check_eq(p["buffer_cap_reached"], False, "buffer_cap_reached")
    check_eq(p["buffer_cap_reached_ns"], None, "buffer_cap_reached_ns")
    grown_kb = s["rss_burst_kb"] - s["rss_before_kb"]
    check(grown_kb >= 16 * 1024, f"resident memory grew by {grown_kb} kB only during the burst")
    back_kb = s["rss_after_kb"] - s["rss_before_kb"]
    check(back_kb <= 8 * 1024, f"resident memory still {back_kb} kB above what it was after {s['settle_ms']} ms")
    # A stopped collector may also time a frame out (counted lost); the buffers dropped nothing.
    check("buffer cap" not in r.stderr_text, "a cap named on stderr though none was reached")


def small_cap():
    """TORCHPROF_BUFFER_LIMIT=4M and the collector stopped: past the cap events are dropped,
    counted exactly, and the table's notes, summary.json and report.html say why."""
    r, p, s = _stalled_burst(1_500_000, 1.5, {"TORCHPROF_BUFFER_LIMIT": "4M"})
    dropped = r.summary["dropped_events"]
    check(dropped > 0, "a 4 MiB cap held a 46 MiB burst: the test did not stall the collector")
    check_eq(p["events"] + dropped, s["emitted"], "delivered + dropped == emitted")
    check_eq(p["dropped"], dropped, "the process's dropped count")
    check_eq(p["buffer_cap_bytes"], 4 * MIB, "buffer_cap_bytes")
    check(0 < p["buffer_peak_bytes"] <= 4 * MIB, f"peak {p['buffer_peak_bytes']} bytes, cap 4 MiB")
    check_eq(p["buffer_cap_reached"], True, "buffer_cap_reached")
    at = p["buffer_cap_reached_ns"]
    check(at is not None and p["start_ns"] <= at <= p["end_ns"], f"buffer_cap_reached_ns {at} outside the process")
    check(p["loss_note"] and p["loss_note"].startswith("buffer cap of 4 MiB reached at "),
          f"loss_note {p['loss_note']!r}")
    check(f"{dropped} events lost" in r.stderr_text, f"no '{dropped} events lost' after the table")
    check("buffer cap of 4 MiB reached at " in r.stderr_text, "the cap is not named after the table")
    check(any("buffer cap of 4 MiB reached at " in w for w in r.summary["warnings"]), "no warning in summary.json")
    with open(r.file("report.html"), encoding="utf-8") as f:
        html = f.read()
    check("buffer cap of 4 MiB reached at " in html, "report.html does not say why events were lost")
    # Bounded: the program's memory grew by no more than the cap (and its own pages).
    check(s["rss_burst_kb"] - s["rss_before_kb"] <= 4 * 1024 + 2048,
          f"resident memory grew by {s['rss_burst_kb'] - s['rss_before_kb']} kB under a 4 MiB cap")


def bad_limit():
    """A TORCHPROF_BUFFER_LIMIT that is not a size: one line says so, the default stays."""
    r = tp.profile("rel_ends", ["_exit", 5], expect_rc=3, env={"TORCHPROF_BUFFER_LIMIT": "lots"})
    check("TORCHPROF_BUFFER_LIMIT=lots is not a size" in r.stderr_text, "no line about the bad value")
    check_eq(tp.processes_with_events(r.summary)[0]["buffer_cap_bytes"], 256 * MIB, "the default cap")


def _fake_cupti():
    path = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    check(os.path.isfile(path), f"fake libcupti not built: {path}")
    return path


def _gpu_run(kernels, env_extra):
    out = os.path.join(tp.fresh_dir("gpu_cap"), "out")
    env = dict(os.environ, TORCHPROF_CUPTI_LIB=_fake_cupti(), **env_extra)
    env.pop("FAKE_CUPTI_FAIL", None)
    r = tp.run_tool(["-o", out, "--", tp.bin_path("gpu_workload"), f"repeat:{kernels}{{kernel:k:1us}};sync"], env=env)
    r.out_dir = out
    check_eq(r.rc, 0, "exit code of torchprof-run")
    s = r.summary
    got = sum(o["calls"] for o in s["ops"] if o["name"] == "k" and o["kind"] == "kernel")
    return r, s, tp.processes_with_events(s)[0], got


def gpu_cap():
    """CUPTI's activity buffers count against the cap. 100k kernels (some 24 MiB of CUPTI
    records): with the default cap CUPTI gets every buffer it asks for and drops nothing;
    with a 10 MiB cap (the thread's 1 MiB, the GPU stream's 4 MiB, then one 4 MiB buffer
    for CUPTI, whichever asks first) CUPTI, refused past it, drops records and counts them,
    that count is reported, and every kernel is delivered or in it."""
    kernels = 100_000
    r, s, p, got = _gpu_run(kernels, {})
    check_eq(s["cupti_dropped"], 0, "CUPTI's dropped count under the default cap")
    check_eq(got, kernels, "kernels delivered under the default cap")
    r, s, p, got = _gpu_run(kernels, {"TORCHPROF_BUFFER_LIMIT": "10M"})
    check(p["buffer_peak_bytes"] <= 10 * MIB, f"peak {p['buffer_peak_bytes']} bytes under a 10 MiB cap")
    lost_by_us = sum(t["dropped"] for t in p["threads"] if t["tid"] & 0x40000000)  # the GPU stream's
    # CUPTI's count covers records of every kind: the run's device, context and
    # synchronization records may be among those it dropped.
    check(got + s["cupti_dropped"] - 3 <= kernels <= got + s["cupti_dropped"] + lost_by_us,
          f"kernels: {got} delivered, {s['cupti_dropped']} dropped by CUPTI, {lost_by_us} lost of {kernels}")
    check(s["cupti_dropped"] > 0 or p["buffer_peak_bytes"] >= 9 * MIB,
          f"CUPTI was never short of a buffer (peak {p['buffer_peak_bytes']} bytes): the test did not press it")
    if s["cupti_dropped"] > 0:
        check_eq(p["buffer_cap_reached"], True, "buffer_cap_reached when CUPTI was refused")
        check(f"{s['cupti_dropped']} GPU activity records lost (dropped by CUPTI)" in r.stderr_text,
              "CUPTI's count is not said after the table")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (grow_and_release, small_cap, bad_limit, gpu_cap)}))
