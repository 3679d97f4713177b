"""torch's own CPU profiler on the same machine, for the ratios in scripts/bench.sh:
cost added per profiled op, key_averages().table() per event, export_chrome_trace
per event and bytes per event.

    python3 bench/torch_key_averages.py [OPS=20000]

Prints `name value unit` lines."""
import os
import sys
import tempfile
import time

import torch


def main():
    ops = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    a = torch.ones(4)
    b = torch.ones(4)
    for _ in range(1000):
        torch.add(a, b)
    t0 = time.perf_counter()
    for _ in range(ops):
        torch.add(a, b)
    plain = time.perf_counter() - t0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(ops):
            torch.add(a, b)
        profiled = time.perf_counter() - t0
    events = len(prof.events())
    t0 = time.perf_counter()
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=100)
    table_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        t0 = time.perf_counter()
        prof.export_chrome_trace(path)
        export_s = time.perf_counter() - t0
        size = os.path.getsize(path)
    assert table and events > 0
    print(f"torch_version {torch.__version__.split('+')[0]} -")
    print(f"torch_events {events} events")
    print(f"torch_added_per_op {(profiled - plain) / ops * 1e6:.4g} us/op")
    print(f"torch_table_us_per_event {table_s / events * 1e6:.4g} us/event")
    print(f"torch_table_events_per_s {events / table_s:.4g} events/s")
    print(f"torch_export_us_per_event {export_s / events * 1e6:.4g} us/event")
    print(f"torch_trace_bytes_per_event {size / events:.4g} B/event")


if __name__ == "__main__":
    main()
