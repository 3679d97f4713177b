"""--with-modules: nn.Module calls through torch's global module hooks, written as torch's
Python tracer writes them (python_function events "nn.Module: <Class>_<n>" with Python
id, Python parent id and Python module id: what TensorBoard's module view reads), and
the module view in summary.json, on a three-level model (tests/programs/py/modules_model.py)
whose tree, calls and ops are known: Net_0 > Block_0, Block_1 > Leaf_k, Linear > Linear, ReLU."""

import os

import tp
from tp import check, check_eq
from test_python import clean_env, run_py, script

PROGRAM = script("modules_model.py")
STEPS = 3

# instance -> its parent instance, as modules_model.py builds the model.
TREE = {
    "Net_0": None,
    "Block_0": "Net_0", "Leaf_0": "Block_0", "Linear_0": "Leaf_0", "ReLU_0": "Leaf_0", "Linear_1": "Block_0",
    "Block_1": "Net_0", "Leaf_1": "Block_1", "Linear_2": "Leaf_1", "ReLU_1": "Leaf_1", "Linear_3": "Block_1",
    "Linear_4": "Net_0",
}
# Each module's own op, one per call (besides its children's).
OWN_OP = {"Linear": "aten::linear", "ReLU": "aten::relu", "Leaf": "aten::mul", "Block": "aten::add",
          "Net": "aten::sub"}
# Depth first, children in the order of their first call.
ORDER = ["Net_0", "Block_0", "Leaf_0", "Linear_0", "ReLU_0", "Linear_1", "Block_1", "Leaf_1", "Linear_2",
         "ReLU_1", "Linear_3", "Linear_4"]


def cls(name):
    return name.rsplit("_", 1)[0]


def run(*extra):
    cache = tp.fresh_dir("cache")
    return run_py([PROGRAM, str(STEPS)] + list(extra), options=["--with-modules"],
                  env=clean_env(XDG_CACHE_HOME=cache), timeout=300)


def module_events(result):
    return [e for e in tp.all_trace_events(result, ph="X", cat="python_function")
            if e["name"].startswith("nn.Module: ")]


def module_tree():
    """The trace's module calls: names, ids, parents, module ids and occurrences; the ops
    inside each call; the module view in summary.json; and the op table as without it."""
    r = run()
    events = module_events(r)
    names = {e["name"][len("nn.Module: "):] for e in events}
    check_eq(names, set(TREE), "module instances in the trace")
    by_id = {}
    for e in events:
        args = e["args"]
        check(args["Python id"] not in by_id, f"Python ids are unique: {args}")
        by_id[args["Python id"]] = e
        name = e["name"][len("nn.Module: "):]
        check_eq(args["Python module id"], int(name.rsplit("_", 1)[1]), f"Python module id of {name}")
    for e in events:
        name = e["name"][len("nn.Module: "):]
        parent_id = e["args"]["Python parent id"]
        parent = by_id[parent_id]["name"][len("nn.Module: "):] if parent_id is not None else None
        check_eq(parent, TREE[name], f"parent of a {name} call")
        if parent is not None:
            p = by_id[parent_id]
            check(p["tid"] == e["tid"] and p["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 0.002,
                  f"{name} lies inside its parent's call")
    counts = {}
    for e in events:
        counts[e["name"]] = counts.get(e["name"], 0) + 1
    check_eq(set(counts.values()), {STEPS}, f"calls of each module, one per step: {counts}")

    # Each module's own op lies inside its call, on its thread, as its direct op.
    ops = tp.all_trace_events(r, ph="X", cat="cpu_op")
    for e in events:
        name = e["name"][len("nn.Module: "):]
        inside = [o for o in ops if o["tid"] == e["tid"] and e["ts"] <= o["ts"] and
                  o["ts"] + o["dur"] <= e["ts"] + e["dur"] + 0.002]
        check(any(o["name"] == OWN_OP[cls(name)] for o in inside),
              f"{OWN_OP[cls(name)]} inside a {name} call: {sorted({o['name'] for o in inside})}")

    # The module view: the tree depth first, calls, direct ops, host time.
    rows = r.summary.get("modules", [])
    check_eq([m["name"] for m in rows], ORDER, "summary.json modules, depth first")
    for m in rows:
        parent = rows[m["parent"]]["name"] if m["parent"] is not None else None
        check_eq(parent, TREE[m["name"]], f"parent of {m['name']}")
        check_eq(m["occurrences"], STEPS, f"occurrences of {m['name']}")
        check_eq(m["operators"], STEPS, f"direct ops of {m['name']} (its own op once a call)")
        children = [c for c in rows if c["parent"] is not None and rows[c["parent"]] is m]
        check(m["host_ns"] >= sum(c["host_ns"] for c in children), f"{m['name']} holds its children's time")
        check(0 < m["self_host_ns"] <= m["host_ns"] - sum(c["host_ns"] for c in children),
              f"self host time of {m['name']}: {m}")
    # The table: module calls are no rows, and the ops are all there.
    table = {o["name"]: o for o in r.summary["ops"]}
    check(not any(n.startswith("nn.Module") for n in table), "no module rows in the table")
    check_eq(table["aten::linear"]["calls"], 5 * STEPS, "aten::linear calls")
    check_eq(table["aten::relu"]["calls"], 2 * STEPS, "aten::relu calls")


def raised():
    """A forward that raises (torch 1.13 calls no post hook): the calls it left open close
    when Net is called again, with no range left unended and the other counts as they are."""
    r = run("--raise")
    check("caught: asked to fail" in r.stdout.decode(), f"the program caught its error: {r.stdout.decode()}")
    check(not any("never ended" in w for w in r.summary["warnings"]), f"nothing left open: {r.summary['warnings']}")
    rows = {m["name"]: m for m in r.summary.get("modules", [])}
    two_more = {"Net_0", "Block_0", "Leaf_0", "Linear_0", "ReLU_0", "Linear_1", "Block_1", "Leaf_1", "Linear_2",
                "ReLU_1"}
    for name in TREE:
        want = STEPS + (2 if name in two_more else 1)
        check_eq(rows[name]["occurrences"], want, f"calls of {name}")


def off_by_default():
    """Without --with-modules, no module calls: no python_function events, no view."""
    cache = tp.fresh_dir("cache")
    r = run_py([PROGRAM, "1"], options=["--pytorch-ops"], env=clean_env(XDG_CACHE_HOME=cache), timeout=300)
    check_eq(module_events(r), [], "module calls without --with-modules")
    check("modules" not in r.summary, "no module view")


def device_time():
    """GPU time per module: each Leaf call runs an op that calls cudaMemset (the drop-in
    runtime over the fake libcupti: 1 us + 1000/100 ns for its 1000 bytes), which lands on
    that Leaf (self) and on every module around it, and no other."""
    import test_gpu_fake as gf

    env = gf.drop_in_runtime(clean_env(XDG_CACHE_HOME=tp.fresh_dir("cache")))
    r = run_py([PROGRAM, str(STEPS), "--gpu"], options=["--with-modules"], env=env, timeout=300)
    set_ns = 1000 + 1000 // 100
    rows = {m["name"]: m for m in r.summary.get("modules", [])}
    for name in TREE:
        leaves = {"Net_0": 2, "Block_0": 1, "Block_1": 1, "Leaf_0": 1, "Leaf_1": 1}.get(name, 0)
        gf.check_cuda(rows[name]["device_ns"], leaves * STEPS * set_ns, f"device time of {name}")
        own = STEPS * set_ns if name.startswith("Leaf") else 0
        gf.check_cuda(rows[name]["self_device_ns"], own, f"self device time of {name}")


SCENARIOS = {"device_time": device_time, "module_tree": module_tree, "raised": raised, "off_by_default": off_by_default}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
