"""Idea: reentrant checkpoint around the unit w2 (fully_shard(model.w2) under a root owning w1).
The original forward runs under no_grad (no RegisterPostBackward, no pre-backward hooks); the
recomputation inside CheckpointFunction.backward runs FSDP2's full pre-forward (state IDLE):
its inputs are wrapped and the inner backward's post_backward reshards w2. The stand-in does
not wrap in any recomputation. A late hook reads 'model.w2.weight is p2' (k = 1 if so).
Meant right (real resharded: is; spec: is).
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
        from torch.utils.checkpoint import checkpoint
        h = nn.functional.silu(self.w1(x))
        return checkpoint(self.w2, h, use_reentrant=True)


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
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p2 = optimizer.param_groups[0]["params"][1]
    seen = []
    z = torch.ones((), dtype=x.dtype, requires_grad=True)
    zz = z * 1.0

    def hook(g):
        seen.append(model.w2.weight is optimizer.param_groups[0]["params"][1])
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
