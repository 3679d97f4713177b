"""A three-level model for --with-modules: Net holds two Blocks, each Block a Leaf
(Linear then ReLU) and a Linear of its own, and Net a Linear head. Each forward makes
one call of every module; each module runs one op of its own besides its children:
Linear aten::linear, ReLU aten::relu, Leaf aten::mul, Block aten::add, Net aten::sub.

    modules_model.py STEPS [--raise] [--gpu]

Every step is forward, loss, backward and an optimizer step. --raise: after the steps,
a forward whose second Leaf raises (caught here), then one more forward: the calls the
failed one left open (Net, the second Block and Leaf) close when Net is called again.
--gpu: each Leaf call also runs tp_gpu::fill, an op whose CPU kernel calls cudaMemset of
1000 bytes through whatever libcudart.so.13 the loader finds (the tests' drop-in one).
"""

import sys

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


GPU = "--gpu" in sys.argv


def gpu_op():
    import ctypes

    cudart = ctypes.CDLL("libcudart.so.13")
    buf = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 16))
    lib = torch.library.Library("tp_gpu", "DEF")
    lib.define("fill(Tensor x) -> Tensor")

    def fill(x):
        cudart.cudaMemset(buf, ctypes.c_int(0), ctypes.c_size_t(1000))
        return x.clone()

    lib.impl("fill", fill, "CPU")
    return lib, cudart


class Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.act = nn.ReLU()
        self.fail = False

    def forward(self, x):
        if GPU:
            with torch.no_grad():
                torch.ops.tp_gpu.fill(x)
        x = self.act(self.lin(x)) * 0.5
        if self.fail:
            raise RuntimeError("asked to fail")
        return x


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.leaf = Leaf()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return self.proj(self.leaf(x)) + 1.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x) - 1.0


def main():
    steps = int(sys.argv[1])
    keep = gpu_op() if GPU else None
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(8, 16)
    target = torch.randn(8, 4)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(data) - target) ** 2).mean()
        loss.backward()
        opt.step()
    if "--raise" in sys.argv:
        model.blocks[1].leaf.fail = True
        try:
            with torch.no_grad():
                model(data)
        except RuntimeError as e:
            print("caught:", e)
        model.blocks[1].leaf.fail = False
        with torch.no_grad():
            model(data)
    if keep is not None:
        keep[1].cudaDeviceSynchronize()
    print("done")


if __name__ == "__main__":
    main()
