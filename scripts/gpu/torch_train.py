"""A small PyTorch training loop on CUDA for checking torchprof against torch.profiler.

Plain:                    python3 torch_train.py [--steps N]   (run it under torchprof-run too)
Reference:                python3 torch_train.py --torch-profiler REF.json
Memory reference:         python3 torch_train.py --memory-stats MEM.json (under torchprof-run
                          --profile-memory: the caching allocator's own peaks to compare)
The same loop runs in both; with --torch-profiler all of it (model creation included)
is inside torch.profiler.profile(activities=[CPU, CUDA]) and REF.json gets
key_averages() (times in us, as torch gives them) and the GPU activities of
prof.events() (name -> count, total ns). Prints its own wall time either way.
--device cpu exists only to smoke-test the JSON writing where there is no GPU.
"""

import argparse
import json
import sys
import time

import torch


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--device", default="cuda")
    p.add_argument("--torch-profiler", metavar="OUT_JSON", default=None)
    p.add_argument("--memory-stats", metavar="OUT_JSON", default=None)
    return p.parse_args()


def train(args):
    dev = torch.device(args.device)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, args.width, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)
    loss = None
    for _ in range(args.steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    value = float(loss.item())  # synchronises with the device
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return value


def first_attr(obj, names, default=0.0):
    # torch 2.x renamed cuda_* to device_*; the old names warn or are gone.
    for n in names:
        v = getattr(obj, n, None)
        if v is not None:
            return float(v)
    return default


def key_averages_json(prof):
    rows = []
    for e in prof.key_averages():
        rows.append({
            "name": e.key,
            "count": int(e.count),
            "self_cpu_time_total_us": first_attr(e, ["self_cpu_time_total"]),
            "cpu_time_total_us": first_attr(e, ["cpu_time_total"]),
            "self_cuda_time_total_us": first_attr(e, ["self_device_time_total", "self_cuda_time_total"]),
            "cuda_time_total_us": first_attr(e, ["device_time_total", "cuda_time_total"]),
        })
    return rows


def is_device_event(e):
    dt = getattr(e, "device_type", None)
    return dt is not None and str(dt).split(".")[-1] in ("CUDA", "PrivateUse1")


def gpu_ops_json(prof):
    """Kernel-level activities: name -> count, total ns; and their merged busy time."""
    ops = {}
    intervals = []
    for e in prof.events():
        if not is_device_event(e):
            continue
        start, end = float(e.time_range.start), float(e.time_range.end)  # us
        op = ops.setdefault(e.name, {"count": 0, "total_ns": 0.0})
        op["count"] += 1
        op["total_ns"] += (end - start) * 1000.0
        intervals.append((start, end))
    if not ops:  # older event lists keep device activities only in the averages
        for e in prof.key_averages():
            if is_device_event(e):
                ops[e.key] = {"count": int(e.count),
                              "total_ns": first_attr(e, ["self_device_time_total", "self_cuda_time_total"]) * 1000.0}
    busy_us = 0.0
    cur_s, cur_e = None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy_us += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy_us += cur_e - cur_s
    return ops, busy_us * 1000.0


def main():
    args = parse_args()
    t0 = time.perf_counter()
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU]
        if args.device.startswith("cuda"):
            acts.append(ProfilerActivity.CUDA)
        with profile(activities=acts) as prof:
            loss = train(args)
        wall = time.perf_counter() - t0
        ops, busy_ns = gpu_ops_json(prof)
        ref = {"tool": "torch.profiler", "torch": torch.__version__, "steps": args.steps,
               "wall_ns": int(wall * 1e9), "busy_ns": busy_ns,
               "gpu_ops": ops, "key_averages": key_averages_json(prof)}
        with open(args.torch_profiler, "w") as f:
            json.dump(ref, f, indent=1)
    else:
        loss = train(args)
        wall = time.perf_counter() - t0
    if args.memory_stats and args.device.startswith("cuda"):
        stats = torch.cuda.memory_stats()
        with open(args.memory_stats, "w") as f:
            json.dump({"max_allocated": torch.cuda.max_memory_allocated(),
                       "max_reserved": torch.cuda.max_memory_reserved(),
                       "allocated": torch.cuda.memory_allocated(),
                       "num_alloc_retries": stats.get("num_alloc_retries", 0)}, f)
    print("torch_train: %d steps, loss %.4f, wall %.3f ms" % (args.steps, loss, wall * 1e3))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
