"""Training loops whose tensor memory behaves in known ways, for --profile-memory's leak
finding. One step per optimizer.step() (the bootstrap's steps).

    memory_loops.py MODE STEPS

MODE:
  steady  nothing outlives its step
  append  a tensor of 1,000 floats appended to a list each step: 4,000 bytes a step
  total   a second loss summed with its graph each step (`total += loss`, never
          backpropagated): its input and the linear layer's output (2 x 32 x 64 floats,
          16,384 bytes) are kept by the graph every step
  cache   a cache that fills in the first three steps, then holds
"""

import sys

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[2])
    model = nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    cache = {}
    total = torch.zeros(())
    for i in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        opt.step()
        if mode == "append":
            kept.append(torch.randn(1000))
        elif mode == "total":
            total += model(torch.randn(32, 64)).pow(2).mean()
        elif mode == "cache":
            cache.setdefault(min(i, 2), torch.randn(1000))
    print("done", mode, steps, len(kept), len(cache), float(total))


if __name__ == "__main__":
    main()
