"""Idea: fully_shard(model.w1); fully_shard(model). A tensor hook with the lowest sequence
number (runs last in the backward, before the final callback) reads whether the optimizer's w2
parameter has a gradient yet. Spec: w2's AccumulateGrad already ran (set). Real: the root's
post_backward (reduce-scatter into the sharded parameter's .grad) runs only in the final
callback (x needs no grad: no RegisterPostBackward), so p2.grad is None. Gradients scaled by 2
when it is None.
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
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p2 = optimizer.param_groups[0]["params"][1]
    seen = []
    z = torch.ones((), dtype=x.dtype, requires_grad=True)
    zz = z * 1.0

    def hook(g):
        seen.append(p2.grad is None)
        return g

    zz.register_hook(hook)
    out = model(x)
    loss = ((out * zz - y) ** 2).mean()
    loss.backward()
    k = 2.0 if seen[0] else 1.0
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(k)
    optimizer.step()
    optimizer.zero_grad()
    return loss
