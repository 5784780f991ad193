"""Idea: fully_shard([model.w1, model.w2]) (one state) under a root fully_shard(model). torch
2.13's FSDPParamGroup.pre_forward registers RegisterPostBackwardFunction only when entering the
forward pass (the first member: w1, whose input x needs no grad), so the group has no
post-backward and stays unsharded until the final callback. The stand-in wraps every member's
inputs (w2's input needs grad) and reshards the group when the gradient reaches w2's input. A
tensor hook with the lowest sequence number reads 'model.w2.weight is p2' (p2 the optimizer's);
gradients scaled by 2 when it is not. Spec: is (k = 1); real: is not (k = 2).
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
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p2 = optimizer.param_groups[0]["params"][1]
    seen = []
    z = torch.ones((), dtype=x.dtype, requires_grad=True)
    zz = z * 1.0

    def hook(g):
        seen.append(model.w2.weight is p2)
        return g

    zz.register_hook(hook)
    out = model(x)
    loss = ((out * zz - y) ** 2).mean()
    loss.backward()
    k = 1.0 if seen[0] else 2.0
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(k)
    optimizer.step()
    optimizer.zero_grad()
    return loss
