"""Idea (round 47d): the FSDP-based replicate (replicate_with_fsdp) does not set _is_fsdp_managed_module (torch 2.13: "which replicate doesn't need"); r47c_09's doubling when set never runs for real: right. Does the stand-in set it?"""
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
    from torch.distributed._composable.replicate_with_fsdp import replicate
    replicate(model.w1, mesh=mesh["dp"])
    replicate(model, mesh=mesh["dp"])
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
