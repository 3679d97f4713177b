"""Cost of torchprof's PyTorch op capture (the dispatch-mode path): a loop of small
torch.add calls, timed inside the program, so launch and analysis are left out. The
time is the calling thread's CPU time, so that other programs on a loaded machine do
not count (the flusher thread's work is not in it either).

    python3 bench/torch_ops_overhead.py [OPS=20000]
    torchprof-run -q --pytorch-ops -- python3 bench/torch_ops_overhead.py 20000

Prints `ops_per_s N` and `us_per_op X` (best of three passes)."""
import sys
import time

import torch


def main():
    ops = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    a = torch.ones(4)
    b = torch.ones(4)
    for _ in range(1000):
        torch.add(a, b)
    best = None
    for _ in range(3):
        t0 = time.thread_time()
        for _ in range(ops):
            torch.add(a, b)
        elapsed = time.thread_time() - t0
        best = elapsed if best is None else min(best, elapsed)
    print("ops_per_s %.0f" % (ops / best))
    print("us_per_op %.3f" % (best / ops * 1e6))


if __name__ == "__main__":
    main()
