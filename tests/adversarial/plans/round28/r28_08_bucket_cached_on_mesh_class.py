"""Round 28 (R26-8 after its fix, which reads every attribute in the mesh object's own dict):
the per-parameter buckets are cached on the mesh's *class* (`type(mesh)._bufs`: torch's
DeviceMesh), built on the first step and packed with `add_` (never zeroed). The traced step 1
starts from zeros; from step 2 each bucket adds the previous step's reduced sum. Wrong from
step 2."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
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
        bufs = getattr(type(mesh), "_bufs", None)
        if bufs is None:                  # built once, on the first step
            bufs = type(mesh)._bufs = [torch.zeros_like(p) for p in model.parameters()]
        for p, b in zip(model.parameters(), bufs):
            b.add_(p.grad)                # (should be copy_: the buffer is reused)
            dist.all_reduce(b, group=mesh["dp"].get_group())
            p.grad.copy_(b / mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
