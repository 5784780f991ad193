"""Idea: false-refusal check of realistic code near R40b-2's registry reads: a module-level
`functools.singledispatch` helper (registered for `torch.Tensor`, `dict`, `numbers.Number` at
import) called on the batch and the loss in the step; its dispatch cache (a `WeakKeyDictionary`
in the function's closure, cleared when `abc.get_cache_token()` moves) is filled alike on both
sides. Gradients averaged by hand (right).
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 5.6e-17 / 5.6e-17 (right).
Verdict (970c0c9): UNKNOWN (32 s): 'cannot read the global as_float ... (!<holds opaque
builtins.classmethod_descriptor>)': false refusal R41c-5.
"""
MESH = {"dp": 2}
import functools
import numbers

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


@functools.singledispatch
def as_float(x):
    return x


@as_float.register(torch.Tensor)
def _(x):
    return x.to(torch.float64)


@as_float.register(dict)
def _(x):
    return {k: as_float(v) for k, v in x.items()}


@as_float.register(numbers.Number)
def _(x):
    return float(x)


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
    return model


def train_step(model, optimizer, batch, mesh):
    batch = as_float(batch)
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() * as_float(1) / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
