"""torch.cuda's caching allocator counters on a CPU torch, for --profile-memory's
fragmentation figures: is_initialized, device_count and memory_stats are replaced by
stand-ins that answer as they do in a CUDA program whose allocator retried cudaMalloc
RETRIES times and ran out OOMS times on device 1, with device 0 never used (its stats
all zero, as torch gives them for a device with no allocation).

    allocator_counters.py RETRIES OOMS
"""
import sys

import torch

RETRIES, OOMS = int(sys.argv[1]), int(sys.argv[2])


def memory_stats(device=None):
    used = device == 1
    return {"num_alloc_retries": RETRIES if used else 0, "num_ooms": OOMS if used else 0,
            "allocated_bytes.all.current": 0}


torch.cuda.is_initialized = lambda: True
torch.cuda.device_count = lambda: 2
torch.cuda.memory_stats = memory_stats

for _ in range(3):
    x = torch.randn(64, 64) @ torch.randn(64, 64)
print("allocator_counters: done")
