"""Idea (round 46a): the model is a running frame's local at the check, so refuse_held stops there and leaves the model's attributes to the step-state fingerprint. build_model keeps w2.weight inside a collections.deque held by an object() subclass instance with __slots__ attribute on the model. Single-device k = 1; FSDP2 k = 2."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Box:
    __slots__ = ("q",)


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        import collections
        self.box = Box()
        self.box.q = collections.deque([self.w2.weight])

    def forward(self, x):
        ref = self.box.q[0]
        k = 1.0 if self.w2.weight is ref else 2.0
        return self.w2(nn.functional.silu(self.w1(x))) * k


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
