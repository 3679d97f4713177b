"""An unmodified PyTorch training loop for the op-capture tests: a two-layer MLP
(Linear(IN, HIDDEN) -> ReLU -> Linear(HIDDEN, OUT)), MSE loss, SGD.

    ops_train.py STEPS [--batch B[,B2,...]] [--sizes IN,HIDDEN,OUT] [--loader WORKERS]
                 [--own-mode] [--own-profiler] [--fail-at STEP]

--batch with several sizes cycles through them, one per step.
--loader: batches come from a DataLoader with that many (forked) worker processes.
--own-mode: step 0 runs inside a TorchDispatchMode of the program's own that counts the
  ops it sees and prints the count.
--own-profiler: step 0 runs under torch.profiler; prints each op it saw with its count.
--fail-at: that step feeds the model input of the wrong width (an error inside aten::addmm).
Prints the final loss (and what the options above print) on stdout.
"""

import argparse

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class CountingMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def batches(args, sizes):
    size_in, _, size_out = sizes
    if args.loader == 0:
        for step in range(args.steps):
            batch = args.batch[step % len(args.batch)]
            yield torch.randn(batch, size_in), torch.randn(batch, size_out)
        return
    batch = args.batch[0]
    data = torch.utils.data.TensorDataset(torch.randn(batch * args.steps, size_in),
                                          torch.randn(batch * args.steps, size_out))
    yield from torch.utils.data.DataLoader(data, batch_size=batch, num_workers=args.loader)


def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    out = model(x)  # the forward call
    loss = torch.nn.functional.mse_loss(out, y)
    loss.backward()
    optimizer.step()
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int)
    parser.add_argument("--batch", default="8", type=lambda s: [int(b) for b in s.split(",")])
    parser.add_argument("--sizes", default="3,5,2", type=lambda s: [int(v) for v in s.split(",")])
    parser.add_argument("--loader", type=int, default=0)
    parser.add_argument("--own-mode", action="store_true")
    parser.add_argument("--own-profiler", action="store_true")
    parser.add_argument("--fail-at", type=int, default=-1)
    args = parser.parse_args()

    torch.manual_seed(0)
    size_in, hidden, size_out = args.sizes
    model = torch.nn.Sequential(torch.nn.Linear(size_in, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, size_out))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = None
    for step, (x, y) in enumerate(batches(args, args.sizes)):
        print("step %d" % step)
        if step == args.fail_at:
            x = torch.randn(x.shape[0], size_in + 1)
        if step == 0 and args.own_mode:
            mode = CountingMode()
            with mode:
                loss = train_step(model, optimizer, x, y)
            print("own mode saw %d ops" % mode.count)
        elif step == 0 and args.own_profiler:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                loss = train_step(model, optimizer, x, y)
            # Every op the profiler counted: the same with and without torchprof.
            print("own profiler saw", sorted((e.key, e.count) for e in prof.key_averages()))
        else:
            loss = train_step(model, optimizer, x, y)
    print("final loss %.6f" % loss.item())


if __name__ == "__main__":
    main()
