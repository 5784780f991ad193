"""Idea (round 45c): fully_shard([w1, w2]) group + root; BOTH members run inside one non-reentrant checkpoint (recomputed together inside the backward after the group's pre-backward). (Truth: right, 3.5e-18.) A hook with the lowest sequence number reads model.w1.weight is p1."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        h = self.w0(x)
        return checkpoint(lambda t: self.w2(nn.functional.silu(self.w1(t))), h, use_reentrant=False)


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
    p1 = optimizer.param_groups[0]["params"][1]
    seen = []
    z = torch.ones((), dtype=x.dtype, requires_grad=True)
    zz = z * 1.0

    def hook(g):
        seen.append(model.w1.weight is p1)
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
