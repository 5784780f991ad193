"""Idea (round 46a): build_model's w2.weight saved by an autograd node (K = w2.weight * c; K.grad_fn._saved_self is w2.weight; a C++ SavedVariable: invisible to the collector and refcount), K kept in math. Single-device k = 1, FSDP2 k = 2."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        import math
        c = torch.full_like(self.w2.weight, 2.0)
        math.K46 = self.w2.weight * c

    def forward(self, x):
        import math
        ref = math.K46.grad_fn._saved_self
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
