"""A training loop over a DataLoader whose samples take a known time to load.

    data_loader.py [--epochs E] [--samples N] [--batch B] [--sample-ms MS]
                   [--workers W] [--compute-ms C] [--first-ms F] [--profiler]

Each __getitem__ sleeps MS; a batch of B samples takes about B*MS to fetch (in the
main process with W=0, in the workers otherwise). --compute-ms: each step also
multiplies matrices for C ms (the model's work). --first-ms: the first sample takes F ms
more (a dataset opening its files: warm-up). --profiler runs the loop under
torch.profiler and prints, for each row of key_averages() whose name starts with
"enumerate(DataLoader)#", its name and count. Prints the batches fetched and a
checksum of the data seen.
"""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, samples, sample_ms, first_ms=0.0):
        self.samples = samples
        self.sample_s = sample_ms / 1000.0
        self.first_s = first_ms / 1000.0

    def __len__(self):
        return self.samples

    def __getitem__(self, index):
        if self.first_s > 0:
            time.sleep(self.first_s)
            self.first_s = 0.0
        time.sleep(self.sample_s)
        return torch.full((4,), float(index))


def compute(ms):
    x = torch.ones(32, 32)
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        x = torch.mm(x, x) / 32.0


def train(loader, epochs, compute_ms=0.0):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches, checksum = 0, 0.0
    for _ in range(epochs):
        for batch in loader:
            opt.zero_grad()
            if compute_ms > 0:
                compute(compute_ms)
            model(batch).sum().backward()
            opt.step()
            batches += 1
            checksum += float(batch.sum())
    return batches, checksum


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--sample-ms", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--compute-ms", type=float, default=0.0)
    parser.add_argument("--first-ms", type=float, default=0.0)
    parser.add_argument("--profiler", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    loader = DataLoader(SlowDataset(args.samples, args.sample_ms, args.first_ms), batch_size=args.batch,
                        num_workers=args.workers)
    if args.profiler:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            batches, checksum = train(loader, args.epochs)
        for row in prof.key_averages():
            if row.key.startswith("enumerate(DataLoader)#"):
                print("torch.profiler %s %d" % (row.key, row.count))
    else:
        batches, checksum = train(loader, args.epochs, args.compute_ms)
    print("batches %d" % batches)
    print("checksum %.1f" % checksum)


if __name__ == "__main__":
    main()
