"""Mutant of r45a_15 (stop 45): the loss summed over the local batch; FSDP2 averages the
gradients over dp, so every gradient is 1/2 of the single-device sum: wrong. Must be refuted.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class Block(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.lin = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return x + nn.functional.silu(self.lin(x))


class M(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.inp = nn.Linear(h, h, bias=False)
        self.layers = nn.ModuleList([Block(h) for _ in range(2)])
        self.out = nn.Linear(h, h, bias=False)

    def forward(self, x):
        x = self.inp(x)
        for b in self.layers:
            x = b(x)
        return self.out(x)


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return M(s["hidden"])


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.fsdp import fully_shard
    for i, b in enumerate(model.layers):
        model.layers[i] = checkpoint_wrapper(b)
    for b in model.layers:
        fully_shard(b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).sum()   # sum: FSDP2 averages over dp
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
