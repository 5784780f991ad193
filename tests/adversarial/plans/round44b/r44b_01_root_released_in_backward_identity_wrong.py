"""Idea: fully_shard(model.w1); fully_shard(model) (the root owns w2). x does not require grad,
so the real root registers no RegisterPostBackwardFunction: its post_backward (reshard) runs
only in the final callback; during the backward model.w2.weight is the unsharded parameter.
The stand-in releases the root's views at GatherShard's backward (in_backward). A tensor hook
on a node created before model(x) (lowest sequence number: runs after GatherShard) records
whether model.w2.weight is the optimizer's (sharded) parameter; the gradients are scaled by 2
when it is not. Spec and stand-in: "is" (k = 1); real: "is not" (k = 2).
Truth (torch4_truth.py FILE 2): wrong, step 1 w1 0.0070 / w2 0.0093. Verdict (ac24550):
EQUIVALENT (4 goals, 32 s): R44b-1, false accept.
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


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


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
