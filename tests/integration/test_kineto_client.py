"""torch.profiler inside a torchprof run keeps its GPU data: a CUPTI client that makes
Kineto's own calls, in Kineto's order, at the kineto commits of torch 2.4 (b7b1fbe6) and
torch 2.11 (dfce61c9), written from Kineto's sources into
tests/fake_cupti/kineto_sequences/ (each call with its kineto file:line). The client runs
in gpu_workload (kineto_start / kineto_stop, tests/fake_cupti/kineto_client.h) and checks
what torch.profiler's user would see: every call returns what CUPTI gives a lone client,
its own buffers come back, and it gets every kernel and copy launched while it was on, on
its own clock (torch 2.4: CUPTI's, Unix-epoch ns; 2.11: its TSC timestamp callback's),
each with the external correlation id it pushed around the launch.

Each scenario runs the client twice: against the fake libcupti alone, where it must pass
(the fake behaves as CUPTI does: one subscriber, process-wide activity settings), and
under torchprof-run, where torchprof holds CUPTI's one subscriber from the client's first
call (before CUDA starts: profile() around model.cuda()) and must still have every kernel
on its own clock, in its NVTX range, exactly as without the client.

Needs tp.py's variables; the fake library is found as in test_gpu_fake.py."""

import os
import re
import subprocess

import test_cupti_real as cr
import test_gpu_fake as gf
import tp
from tp import check, check_eq

COMMITS = ("b7b1fbe6", "dfce61c9")
WORK = ("range:step{name}{{ kernel:_Z7forwardPf:400us ; memcpy:htod:65536:30us ; kernel:_Z8backwardPf:800us ;"
        " memcpy:dtoh:4096:20us }} ; sync")
LINE = re.compile(r"kineto client (\w+): session (\d+): (\d+) kernels and (\d+) other records on its (\S+) clock")


def script(commit, options="", sessions=2, between=True):
    """Kineto's sessions around steps of work; the first starts before CUDA does."""
    start = f"kineto_start:{commit}{options}"
    parts = []
    for s in range(sessions):
        parts += [start, WORK.format(name=s), "kineto_stop"]
        if between:
            parts.append("range:between{ kernel:_Z7betweenv:100us } ; sync")
    return " ; ".join(parts)


def without_client(text):
    return " ; ".join(p for p in text.split(" ; ") if not p.startswith(("kineto_start", "kineto_stop")))


def client_lines(stderr):
    """(session, kernels, other records, clock) the client reported, in order."""
    return [(int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5)) for m in LINE.finditer(stderr)]


def alone(text, env=None):
    """gpu_workload against the fake libcupti alone, no torchprof."""
    run_env = dict(os.environ, FAKE_CUPTI_PATH=gf.fake_cupti(), **(env or {}))
    for key in ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "TORCHPROF_SOCKET", "FAKE_CUPTI_FAIL"):
        run_env.pop(key, None)
    proc = subprocess.run([tp.bin_path("gpu_workload"), text], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60, env=run_env)
    stderr = proc.stderr.decode(errors="replace")
    check_eq(proc.returncode, 0, f"the client against the fake alone ({stderr[-2000:]})")
    return client_lines(stderr)


def gpu_rows(summary):
    return {o.get("mangled_name", o["name"]): (o["calls"], o["self_cuda_ns"])
            for o in gf.ops_of_kind(summary, "kernel", "memcpy", "memset")}


def range_rows(summary):
    return {o["name"]: (o["calls"], o["self_cuda_ns"], o["cuda_total_ns"]) for o in gf.ops_of_kind(summary, "nvtx")}


def under_torchprof(text, env=None):
    """The client under torchprof-run: exit 0 (the client's checks), torchprof's own
    expectations of the workload, and the same rows as the run without the client."""
    result = cr.full_check(text, env=env)
    reported = client_lines(result.stderr_text)
    check("each returned what CUPTI gives a lone client" in result.stderr_text,
          f"the client's calls under torchprof: {result.stderr_text[-2000:]}")
    clients = result.summary["processes"][0].get("cupti_clients")
    check(clients and clients[0]["path"] == "forwarded" and clients[0]["library"] == "gpu_workload",
          f"processes[].cupti_clients: {clients}")
    plain = cr.run_workload(without_client(text), env)
    check_eq(plain.rc, 0, f"the workload without the client ({plain.describe()})")
    check_eq(gpu_rows(result.summary), gpu_rows(plain.summary), "GPU rows with the client, and without")
    check_eq(range_rows(result.summary), range_rows(plain.summary), "NVTX rows with the client, and without")
    return result, reported


def check_sessions(reported, sessions, clock):
    check_eq([r[0] for r in reported], list(range(1, sessions + 1)), f"sessions reported: {reported}")
    for session, kernels, others, got_clock in reported:
        check_eq(kernels, 2, f"kernels of session {session}")
        check_eq(others, 2, f"copies of session {session}")
        check_eq(got_clock, clock, f"the client's clock in session {session}")


def run_commit(commit, options="", env=None):
    text = script(commit, options)
    clock = "system_clock" if commit == "b7b1fbe6" else "TSC"
    by_itself = alone(text, env)
    check_sessions(by_itself, 2, clock)
    result, reported = under_torchprof(text, env)
    check_eq(reported, by_itself, "what the client got under torchprof, and alone")
    return result


def kineto_b7b1fbe6():
    """torch 2.4's Kineto: no clock of its own (CUPTI's, compared with system_clock), on the
    CUPTI of CUDA 12.4 (torch 2.4's cu124 wheels) and of CUDA 13.0."""
    for version in ("22", "130001"):
        print(f"CUPTI API version {version}")
        run_commit("b7b1fbe6", env={"FAKE_CUPTI_VERSION": version})


def kineto_dfce61c9():
    """torch 2.11's Kineto: its TSC timestamp callback, API record filters, the per-thread
    buffer attribute written after every flush, OVERHEAD records."""
    for version in ("130001", "130100"):
        print(f"CUPTI API version {version}")
        run_commit("dfce61c9", env={"FAKE_CUPTI_VERSION": version})


def kineto_teardown():
    """TEARDOWN_CUPTI=1: after each session Kineto enables the runtime and driver domains,
    then unsubscribes and finalizes inside the next runtime call's callback, and subscribes
    again at the next session. Its finalize ends its own CUPTI use only: torchprof records
    every kernel after it."""
    for commit in COMMITS:
        print(f"kineto {commit}")
        run_commit(commit, ":teardown")


def kineto_sync_events():
    """enable_cuda_sync_events: the client's SYNCHRONIZATION records (and, at torch 2.11,
    CUDA event device timestamps) beside torchprof's."""
    run_commit("dfce61c9", ":sync")


def kineto_subscriber_taken():
    """A tool outside the program holds CUPTI's one subscriber (FAKE_CUPTI_FAIL=subscriber):
    the client's subscribe fails as it would alone (Kineto goes CPU-only), torchprof says
    that GPU tracing is off, and the ranges are still recorded."""
    text = script("b7b1fbe6", sessions=1, between=False)
    result = cr.run_workload(text, {"FAKE_CUPTI_FAIL": "subscriber"})
    check_eq(result.rc, 1, f"the client's exit code: it found CUPTI taken ({result.describe()})")
    check("MULTIPLE_SUBSCRIBERS" in result.stderr_text and "CPU-only" in result.stderr_text,
          f"the client's lines: {result.stderr_text[-1500:]}")
    check_eq(result.summary["processes"][0].get("gpu_tracing"), "off", "gpu_tracing")
    check_eq(gf.nvtx_row(result.summary, "step0")["calls"], 1, "the NVTX range")


SCENARIO_FUNCS = {f.__name__: f for f in (kineto_b7b1fbe6, kineto_dfce61c9, kineto_teardown, kineto_sync_events,
                                          kineto_subscriber_taken)}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIO_FUNCS))
