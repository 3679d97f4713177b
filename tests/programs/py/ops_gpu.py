"""CPU torch with an operator that calls the CUDA runtime, as a CUDA build's operators
do: the runtime is whatever libcudart.so.13 the loader finds (the tests put the drop-in
one of tests/fake_cupti on LD_LIBRARY_PATH). Each step runs, inside
record_function("gpu_section"), the operator tp_gpu::fill (registered with
torch.library, its CPU kernel written in Python), which calls cudaMemset on a buffer
from cudaMalloc, then a small training step whose optimizer.step() ends the step.

    python3 ops_gpu.py STEPS

Step k's cudaMemset sets 1000 * (k + 1) bytes. Prints each runtime call's return code
(all must be 0) and, for cudaMemset, the bytes it set."""

import ctypes
import sys

import torch


def main():
    steps = int(sys.argv[1])
    cudart = ctypes.CDLL("libcudart.so.13")
    buf = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 20))
    print("cudaMalloc %d" % rc)

    lib = torch.library.Library("tp_gpu", "DEF")
    lib.define("fill(Tensor x, int nbytes) -> Tensor")

    def fill(x, nbytes):
        done = cudart.cudaMemset(buf, ctypes.c_int(0), ctypes.c_size_t(nbytes))
        print("cudaMemset %d bytes %d" % (done, nbytes))
        return x + 1

    lib.impl("fill", fill, "CPU")

    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 4)
    for k in range(steps):
        with torch.autograd.profiler.record_function("gpu_section"):
            torch.ops.tp_gpu.fill(x, 1000 * (k + 1))
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    print("cudaDeviceSynchronize %d" % cudart.cudaDeviceSynchronize())
    print("cudaFree %d" % cudart.cudaFree(buf))


if __name__ == "__main__":
    main()
