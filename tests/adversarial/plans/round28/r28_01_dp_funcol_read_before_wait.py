"""Round 28 (dp only): mlp_ddp.py with the gradient sum issued as the raw functional op
torch.ops._c10d_functional.all_reduce (asynchronous: its output is a clone of the input that the
backend reduces in the background until wait_tensor), the output read (divided and copied into
p.grad) *before* torch.ops._c10d_functional.wait_tensor. Rank 1 is a 1 s straggler, so rank 0
reads its own unreduced gradient. The lowering makes all_reduce the reduced value at its node
and wait_tensor the identity. Wrong (racy; deterministic on rank 0 with the straggler)."""

import time

import torch
import torch.distributed as dist
from torch import nn

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
        name = mesh["dp"].get_group().group_name
        outs = []
        for p in model.parameters():
            g = torch.ops._c10d_functional.all_reduce(p.grad, "sum", name)
            p.grad.copy_(g / mesh["dp"].size())     # BUG: read before wait_tensor
            outs.append(g)
        for g in outs:
            torch.ops._c10d_functional.wait_tensor(g)
    optimizer.step()
    optimizer.zero_grad()
    return loss
