#!/usr/bin/env python3
"""End-to-end checks of libtorchprof_inject.so without the real collector.

Runs nvtx_driver scenarios under mini_collector and asserts what the rest of
torchprof relies on: handshake fields, names resolved, exit kinds and statuses,
fork/exec giving new connections, and recorded + dropped == emitted per thread
and per process. Usage: check_inject.py LIB DRIVER   (exit 0 = all passed)
"""
import os, subprocess, sys, tempfile, threading

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mini_collector as mc  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


def run(lib, driver, argv, connections, extra_env=None, status=0):
    sock = os.path.join(tempfile.mkdtemp(prefix="tpinj"), "s")
    args = mc.parse_args([sock, "--connections", str(connections), "--status", str(status), "--timeout", "20"])
    args.print = False
    srv = mc.listen(sock)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", mc.collect(srv, args)))
    t.start()
    env = dict(os.environ, LD_PRELOAD=lib, NVTX_INJECTION64_PATH=lib, TORCHPROF_LIB=lib, TORCHPROF_SOCKET=sock)
    env.update(extra_env or {})
    proc = subprocess.run([driver] + argv, env=env, capture_output=True, text=True, timeout=60)
    t.join()
    srv.close()
    return proc, sorted(out["r"], key=lambda r: r["hello"]["pid"])


def accounting_ok(r):
    """recorded + dropped == emitted, per thread (last kDropped) and per process (Bye)."""
    ok = r["bye"] is not None and r["records"] + r["bye"]["dropped"] == r["bye"]["emitted"]
    for th in r["threads"].values():
        d = th["last_dropped"]
        ok = ok and d is not None and th["heads"] + d[0] == d[1]
    return ok


def main():
    lib, driver = sys.argv[1], sys.argv[2]
    proc, rs = run(lib, driver, ["all"], 1)
    r = rs[0]
    check(proc.returncode == 0 and "levels 0 1 pops 1 0 empty -1" in proc.stdout, "all: push/pop levels")
    check(r["hello"]["magic"] == "TPRFHLO1" and r["hello"]["pid"] > 0 and r["hello"]["argv"][-1] == "all", "all: hello")
    check(r["unresolved_names"] == 0 and r["seq_gaps"] == 0 and r["ts_monotonic_per_thread"], "all: names/seq/ts")
    for name in ["mark:mark_a", "mark:mark_w_\u00e9\u4e2d", "push:outer", "push:inner_w", "push:registered_name",
                 "push:ex_ascii", "mark:ex_ascii", "start:cross_thread", "push:worker_op"]:
        check(r["names"].get(name) == 1, "all: " + name)
    check("my_domain" in r["domains"].values(), "all: domain defined")
    check(len(r["threads"]) == 2 and accounting_ok(r) and r["bye"]["dropped"] == 0, "all: accounting")

    for argv, kind, status, rc in [(["exit", "7"], 0, 7, 7), (["return", "4"], 0, 4, 4), (["_exit", "3"], 0, 3, 3),
                                   (["crash"], 1, 11, -11), (["abort"], 1, 6, -6)]:
        proc, rs = run(lib, driver, argv, 1)
        check(proc.returncode == rc, f"{argv[0]}: return code {proc.returncode}")
        check(len(rs) == 1 and rs[0]["bye"] == {"kind": kind, "status": status, "emitted": 5, "dropped": 0},
              f"{argv[0]}: bye {rs[0]['bye'] if rs else None}")

    proc, rs = run(lib, driver, ["fork"], 2)
    check(len(rs) == 2 and rs[1]["hello"]["ppid"] == rs[0]["hello"]["pid"], "fork: child is a new connection")
    check(len(rs) == 2 and rs[1]["bye"]["status"] == 5 and "push:child" in rs[1]["names"], "fork: child events")
    check(len(rs) == 2 and "forked_domain" in rs[1]["domains"].values(), "fork: registry re-emitted in child")

    proc, rs = run(lib, driver, ["exec"], 2)
    check(proc.returncode == 9 and len(rs) == 2, "exec: scrubbed env still profiled")
    check(len(rs) == 2 and rs[0]["bye"]["kind"] == 2 and rs[1]["bye"]["kind"] == 0 and rs[1]["bye"]["status"] == 9,
          "exec: Bye(kExec) then the new image's Bye")

    # Buffers that cannot grow (the cap below what the threads' first buffers hold): drops.
    proc, rs = run(lib, driver, ["threads", "100000"], 1, {"TORCHPROF_BUFFER_KB": "16", "TORCHPROF_BUFFER_LIMIT": "64K"})
    check(len(rs) == 1 and accounting_ok(rs[0]), "threads: recorded + dropped == emitted (small buffer)")
    check(len(rs) == 1 and rs[0]["bye"] is not None and rs[0]["bye"]["emitted"] >= 4 * 200000,
          "threads: every record counted")
    check(len(rs) == 1 and rs[0]["bye"] is not None and rs[0]["bye"]["dropped"] > 0, "threads: the cap made drops")
    check(len(rs) == 1 and rs[0].get("buffer_cap") == 64 << 10, "threads: the flusher says the cap")

    proc, rs = run(lib, driver, ["exit", "2"], 1, status=3)
    check(proc.returncode == 2 and "refused" in proc.stderr and rs and rs[0]["frames"] == 0, "refused: silent, rc kept")

    env = dict(os.environ, LD_PRELOAD=lib, TORCHPROF_SOCKET="/nonexistent/x.sock", TORCHPROF_LOG_LEVEL="off")
    proc = subprocess.run([driver, "exit", "6"], env=env, capture_output=True, text=True, timeout=30)
    check(proc.returncode == 6 and proc.stderr == "", "no collector: rc kept, quiet at log level off")

    print("inject checks:", "FAILED" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
