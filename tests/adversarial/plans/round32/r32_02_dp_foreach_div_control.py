"""Round 32, control of r32_01 (dp 2): the same hand-written DDP with torch._foreach_div_, no
kernel registered. Right: truth (torch4_truth.py FILE 2) 0.0 / 2.8e-17 (both steps).
EQUIVALENT at ddc6b7a (4 goals, 91 s)."""

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
        pg = mesh["dp"].get_group()
        grads = [p.grad for p in model.parameters()]
        for g in grads:
            dist.all_reduce(g, group=pg)
        torch._foreach_div_(grads, mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
