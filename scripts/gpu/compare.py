#!/usr/bin/env python3
"""Side-by-side check of a torchprof run against a reference of the same program.

    compare.py --summary RUN/summary.json --reference REF.json [--title T]
               [--wall plain=NS] [--wall torchprof=NS] [--wall torch.profiler=NS] [--long-ns NS] [--gpu-only] [--total-only]

REF.json is what scripts/gpu/cuda_sample.cu (CUDA events) or scripts/gpu/torch_train.py
--torch-profiler (torch.profiler) writes: gpu_ops {name: {count, total_ns}}, busy_ns,
and for torch key_averages [{name, count, cuda_time_total_us, ...}].
Criteria: kernel/copy counts equal the reference's, per-op and summed GPU time within 2%;
the top-10 ops by Self CUDA name the same ops as key_averages, with the same calls and
Self CUDA within 5%.
Verdicts are PASS/FAIL/INFO lines; the exit status is 0 whatever they say.
"""

import argparse
import json
import re
import sys
import traceback

GPU_TIME_TOL = 0.02
TOP_TIME_TOL = 0.05
TOP_N = 10
GPU_KINDS = ("kernel", "memcpy", "memset")
# emit_nvtx appends these to each op's range name; key_averages has the bare name.
EMIT_NVTX_SUFFIX = re.compile(r",\s*(seq|op_id|sizes|input_op_ids)\s*=.*$")


def norm(name):
    return " ".join(str(name).split())


def base_name(name):
    """'void ns::k<float>(int, float*)' -> 'ns::k': a looser key for names printed differently."""
    n = norm(name)
    if n.startswith("void "):
        n = n[5:]
    for stop in ("(", "<"):
        i = n.find(stop)
        if i > 0:
            n = n[:i]
    return n.strip()


def diff_pct(a, b):
    if b == 0:
        return 0.0 if a == 0 else float("inf")
    return (a - b) * 100.0 / b


def fmt_ms(ns):
    return "%.3f" % (ns / 1e6) if ns is not None else "-"


def fmt_pct(p):
    return "%+.2f%%" % p if p != float("inf") else "inf"


def short(name, width=60):
    return name if len(name) <= width else name[: width - 3] + "..."


def match_names(ours, theirs):
    """Pairs names of two dicts: exact after whitespace normalisation, then by base name
    where that is unique on both sides. Returns (pairs, only_ours, only_theirs)."""
    ours_n = {norm(k): k for k in ours}
    theirs_n = {norm(k): k for k in theirs}
    pairs = [(ours_n[k], theirs_n[k]) for k in ours_n if k in theirs_n]
    left = {k: v for k, v in ours_n.items() if k not in theirs_n}
    right = {k: v for k, v in theirs_n.items() if k not in ours_n}

    def by_base(d):
        out = {}
        for k, v in d.items():
            out.setdefault(base_name(k), []).append(v)
        return out

    lb, rb = by_base(left), by_base(right)
    for b, names in lb.items():
        if len(names) == 1 and len(rb.get(b, [])) == 1:
            pairs.append((names[0], rb[b][0]))
            left.pop(norm(names[0]))
            right.pop(norm(rb[b][0]))
    return pairs, sorted(left.values()), sorted(right.values())


def torchprof_gpu_ops(summary):
    ops = {}
    for o in summary.get("ops", []):
        if o.get("kind") in GPU_KINDS:
            row = ops.setdefault(o["name"], {"count": 0, "total_ns": 0})
            row["count"] += int(o.get("calls", 0))
            row["total_ns"] += int(o.get("self_cuda_ns", 0))
    return ops


def compare_gpu_ops(summary, ref, out, long_ns=0, total_only=False):
    """long_ns > 0: times compared only for ops whose mean is at least that long, by both measures.
    total_only: the reference is another run of the program, whose short kernels may differ
    by more than 2% each: only the summed time is a verdict, each op's is shown."""
    ours = torchprof_gpu_ops(summary)
    theirs = ref.get("gpu_ops", {})
    pairs, only_ours, only_theirs = match_names(ours, theirs)
    pairs.sort(key=lambda p: -theirs[p[1]]["total_ns"])
    out.append("GPU ops (kernels, copies, memsets): torchprof vs %s" % ref.get("tool", "reference"))
    out.append("%-60s %8s %8s %12s %12s %9s" % ("name", "n(tp)", "n(ref)", "ms(tp)", "ms(ref)", "diff"))
    bad_count, bad_time, checked = [], [], []
    for a, b in pairs:
        o, t = ours[a], theirs[b]
        d = diff_pct(o["total_ns"], t["total_ns"])
        flag = ""
        if o["count"] != t["count"]:
            flag += " COUNT"
            bad_count.append(b)
        # Long by both measures: a reference timed with CUDA events counts the GPU's idle
        # time after an event on an idle stream (the host late to launch) as the op's.
        timed = (t["count"] > 0 and t["total_ns"] / t["count"] >= long_ns and o["count"] > 0
                 and o["total_ns"] / o["count"] >= long_ns)
        if timed:
            checked.append(b)
        else:
            flag += " (short)"
        if timed and abs(d) > GPU_TIME_TOL * 100:
            flag += " TIME"
            bad_time.append("%s (%s)" % (short(b, 40), fmt_pct(d)))
        out.append("%-60s %8d %8d %12s %12s %9s%s" % (short(b), o["count"], t["count"], fmt_ms(o["total_ns"]),
                                                    fmt_ms(t["total_ns"]), fmt_pct(d), flag))
    for n in only_ours:
        out.append("  only in torchprof: %s (n=%d, %s ms)" % (n, ours[n]["count"], fmt_ms(ours[n]["total_ns"])))
    for n in only_theirs:
        out.append("  only in reference: %s (n=%d, %s ms)" % (n, theirs[n]["count"], fmt_ms(theirs[n]["total_ns"])))
    ok_names = not only_ours and not only_theirs and pairs
    out.append("%s gpu-op names: %d matched, %d only in torchprof, %d only in reference"
               % ("PASS" if ok_names else "FAIL", len(pairs), len(only_ours), len(only_theirs)))
    out.append("%s gpu-op counts equal: %s" % ("FAIL" if bad_count or not pairs else "PASS",
                                              ("differ: " + ", ".join(short(n, 40) for n in bad_count)) if bad_count
                                              else "%d ops" % len(pairs)))
    timed = "ops of %.1f ms or more" % (long_ns / 1e6) if long_ns else "ops"
    out.append("%s gpu-op time within %d%%: %s" % ("INFO" if total_only else "FAIL" if bad_time or not checked else "PASS",
                                                  GPU_TIME_TOL * 100,
                                                  ("differ: " + ", ".join(bad_time)) if bad_time
                                                  else "%d %s" % (len(checked), timed)))
    tp_busy = summary.get("gpu", {}).get("busy_ns", 0)
    ref_busy = ref.get("busy_ns")
    if ref_busy is not None:
        out.append("INFO GPU busy (merged kernel intervals): torchprof %s ms, reference %s ms (%s)"
                   % (fmt_ms(tp_busy), fmt_ms(ref_busy), fmt_pct(diff_pct(tp_busy, ref_busy))))
    pair_of = {b: a for a, b in pairs}
    tp_sum = sum(ours[pair_of[b]]["total_ns"] for b in checked)
    ref_sum = sum(theirs[b]["total_ns"] for b in checked)
    d = diff_pct(tp_sum, ref_sum)
    out.append("%s gpu-op summed time within %d%%: torchprof %s ms, reference %s ms (%s) over %d %s"
               % ("PASS" if ref_sum > 0 and abs(d) <= GPU_TIME_TOL * 100 else "FAIL", GPU_TIME_TOL * 100,
                  fmt_ms(tp_sum), fmt_ms(ref_sum), fmt_pct(d), len(checked), timed))
    tp_n = sum(v["count"] for v in ours.values())
    ref_n = sum(v["count"] for v in theirs.values())
    out.append("%s gpu-op count in all: torchprof %d, reference %d" % ("PASS" if tp_n == ref_n and ref_n else "FAIL",
                                                                       tp_n, ref_n))


def torchprof_cuda_rows(summary):
    """Rows by name with emit_nvtx's ', seq = …' suffixes folded away (one row per op name)."""
    rows = {}
    for o in summary.get("ops", []):
        if o.get("kind") == "sync":
            continue
        name = norm(EMIT_NVTX_SUFFIX.sub("", o["name"]))
        if name.startswith("ProfilerStep"):  # torchprof's own step ranges; torch ran without prof.step()
            continue
        r = rows.setdefault(name, {"count": 0, "self_cuda_ns": 0})
        r["count"] += int(o.get("calls", 0))
        r["self_cuda_ns"] += int(o.get("self_cuda_ns", 0))
    return rows


def reference_cuda_rows(ref):
    rows = {}
    for e in ref.get("key_averages", []):
        r = rows.setdefault(norm(e["name"]), {"count": 0, "self_cuda_ns": 0.0})
        r["count"] += int(e.get("count", 0))
        r["self_cuda_ns"] += float(e.get("self_cuda_time_total_us", 0.0)) * 1000.0
    return rows


def top(rows):
    ranked = sorted(rows.items(), key=lambda kv: -kv[1]["self_cuda_ns"])
    return [k for k, v in ranked[:TOP_N] if v["self_cuda_ns"] > 0]


def compare_top_ops(summary, ref, out):
    ours, theirs = torchprof_cuda_rows(summary), reference_cuda_rows(ref)
    pairs, _, _ = match_names(ours, theirs)  # torch's spelling of a name wherever the two pair up
    ours = {**{k: v for k, v in ours.items() if k not in dict(pairs)}, **{b: ours[a] for a, b in pairs}}
    top_ours, top_theirs = top(ours), top(theirs)
    out.append("")
    out.append("Top %d ops by Self CUDA: torchprof vs torch.profiler key_averages" % TOP_N)
    out.append("%-60s %7s %7s %12s %12s %9s" % ("name", "n(tp)", "n(ref)", "ms(tp)", "ms(ref)", "diff"))
    bad = []
    for name in top_theirs + [n for n in top_ours if n not in top_theirs]:
        o, t = ours.get(name), theirs.get(name)
        if o is None or t is None:
            side = "torchprof" if t is None else "torch.profiler"
            out.append("%-60s  only in %s's rows" % (short(name), side))
            bad.append(short(name, 40) + " (unmatched)")
            continue
        d = diff_pct(o["self_cuda_ns"], t["self_cuda_ns"])
        flag = ""
        if name not in top_ours or name not in top_theirs:
            flag += " RANK"
            bad.append(short(name, 40) + " (top-%d of one side only)" % TOP_N)
        if abs(d) > TOP_TIME_TOL * 100:
            flag += " TIME"
            bad.append("%s (%s)" % (short(name, 40), fmt_pct(d)))
        if o["count"] != t["count"]:
            flag += " CALLS"
            bad.append("%s (%d calls vs %d)" % (short(name, 40), o["count"], t["count"]))
        out.append("%-60s %7d %7d %12s %12s %9s%s" % (short(name), o["count"], t["count"], fmt_ms(o["self_cuda_ns"]),
                                                    fmt_ms(t["self_cuda_ns"]), fmt_pct(d), flag))
    ok = not bad and top_theirs
    out.append("%s top-%d ops: same names and calls, Self CUDA within %d%%%s"
               % ("PASS" if ok else "FAIL", TOP_N, TOP_TIME_TOL * 100, (": " + "; ".join(bad)) if bad else ""))


def compare_walls(walls, out):
    if not walls:
        return
    out.append("")
    plain = walls.get("plain")
    out.append("%-16s %12s %10s" % ("run", "wall ms", "slowdown"))
    for name, ns in walls.items():
        slow = "%.2fx" % (ns / plain) if plain else "-"
        out.append("%-16s %12s %10s" % (name, fmt_ms(ns), slow))


def parse_walls(items):
    walls = {}
    for item in items or []:
        k, _, v = item.partition("=")
        try:
            walls[k] = int(v)
        except ValueError:
            pass
    return walls


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--summary", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--title", default="")
    p.add_argument("--wall", action="append", metavar="RUN=NS")
    p.add_argument("--total-only", action="store_true", help="per-op GPU times as INFO, the sum as the verdict")
    p.add_argument("--gpu-only", action="store_true", help="kernels, copies and sets only, not the op table")
    p.add_argument("--long-ns", type=int, default=0, help="compare times only of ops this long on average")
    args = p.parse_args()
    out = ["== compare: %s ==" % (args.title or args.summary)]
    try:
        with open(args.summary) as f:
            summary = json.load(f)
        with open(args.reference) as f:
            ref = json.load(f)
        for w in summary.get("warnings", []):
            out.append("INFO torchprof warning: %s" % w)
        out.append("INFO torchprof dropped_events=%s cupti_dropped=%s steps=%d"
                   % (summary.get("dropped_events"), summary.get("cupti_dropped"), len(summary.get("steps", []))))
        compare_gpu_ops(summary, ref, out, args.long_ns, args.total_only)
        if "key_averages" in ref and not args.gpu_only:
            compare_top_ops(summary, ref, out)
    except Exception:  # the report must say what broke, and the check goes on
        out.append("FAIL compare could not run:")
        out.extend("  " + line for line in traceback.format_exc().splitlines())
    compare_walls(parse_walls(args.wall), out)
    if args.title:  # verdict lines name their comparison when collected from several
        out = [re.sub(r"^(PASS|FAIL|INFO) ", r"\1 [%s] " % args.title, line) for line in out]
    print("\n".join(out))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
