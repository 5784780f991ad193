"""Idea: parallelize registers a parametrization on w1.weight (weight = 2 * original): the
name w1.weight leaves named_parameters (w1.parametrizations.weight.original), so the guard's
loop over the returned model's names never meets it.
Truth: not run (the truth reads state_dict names; the parametrized name differs). Verdict
(ac24550): exit 3 (8 s, a forward of ParametrizationList in parallelize): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Double(nn.Module):
    def forward(self, w):
        return 2 * w


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
    from torch.nn.utils import parametrize
    parametrize.register_parametrization(model.w1, "weight", Double())
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
