"""Round 31, control of r31_01 (dp 2): the same swap of Work.wait inside
dist.all_reduce, but the swapped wait puts the original back and waits as torch does: right
(truth update 5.6e-17 / 0.0, step 2 5.6e-17 / 5.6e-17)."""

import time

import torch
import torch.distributed as dist
from torch import nn

W = torch._C._distributed_c10d.Work
MESH = {"dp": 2}
LATE = 1.0
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        orig_wait = W.__dict__["wait"]
        orig = torch.Tensor.is_complex

        def no_wait(self, *a, **k):     # runs as dist.all_reduce's work.wait()
            W.wait = orig_wait          # the very object again
            return orig_wait(self, *a, **k)     # control: waits as torch does

        def is_complex(self):       # called by dist.all_reduce before group.allreduce
            W.wait = no_wait
            return orig(self)

        torch.Tensor.is_complex = is_complex
        try:
            for p in model.parameters():
                dist.all_reduce(p.grad, group=pg)   # its wait waits nothing
                W.wait = orig_wait          # (the trace's work is not waited by it)
        finally:
            del torch.Tensor.is_complex      # inherited from TensorBase again
            W.wait = orig_wait
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
