"""An unmodified PyTorch training loop: small nn.Linear model, SGD, N iterations.

    train_loop.py N [--mode auto|user|own_markers] [--sleep-ms MS] [--optimizers K]

auto: nothing but torch (torchprof-run marks one step per optimizer.step()).
user: calls torchprof.step() after each iteration.
own_markers: wraps each iteration in its own ProfilerStep#k range (as a program using
  NVTX would), through torchprof.range.
Each iteration sleeps MS inside a "work" range-free region so step lengths are known.
Prints one line per iteration and the final loss to stdout.
"""

import argparse
import contextlib
import time

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("iterations", type=int)
    parser.add_argument("--mode", default="auto", choices=["auto", "user", "own_markers"])
    parser.add_argument("--sleep-ms", type=float, default=5.0)
    parser.add_argument("--optimizers", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(0)
    models = [torch.nn.Linear(16, 4) for _ in range(args.optimizers)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.01) for m in models]
    data, target = torch.randn(32, 16), torch.randn(32, 4)
    loss = None
    for it in range(args.iterations):
        marker = contextlib.nullcontext()
        if args.mode != "auto":
            import torchprof
        if args.mode == "own_markers":
            marker = torchprof.range("ProfilerStep#%d" % it)
        with marker:
            time.sleep(args.sleep_ms / 1000.0)
            for model, opt in zip(models, optimizers):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(data), target)
                loss.backward()
                opt.step()
        if args.mode == "user":
            torchprof.step()
        print("iteration %d" % it)
    print("final loss %.6f" % loss.item())


if __name__ == "__main__":
    main()
