"""Idea: R44b-4 with tensor parallelism: build_model marks w1.weight (no_decay); the TP
styles make new parameters (no mark), so the real TP run decays w1, the single-device one not.
param_attrs reads the mark off the styles' parameter (none). Expected NOT EQUIVALENT.
"""
MESH = {"tp": 2}
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
    m = MLP(s["hidden"], s["ffn"])
    m.w1.weight.no_decay = True
    return m


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    decay = [p for p in model.parameters() if not getattr(p, "no_decay", False)]
    rest = [p for p in model.parameters() if getattr(p, "no_decay", False)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.5},
                              {"params": rest, "weight_decay": 0.0}], lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    parallelize_module(model, mesh["tp"], {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
