"""Adversarial round 58e, a RIGHT plan (must stay EQUIVALENT): examples/torch/mlp_ddp.py whose
model holds an `lru_cache` helper (empty, never called: maxsize None and a typed one), a
`weakref.finalize` on itself (never run), an object of a torch class the train file imports
itself (`torch.distributed.algorithms.join.JoinHook`), and an `nn.Linear` subclass; the step
calls a `maxsize=0` helper (a miss counted each call, alike on both sides)."""
import functools
import weakref

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.join import JoinHook

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


@functools.lru_cache(maxsize=None)
def _cached(n):
    return n * 2


def _bye(tag):
    return tag


class Lin(nn.Linear):
    pass


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = Lin(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cached = _cached
        self.typed = functools.lru_cache(typed=True)(_bye)
        self.fz = weakref.finalize(self, _bye, "mlp")
        self.hook = JoinHook()

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
