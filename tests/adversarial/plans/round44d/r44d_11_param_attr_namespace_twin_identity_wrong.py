"""Idea: R44c-4 through a container pytree does not flatten: w1.weight.meta =
SimpleNamespace(twin=w2.weight). carried's tree_leaves sees the namespace as one non-tensor leaf,
so it is copied; spec: twin is w2 (k=1); plan re-points it to w1 (k=2): wrong.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    import types
    m.w1.weight.meta = types.SimpleNamespace(twin=m.w2.weight)
    return m


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    model.w1.weight.meta.twin = model.w1.weight
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    k = 1.0 if model.w1.weight.meta.twin is model.w2.weight else 2.0
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(k)
    optimizer.step()
    optimizer.zero_grad()
    return loss
