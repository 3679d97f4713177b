"""A few DDP steps on gloo, one rank of a job started with torchrun's environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT). SLOW_RANK=<r>: rank r sleeps SLOW_MS (default 50)
before each step, so the others wait for it in the all-reduce. Writes the gradient
bucket's element count (the model's parameters) to argv[1] from rank 0."""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 5


def main():
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    slow = int(os.environ.get("SLOW_RANK", "-1"))
    pause = float(os.environ.get("SLOW_MS", "50")) / 1000.0
    for _ in range(STEPS):
        if rank == slow:
            time.sleep(pause)
        x = torch.randn(32, 64)
        y = torch.randint(0, 10, (32,))
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()
    if rank == 0 and len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(str(sum(p.numel() for p in model.parameters())))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
