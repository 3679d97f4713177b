"""`torchprof export --type sqlite`: a run as a SQLite database in nsys's export schema.

The queries in tests/sql/ use only the schema's documented table and column names, as a
user's queries written for `nsys export --type sqlite` do. They run with Python's
sqlite3 and with the sqlite3 command line on:
- the nvcc-built sample (tests/nvcc/cuda13_sample.cu) against the drop-in runtime and
  the fake libcupti, whose kernels, launches and ranges test_nvcc knows exactly: each
  kernel joined to its launching call, its name, its NVTX range found through the
  call's thread and time, and the nsys stats reports equal to torchprof's --stats;
- a CPU torch run (Debian's torch 1.13): TORCH_OPS per op name and (op, parent) in the
  middle step against torch.profiler's on the same script.
And the file rules: an existing file kept (exit 2) unless --force-overwrite true, a link
at the target replaced and never followed, a missing run refused, a damaged capture
exported as far as it reads.

Needs TP_NVCC_SAMPLES (the sample's directory) besides tp.py's variables."""

import json
import os
import shutil
import sqlite3
import subprocess

import test_gpu_fake as gf
import test_nvcc as nv
import tp
from tp import check, check_eq

SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sql")


def query(db, name):
    with open(os.path.join(SQL_DIR, name + ".sql")) as f:
        sql = f.read()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


def export(args, expect_rc=0):
    argv = [tp.bin_path("torchprof"), "export"] + [str(a) for a in args]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = proc.stderr.decode()
    if expect_rc is not None:
        check_eq(proc.returncode, expect_rc, f"exit code of {' '.join(argv)}: {err[-2000:]}")
    return proc.returncode, err


def stats_tables(path):
    """stats.txt's tables by report id: name -> (total, instances, avg, min, max)."""
    tables, current = {}, None
    with open(path) as f:
        for line in f:
            if line.rstrip().endswith("):") and "(" in line:
                current = tables.setdefault(line.rstrip()[:-2].rsplit("(", 1)[1], {})
                continue
            words = line.split()
            if current is None or len(words) < 9 or not words[0][0].isdigit():
                continue
            try:
                nums = [float(w.replace(",", "")) for w in words[:8]]
            except ValueError:  # the by-size table has seven figures
                continue
            name = line.split(None, 8)[8].rstrip("\n")
            current[name] = (int(nums[1]), int(nums[2]), nums[3], int(nums[5]), int(nums[6]))
    return tables


def sample_run(name="cuda13_sample"):
    result = nv.run_sample(name)
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    return result


def nvcc_sample():
    """Kernels joined to their launches, their names and NVTX ranges, and nsys's stats
    reports computed by SQL equal to torchprof's --stats, on the nvcc-built sample."""
    out_dir = os.path.join(tp.fresh_dir("sqlite_nvcc"), "out")
    env = gf.drop_in_runtime(dict(os.environ))
    result = tp.run_tool(["-o", out_dir, "--stats", "--", nv.sample("cuda13_sample")], timeout=120, env=env)
    result.out_dir = out_dir
    check_eq(result.rc, 0, f"exit code ({result.describe()})")
    _, err = export(["--type", "sqlite", out_dir])
    db = os.path.join(out_dir, "capture.sqlite")
    check(os.path.isfile(db), f"the database beside the capture: {os.listdir(out_dir)}")
    check(db in err and "rows" in err, f"the export says where and how much: {err}")

    # Kernels with their launching calls: every kernel has one, on the right process.
    launches = query(db, "kernel_launches")
    check_eq(len(launches), sum(nv.KERNELS.values()), "kernels joined to a launching call")
    check_eq(sorted({r["api"] for r in launches}), ["__cudaLaunchKernel", "cudaGraphLaunch", "cudaLaunchKernelExC"],
             "the launching calls")
    check(all(r["apiStart"] <= r["kernelStart"] for r in launches), "each kernel starts after its launch began")
    pid = tp.processes_with_events(result.summary)[0]["pid"]
    check_eq({r["pid"] for r in launches}, {pid}, "the pid decoded from globalTid")
    names = {}
    for r in launches:
        names[r["kernel"]] = names.get(r["kernel"], 0) + 1
    check_eq(names, nv.KERNELS, "kernels per shortName")

    # Each kernel's NVTX range through its launching call's thread and time.
    self_cuda = {}
    for r in query(db, "kernel_ranges"):
        self_cuda[r["range"]] = self_cuda.get(r["range"], 0) + r["duration"]
    check_eq(self_cuda, nv.RANGES, "kernel time per innermost NVTX range (the table's Self CUDA)")
    total = {}
    for r in query(db, "nvtx_kern_sum"):
        total[r["range"]] = total.get(r["range"], 0) + r["total"]
    check_eq(total, {k: nv.TOTALS.get(k, v) for k, v in nv.RANGES.items()}, "nvtx_kern_sum per range (CUDA total)")

    # nsys's stats reports, as SQL, against --stats.
    stats = stats_tables(os.path.join(out_dir, "stats.txt"))
    for report, key in (("cuda_gpu_kern_sum", "name"), ("cuda_api_sum", "name"), ("nvtx_sum", "name")):
        rows = query(db, report)
        ours = stats.get(report)
        check(ours, f"stats.txt has {report}: {sorted(stats)}")
        got = {r[key]: (r["total"], r["instances"], round(r["average"], 1), r["minimum"], r["maximum"]) for r in rows}
        want = {n: (t, i, round(a, 1), lo, hi) for n, (t, i, a, lo, hi) in ours.items()}
        check_eq(got, want, f"{report} by SQL and by --stats")
    threads = query(db, "thread_summary")
    want_threads = {t["tid"]: t["name"] for t in tp.processes_with_events(result.summary)[0]["threads"]}
    check_eq({t["tid"]: t["thread"] for t in threads}, want_threads, "ThreadNames")
    check_eq(sum(t["apiCalls"] for t in threads), sum(r[1] for r in stats["cuda_api_sum"].values()),
             "API calls per thread add up")

    # The sqlite3 command line reads the same.
    sqlite_cli = shutil.which("sqlite3")
    check(sqlite_cli, "the sqlite3 command line (scripts/setup.sh --tests installs it)")
    with open(os.path.join(SQL_DIR, "cuda_gpu_kern_sum.sql")) as f:
        cli = subprocess.run([sqlite_cli, "-json", "-readonly", db], input=f.read().encode(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=60)
    check_eq(cli.returncode, 0, f"sqlite3: {cli.stderr.decode()}")
    check_eq(json.loads(cli.stdout), query(db, "cuda_gpu_kern_sum"), "sqlite3 -json and Python's sqlite3")

    # The schema's own numbers: event types, enum labels, processes, GPUs.
    con = sqlite3.connect(db)
    types = {t for (t,) in con.execute("SELECT DISTINCT eventType FROM NVTX_EVENTS")}
    check_eq(types, {59}, "NVTX event types (push/pop ranges)")
    labels = dict(con.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER"))
    kinds = [labels[k] for (k,) in con.execute("SELECT copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY")]
    check(kinds and all(k in ("Host-to-Device", "Device-to-Host") for k in kinds), f"memcpy kinds: {kinds}")
    check_eq([p for (p,) in con.execute("SELECT pid FROM PROCESSES")], [pid], "PROCESSES")
    gpus = list(con.execute("SELECT id, name FROM TARGET_INFO_GPU"))
    check(len(gpus) == 1 and gpus[0][1], f"TARGET_INFO_GPU: {gpus}")
    con.close()


def existing_file():
    """An existing database is kept unless --force-overwrite true; a link at the target
    is replaced, never followed; nothing is left behind by a refused export."""
    result = sample_run()
    db = os.path.join(result.out_dir, "capture.sqlite")
    export(["--type", "sqlite", result.out_dir])
    with open(db, "rb") as f:
        first = f.read()
    rc, err = export(["--type", "sqlite", result.out_dir], expect_rc=2)
    lines = [line for line in err.splitlines() if line.strip()]
    check(len(lines) == 1 and "exists" in lines[0] and "--force-overwrite true" in lines[0], f"one line: {lines}")
    with open(db, "rb") as f:
        check(f.read() == first, "the existing file is unchanged")
    export(["--type", "sqlite", "--force-overwrite", "true", result.out_dir])
    con = sqlite3.connect(db)
    check_eq(con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0], sum(nv.KERNELS.values()),
             "the replaced database's kernels")
    con.close()
    # -o without the extension gets it, as nsys names it.
    named = os.path.join(tp.fresh_dir("sqlite_named"), "run")
    export(["-t", "sqlite", "-o", named, result.out_dir])
    check(os.path.isfile(named + ".sqlite"), "-o run writes run.sqlite")
    # A link someone left at the name: refused without force, replaced (not followed) with it.
    victim = os.path.join(tp.fresh_dir("sqlite_victim"), "victim")
    with open(victim, "w") as f:
        f.write("keep me")
    link = os.path.join(os.path.dirname(named), "linked.sqlite")
    os.symlink(victim, link)
    export(["-t", "sqlite", "-o", link, result.out_dir], expect_rc=2)
    export(["-t", "sqlite", "-o", link, "--force-overwrite", "true", result.out_dir])
    check(not os.path.islink(link) and os.path.isfile(link), "the link is replaced by the database")
    with open(victim) as f:
        check_eq(f.read(), "keep me", "the link's target")
    left = [n for n in os.listdir(os.path.dirname(named)) if n.endswith(".partial")]
    check_eq(left, [], "no partial files left")


def missing_run():
    """A missing or unreadable run: one line, exit code 2, nothing written."""
    where = tp.fresh_dir("sqlite_missing")
    rc, err = export(["--type", "sqlite", os.path.join(where, "nothing_here")], expect_rc=2)
    lines = [line for line in err.splitlines() if line.strip()]
    check(len(lines) == 1 and "nothing_here" in lines[0], f"one line naming the run: {lines}")
    rc, err = export(["--type", "csv", where], expect_rc=2)
    check("sqlite" in err, f"the types it knows: {err}")
    check_eq(os.listdir(where), [], "nothing written")


def damaged():
    """A capture cut short exports what it holds and says so."""
    result = sample_run()
    cut_dir = tp.fresh_dir("sqlite_cut")
    capture = os.path.join(result.out_dir, "capture.tprof")
    with open(capture, "rb") as f:
        data = f.read()
    with open(os.path.join(cut_dir, "capture.tprof"), "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    _, err = export(["--type", "sqlite", cut_dir])
    check("ends early" in err, f"the export says the capture ends early: {err}")
    con = sqlite3.connect(os.path.join(cut_dir, "capture.sqlite"))
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    check("StringIds" in tables and "PROCESSES" in tables, f"tables of what it held: {sorted(tables)}")
    con.close()


def torch_ops():
    """TORCH_OPS of a CPU torch run against torch.profiler on the same script: calls per
    op name and per (op, parent) in the middle step."""
    import test_torch_ops as to

    theirs_steps = to.torch_view("transformer")["steps"]
    theirs = theirs_steps[to.MIDDLE]
    beside = [theirs_steps[k] for k in (to.MIDDLE - 1, to.MIDDLE + 1)]
    _, env = to.cache_env()
    r = to.run_py([to.PROGRAM, "transformer", str(to.STEPS)], options=["--pytorch-ops"], env=env, timeout=600)
    export(["--type", "sqlite", r.out_dir])
    db = os.path.join(r.out_dir, "capture.sqlite")
    # Calls, self and total time by name from the op tree equal torchprof's own table.
    table = {o["name"]: (o["calls"], o["self_cpu_ns"], o["cpu_total_ns"]) for o in r.summary["ops"]
             if o.get("kind") == "cpu_op"}
    by_sql = {q["name"]: (q["calls"], q["self"], q["total"]) for q in query(db, "torch_ops_by_name")}
    check_eq(by_sql, table, "torch_ops_by_name.sql and the table's cpu_op rows")
    con = sqlite3.connect(db)
    steps = list(con.execute(
        "SELECT s.start, s.end FROM TORCH_STEPS AS t JOIN StringIds AS n ON n.id = t.nameId, "
        "(SELECT t2.start, t2.end FROM TORCH_STEPS AS t2 JOIN StringIds AS n2 ON n2.id = t2.nameId "
        " WHERE n2.value = ?) AS s WHERE n.value = ?", (f"ProfilerStep#{to.MIDDLE}", f"ProfilerStep#{to.MIDDLE}")))
    check_eq(len(steps), 1, "the middle step in TORCH_STEPS")
    lo, hi = steps[0]
    rows = con.execute(
        "SELECT n.value, coalesce(p.value, '') FROM TORCH_OPS AS o JOIN StringIds AS n ON n.id = o.nameId "
        "LEFT JOIN TORCH_OPS AS po ON po.id = o.parentId LEFT JOIN StringIds AS p ON p.id = po.nameId "
        "WHERE o.start >= ? AND o.end <= ?", (lo, hi)).fetchall()
    con.close()
    names, pairs = {}, {}
    for name, parent in rows:
        if name.startswith("ProfilerStep#"):
            continue
        parent = "" if parent.startswith("ProfilerStep#") else parent
        names[name] = names.get(name, 0) + 1
        pairs[name + "\t" + parent] = pairs.get(name + "\t" + parent, 0) + 1
    noisy = {n for n, c in theirs["names"].items() if any(b["names"].get(n) != c for b in beside)}
    want = {n: c for n, c in theirs["names"].items() if n not in noisy}
    got = {n: names.get(n) for n in want}
    equal = [n for n in want if got[n] == want[n]]
    print(f"TORCH_OPS: {len(want)} names, {len(equal)} with torch's calls; {sum(names.values())} ops in the step")
    check(len(equal) / len(want) >= 0.98, f"calls per name: {[(n, want[n], got[n]) for n in want if n not in equal]}")
    noisy_pairs = {k for k, c in theirs["pairs"].items() if any(b["pairs"].get(k) != c for b in beside)}
    want_pairs = {k: c for k, c in theirs["pairs"].items() if k not in noisy_pairs}
    same = sum(min(c, pairs.get(k, 0)) for k, c in want_pairs.items())
    check(same / sum(want_pairs.values()) >= 0.98,
          f"(op, parent) calls equal: {same} of {sum(want_pairs.values())}")


def op_launches():
    """TORCH_OP_LAUNCHES: the memset a torch op's CPU kernel makes (ops_gpu.py, on the
    drop-in runtime) joined to the op through its launching call, with the time the
    drop-in runtime's rule gives (1 us + B/100 ns)."""
    import test_torch_ops as to
    from test_python import script

    steps = 4
    set_ns = sum(1000 + 1000 * (k + 1) // 100 for k in range(steps))
    _, env = to.cache_env()
    gf.drop_in_runtime(env)
    r = to.run_py([script("ops_gpu.py"), str(steps)], options=["--pytorch-ops"], env=env, timeout=300)
    export(["--type", "sqlite", r.out_dir])
    con = sqlite3.connect(os.path.join(r.out_dir, "capture.sqlite"))
    rows = con.execute(
        "SELECT s.value, count(*), sum(m.end - m.start) FROM TORCH_OP_LAUNCHES AS l "
        "JOIN TORCH_OPS AS o ON o.id = l.opId JOIN StringIds AS s ON s.id = o.nameId "
        "JOIN CUPTI_ACTIVITY_KIND_MEMSET AS m ON m.globalPid = l.globalPid AND m.correlationId = l.correlationId "
        "GROUP BY o.nameId").fetchall()
    check_eq(rows, [("tp_gpu::fill", steps, set_ns)], "memsets per launching op")
    parents = con.execute(
        "SELECT DISTINCT p.value FROM TORCH_OPS AS o JOIN StringIds AS s ON s.id = o.nameId "
        "JOIN TORCH_OPS AS po ON po.id = o.parentId JOIN StringIds AS p ON p.id = po.nameId "
        "WHERE s.value = 'tp_gpu::fill'").fetchall()
    check_eq(parents, [("gpu_section",)], "the op's parent (record_function's range)")
    con.close()


def tensor_memory():
    """TORCH_MEMORY (--profile-memory): one row per tensor allocation and free of the
    trace's [memory] events, with the same bytes, each in the step that holds it; a leaking loop's
    live bytes at its last step boundary above its first."""
    import test_memory as tm

    r, leak = tm.loop("append")
    check(leak is not None, "the loop leaks")
    export(["--type", "sqlite", r.out_dir])
    con = sqlite3.connect(os.path.join(r.out_dir, "capture.sqlite"))
    rows = con.execute("SELECT timestamp, bytes, deviceType, stepId FROM TORCH_MEMORY ORDER BY timestamp, rowid").fetchall()
    events = [e for e in tp.all_trace_events(r, ph="i", name="[memory]")]
    check_eq(len(rows), len(events), "TORCH_MEMORY rows and the traces' [memory] events")
    check_eq(sorted(b for _, b, _, _ in rows), sorted(e["args"]["Bytes"] for e in events), "their bytes")
    check(sum(step is not None for _, _, _, step in rows) > len(rows) // 2, "the rows of the steps")
    misplaced = con.execute(
        "SELECT count(*) FROM TORCH_MEMORY AS m WHERE (m.stepId IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
        "TORCH_STEPS AS s WHERE s.id = m.stepId AND m.timestamp BETWEEN s.start AND s.end)) OR (m.stepId IS NULL "
        "AND EXISTS (SELECT 1 FROM TORCH_STEPS AS s WHERE m.timestamp > s.start AND m.timestamp < s.end))").fetchone()[0]
    check_eq(misplaced, 0, "rows whose step does not hold them, or outside every step but inside one")
    # Live bytes at the end of each step, from the running sum: the leak makes them grow.
    ends = con.execute(
        "WITH live AS (SELECT stepId, timestamp, sum(bytes) OVER (ORDER BY timestamp, rowid) AS b FROM TORCH_MEMORY) "
        "SELECT l.stepId, (SELECT b FROM live AS l2 WHERE l2.stepId = l.stepId ORDER BY timestamp DESC LIMIT 1) "
        "FROM live AS l WHERE l.stepId IS NOT NULL GROUP BY l.stepId ORDER BY l.stepId").fetchall()
    con.close()
    check(len(ends) >= 3 and ends[-1][1] - ends[0][1] >= leak["bytes_per_step"] * (len(ends) - 2),
          f"live bytes at each step's end grow by the leak: {ends}, {leak['bytes_per_step']} a step")


SCENARIO_FUNCS = {"tensor_memory": tensor_memory, "op_launches": op_launches, "nvcc_sample": nvcc_sample, "existing_file": existing_file, "missing_run": missing_run,
                  "damaged": damaged, "torch_ops": torch_ops}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIO_FUNCS))
