"""Idea: a forward pre-hook registered on model.w2 in build_model (before fully_shard). FSDP2
prepends its own pre-forward (register_forward_pre_hook(prepend=True)), so for real the user's
hook sees w2's unsharded parameter (not the optimizer's); spec: the same object. The stand-in
installs its pre hook at the step (appended after the user's): the hook would see the stored one.
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

SEEN = []


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])

    def pre(mod, args):
        SEEN.append(mod.weight)

    m.w2.register_forward_pre_hook(pre)
    return m


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p2 = optimizer.param_groups[0]["params"][1]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    k = 1.0 if SEEN[-1] is p2 else 2.0
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(k)
    optimizer.step()
    optimizer.zero_grad()
    return loss
