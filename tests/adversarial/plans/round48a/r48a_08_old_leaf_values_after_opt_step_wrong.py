"""Idea (round 48a): the root keeps w0 unsharded after its forward; a reference to mod.w0.weight kept from the first iteration is, for real, FSDP2s single unsharded parameter, re-gathered after the optimizer step (new values); the stand-in keeps the old leaf with the old values. Scaling the output (parallel only) by 1 + sum(old ref now - its value then): 1 for the stand-in, not 1 for real."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

SEEN = []


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.register_forward_hook(lambda mod, a, o: SEEN.append(mod.w0.weight))
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    old = SEEN[0].detach().clone()
    optimizer.step()
    optimizer.zero_grad()
    out = model(x)
    if mesh is not None:
        out = out * (1.0 + (SEEN[0].detach() - old).sum())
    SEEN.clear()
    loss = ((out - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
