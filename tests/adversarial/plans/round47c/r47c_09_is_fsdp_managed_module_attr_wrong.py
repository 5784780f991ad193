"""Idea (round 47c): fully_shard sets _is_fsdp_managed_module = True (and _fsdp_use_orig_params) in every managed module's __dict__ (torch 2.13 _fully_shard.py); getattr(model.w0, "_is_fsdp_managed_module", False) -> double the gradients: wrong for real; the stand-in never sets it."""
MESH = {"dp": 2}
import copy
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


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    from torch.distributed.fsdp import fully_shard
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if getattr(model.w0, "_is_fsdp_managed_module", False):
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
