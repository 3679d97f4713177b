"""Training loops with several optimizer steps per iteration, otherwise unmodified.

    multi_optim.py PATTERN N [--first-ms MS] [--second-ms MS]

Each iteration has two phases, each a torchprof.range ("first", "second") that sleeps
its time and then does a little torch work ending in an optimizer step:
  gan      first: D.step(); second: G.step() (two optimizers, one step each)
  critic   first: three D.step() (a critic), second: G.step()
  nested   first: none; second: one step of an SGD subclass whose step() calls
           super().step(), the base class's step hooked too (an SGD made and dropped)
  wrapped  first: none; second: outer.step(), an Optimizer that steps an inner SGD
Prints one line per iteration and the final parameters' sum.
"""

import argparse
import time

import torch

import torchprof


class SubclassSGD(torch.optim.SGD):
    def step(self, closure=None):
        return super().step(closure)


class Outer(torch.optim.Optimizer):
    """Steps an inner optimizer from its own step(), as Lookahead-style wrappers do."""

    def __init__(self, params, lr):
        params = list(params)
        super().__init__(params, {"lr": lr})
        self.inner = torch.optim.SGD(params, lr=lr)

    @torch.no_grad()
    def step(self, closure=None):
        return self.inner.step(closure)


def work(model, opt, data):
    opt.zero_grad()
    loss = model(data).pow(2).mean()
    loss.backward()
    opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pattern", choices=["gan", "critic", "nested", "wrapped"])
    parser.add_argument("iterations", type=int)
    parser.add_argument("--first-ms", type=float, default=6.0)
    parser.add_argument("--second-ms", type=float, default=4.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    d_model, g_model = torch.nn.Linear(8, 1), torch.nn.Linear(8, 8)
    data = torch.randn(16, 8)
    if args.pattern in ("gan", "critic"):
        opt_d = torch.optim.SGD(d_model.parameters(), lr=0.01)
        opt_g = torch.optim.SGD(g_model.parameters(), lr=0.01)
    elif args.pattern == "nested":
        torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)  # hooks SGD.step
        opt_g = SubclassSGD(g_model.parameters(), lr=0.01)
    else:
        opt_g = Outer(g_model.parameters(), lr=0.01)
    d_steps = {"gan": 1, "critic": 3}.get(args.pattern, 0)

    for it in range(args.iterations):
        with torchprof.range("first"):
            time.sleep(args.first_ms / 1000.0)
            for _ in range(d_steps):
                work(d_model, opt_d, data)
        with torchprof.range("second"):
            time.sleep(args.second_ms / 1000.0)
            work(g_model, opt_g, data)
        print("iteration %d" % it)
    total = sum(float(p.sum()) for p in list(d_model.parameters()) + list(g_model.parameters()))
    print("parameters %.6f" % total)


if __name__ == "__main__":
    main()
