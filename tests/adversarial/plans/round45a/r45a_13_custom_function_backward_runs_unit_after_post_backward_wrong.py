"""Idea: r45a_01's mechanism without a checkpoint: a custom autograd.Function placed before the
unit w1 runs w1 (no_grad) in its backward, after w1's post-backward resharded it: torch 2.13's
_pre_forward sees the state PRE_BACKWARD, unshards and returns; the final callback skips the
group (POST_BACKWARD): model.w1.weight stays unsharded after the backward. train_step doubles
p1.grad when model.w1.weight is not p1. Spec: always p1.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class M(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, h, bias=False)

    def forward(self, x):
        h0 = self.w0(x)
        c = Probe.apply(h0, self, x)
        return self.w1(c)


class Probe(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, mod, x):
        ctx.mod, ctx.x = mod, x
        return h.clone()

    @staticmethod
    def backward(ctx, g):
        with torch.no_grad():
            s = ctx.mod.w1(ctx.x).sum()
        return g + 0.0 * s, None, None


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return M(s["hidden"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p1 = optimizer.param_groups[0]["params"][1]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if model.w1.weight is not p1:
        p1.grad.mul_(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
