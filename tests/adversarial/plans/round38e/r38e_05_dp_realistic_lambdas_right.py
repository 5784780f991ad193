"""Round 38e (dp 2, right): lambdas as realistic training code writes them, none raising:
`model.apply(lambda m: ...)`, `sorted(named_parameters, key=lambda kv: kv[0])`,
`functools.reduce(lambda a, b: a + b, ...)`, `defaultdict(lambda: 0.0)`, `max(key=lambda)`,
`map(lambda)`, `filter(lambda)` and an optimizer closure `optimizer.step(lambda: loss)`.
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0 (right).
Verdict (main 195d560): EQUIVALENT (4 goals, 20 s): right.
"""
MESH = {"dp": 2}
import collections
import functools

import torch
import torch.distributed as dist
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
    m.apply(lambda mod: setattr(mod, "tag", type(mod).__name__))
    return m


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        named = sorted(model.named_parameters(), key=lambda kv: kv[0])
        counts = collections.defaultdict(lambda: 0.0)
        for name, p in named:
            counts[name.split(".")[0]] += 1.0
        n = functools.reduce(lambda a, b: a + b, counts.values())
        big = max((p for _, p in named), key=lambda p: p.numel())
        assert n == 2.0 and big.dim() == 2
        grads = list(map(lambda kv: kv[1].grad, filter(lambda kv: kv[1].requires_grad, named)))
        for gr in grads:
            dist.all_reduce(gr, group=mesh["dp"].get_group())
    optimizer.step(lambda: loss)
    optimizer.zero_grad()
    return loss
