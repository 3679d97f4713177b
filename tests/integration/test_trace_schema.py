"""Traces against the structure of real Kineto traces (the fixtures under
tests/fixtures/kineto): the top-level keys, the args every event of a category
carries, ac2g flows in pairs, children inside their parents per thread, X events
with ts and dur >= 0, ProfilerStep#N rows for the recorded steps, file names the
TensorBoard plugin accepts and the rank where HTA looks for it.

Runs with RANK=3 WORLD_SIZE=8 in the environment: a CPU run (nvtx_steps under a
schedule) and fake-GPU runs (gpu_workload nested / streams, needs the fake libcupti)."""

import glob
import gzip
import json
import os
import re

import tp
from tp import check, check_eq

RANK, WORLD_SIZE = 3, 8
HTA_RANK_RE = re.compile(r'"rank": (\d+)')  # HTA reads the rank from the file's text this way
# Top-level keys of the fixtures that describe the producer, not the trace: Kineto's
# log lines and versions of CUPTI/CUDA/record_shapes that torch's profiler records.
PRODUCER_KEYS = {"INFO", "cupti_version", "cuda_runtime_version", "cuda_driver_version", "record_shapes"}
US_EPS = 0.0015  # ts and dur are µs with three decimals


def load_fixtures():
    paths = sorted(glob.glob(tp.fixture("kineto/*.json.gz")))
    check(paths, f"no Kineto fixtures under {tp.fixture('kineto')}")
    out = []
    for p in paths:
        with gzip.open(p, "rb") as f:
            out.append((os.path.basename(p), json.loads(f.read().decode("utf-8"))))
    return out


def fixture_keys(fixtures):
    keys = set()
    for _, t in fixtures:
        keys |= set(t)
    return keys - PRODUCER_KEYS


def required_args(fixtures):
    """{cat: arg names}: per fixture, the args every X event of the category carries;
    then what all fixtures that give that category any args agree on (an older
    fixture's argless user_annotation, or a linked vs an unlinked runtime call, do
    not make an arg optional that the other fixture always writes, and vice versa)."""
    per_cat = {}
    for _, t in fixtures:
        common = {}
        for ev in t["traceEvents"]:
            if ev.get("ph") != "X" or "cat" not in ev:
                continue
            names = set(ev.get("args", {}))
            common[ev["cat"]] = names if ev["cat"] not in common else common[ev["cat"]] & names
        for cat, names in common.items():
            if names:
                per_cat[cat] = names if cat not in per_cat else per_cat[cat] & names
    return per_cat


def run_with_rank(prog_path, args, options=()):
    parent = tp.fresh_dir(os.path.basename(prog_path))
    out_dir = os.path.join(parent, "out")
    env = dict(os.environ, RANK=str(RANK), WORLD_SIZE=str(WORLD_SIZE), TP_TRUTH_FILE=os.path.join(parent, "truth"))
    env.pop("FAKE_CUPTI_FAIL", None)
    lib = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    if os.path.isfile(lib):
        env["TORCHPROF_CUPTI_LIB"] = lib
    r = tp.run_tool(["-o", out_dir] + list(options) + ["--", prog_path] + [str(a) for a in args], timeout=120, env=env)
    r.out_dir = out_dir
    check_eq(r.rc, 0, "exit code of torchprof-run")
    return r


def raw_text(path):
    with open(path, "rb") as f:
        data = f.read()
    return (gzip.decompress(data) if path.endswith(".gz") else data).decode("utf-8")


def check_top_level(base, trace, keys, text):
    for key in sorted(keys):
        check(key in trace, f"{base}: top-level key {key!r} of the Kineto fixtures is missing")
    check_eq(trace["schemaVersion"], 1, f"{base}: schemaVersion")
    check_eq(trace["displayTimeUnit"], "ms", f"{base}: displayTimeUnit")
    check(isinstance(trace["baseTimeNanoseconds"], int) and trace["baseTimeNanoseconds"] > 1e18,
          f"{base}: baseTimeNanoseconds must be Unix-epoch ns: {trace['baseTimeNanoseconds']!r}")
    check(isinstance(trace["deviceProperties"], list), f"{base}: deviceProperties must be a list")
    check_eq(trace["distributedInfo"].get("rank"), RANK, f"{base}: distributedInfo.rank")
    check_eq(trace["distributedInfo"].get("world_size"), WORLD_SIZE, f"{base}: distributedInfo.world_size")
    m = HTA_RANK_RE.search(text)
    check(m and int(m.group(1)) == RANK, f"{base}: HTA's rank regex finds {m and m.group(0)!r}, not rank {RANK}")


def check_args(base, trace, required, fixture_cats):
    ours = {ev.get("cat") for ev in tp.trace_events(trace, ph="X")}
    for ev in tp.trace_events(trace, ph="X"):
        cat = ev.get("cat")
        missing = required.get(cat, set()) - set(ev.get("args", {}))
        check(not missing, f"{base}: {cat} event {ev.get('name')!r} lacks args {sorted(missing)} "
                           f"that the Kineto fixtures' {cat} events carry: {ev}")
    return ours & fixture_cats


def check_flows(base, trace):
    starts, finishes = {}, {}
    for ev in trace["traceEvents"]:
        if ev.get("cat") != "ac2g" or ev.get("ph") not in ("s", "f"):
            continue
        side = starts if ev["ph"] == "s" else finishes
        side[ev["id"]] = side.get(ev["id"], 0) + 1
        check("ts" in ev and "pid" in ev and "tid" in ev, f"{base}: flow event without ts/pid/tid: {ev}")
        if ev["ph"] == "f":
            check_eq(ev.get("bp"), "e", f"{base}: bp of flow finish {ev['id']}")
    for fid, n in starts.items():
        check_eq((n, finishes.get(fid, 0)), (1, 1), f"{base}: (starts, finishes) of ac2g flow {fid}")
    for fid, n in finishes.items():
        check_eq((starts.get(fid, 0), n), (1, 1), f"{base}: (starts, finishes) of ac2g flow {fid}")
    return len(starts)


def check_nesting(base, trace):
    """Per (pid, tid): X events sorted by (ts, longer first) form a tree: each one
    starts at or after its parent and ends at or before it, or starts after it ended.
    cuda_sync events are left out: they span the host's wait (CUPTI's start and end of
    the synchronising call), which may begin while a kernel of that stream runs and
    end after it, as in Kineto's traces."""
    rows = {}
    for ev in tp.trace_events(trace, ph="X"):
        check("ts" in ev and "dur" in ev, f"{base}: X event without ts and dur: {ev}")
        check(float(ev["dur"]) >= 0, f"{base}: negative dur: {ev}")
        if isinstance(ev.get("pid"), int) and ev.get("cat") != "cuda_sync":
            rows.setdefault((ev["pid"], ev["tid"]), []).append(ev)
    for key, evs in rows.items():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack = []
        for ev in evs:
            start, end = float(ev["ts"]), float(ev["ts"]) + float(ev["dur"])
            while stack and stack[-1][1] <= start + US_EPS and stack[-1][1] < end:
                stack.pop()
            if stack:
                p_start, p_end, p_name = stack[-1]
                check(p_start <= start + US_EPS and end <= p_end + US_EPS,
                      f"{base}: {ev['name']!r} [{start}, {end}] overlaps {p_name!r} [{p_start}, {p_end}] "
                      f"on pid/tid {key} without nesting in it")
            stack.append((start, end, ev["name"]))


def check_steps(base, trace, expected):
    names = {ev["name"] for ev in tp.trace_events(trace, ph="X", cat="user_annotation")
             if ev["name"].startswith("ProfilerStep#")}
    check_eq(names, {f"ProfilerStep#{k}" for k in expected}, f"{base}: ProfilerStep#N user_annotation events")


def check_run(result, expected_steps_per_file):
    """Every trace of the run; returns the categories checked against the fixtures."""
    fixtures = load_fixtures()
    keys, required = fixture_keys(fixtures), required_args(fixtures)
    fixture_cats = set(required)
    tp.validate_traces(result)
    paths = [p for p, _ in result.traces]
    check_eq(len(paths), len(expected_steps_per_file), f"trace files {paths}")
    summary_steps = {s["index"]: s for s in result.summary["steps"]}
    compared, flows = set(), 0
    for (path, trace), steps in zip(sorted(result.traces, key=lambda pt: pt[0]), expected_steps_per_file):
        base = os.path.basename(path)
        m = tp.TRACE_NAME_RE.match(base)
        check(m and m.group(2), f"{base}: the TensorBoard plugin's regex does not take it as <worker>.<n>.pt.trace.json")
        check_top_level(base, trace, keys, raw_text(path))
        compared |= check_args(base, trace, required, fixture_cats)
        flows += check_flows(base, trace)
        check_nesting(base, trace)
        check_steps(base, trace, steps)
        for k in steps:
            check(summary_steps[k]["action"] in ("record", "record_and_save"), f"step {k} traced but not recorded")
    return compared, flows


def cpu():
    r = run_with_rank(tp.program("nvtx_steps"), [8, 2, 2, 1], ["--schedule", "wait=1,warmup=1,active=2,repeat=2"])
    compared, _ = check_run(r, [[2, 3], [6, 7]])
    check("user_annotation" in compared, f"no user_annotation events compared with the fixtures: {compared}")


def gpu_run(scenario):
    gpu = tp.bin_path("gpu_workload")
    check(os.path.exists(gpu), f"{gpu} is not built")
    return run_with_rank(gpu, [scenario])


def gpu_nested():
    r = gpu_run("nested")
    compared, flows = check_run(r, [[]])
    for cat in ("user_annotation", "kernel", "cuda_runtime"):
        check(cat in compared, f"no {cat} events compared with the fixtures (compared: {sorted(compared)})")
    check(flows > 0, "no ac2g flows in the nested scenario's trace")


def gpu_streams():
    r = gpu_run("streams")
    compared, flows = check_run(r, [[]])
    for cat in ("kernel", "gpu_memcpy", "cuda_runtime"):
        check(cat in compared, f"no {cat} events compared with the fixtures (compared: {sorted(compared)})")
    check(flows > 0, "no ac2g flows in the streams scenario's trace")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (cpu, gpu_nested, gpu_streams)}))
