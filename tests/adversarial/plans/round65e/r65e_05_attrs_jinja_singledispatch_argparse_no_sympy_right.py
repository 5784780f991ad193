"""Round 65e (r65e_05): r65e_04 less the sympy lambdify (control): right plan (examples/torch/mlp_ddp.py) with research-code idioms whose
libraries make functions by exec into globals of their own: an attrs config class (its
__init__ / __repr__ exec-made), a jinja2 Template rendered in the step (compiled by exec), a
sympy lambdify'd schedule called in the step, a functools.singledispatch logger called in the
step, argparse at module level, logging, a dataclass and a typing.NamedTuple. Must be
EQUIVALENT (a false refusal otherwise)."""
import argparse
import dataclasses
import functools
import logging
import typing

import attrs
import jinja2
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

PARSER = argparse.ArgumentParser()
PARSER.add_argument("--lr", type=float, default=0.1)
ARGS = PARSER.parse_args([])
LOG = logging.getLogger("r65e_04")


@attrs.define
class Cfg:
    lr: float = 0.1
    tag: str = "run"


@dataclasses.dataclass(frozen=True)
class Shape:
    h: int
    f: int


class Stat(typing.NamedTuple):
    step: int
    loss: float


CFG = Cfg(lr=ARGS.lr)
TEMPLATE = jinja2.Template("step {{ s }} tag {{ tag }}")


@functools.singledispatch
def describe(x):
    return "obj"


@describe.register
def _(x: int):
    return "int"


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    shape = Shape(s["hidden"], s["ffn"])
    return MLP(shape.h, shape.f)


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=CFG.lr)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    scale = 1.0
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    for p in model.parameters():
        p.grad.mul_(scale)
    LOG.debug(TEMPLATE.render(s=describe(3), tag=CFG.tag))
    LOG.debug("%r %r", Stat(1, 0.0), repr(CFG))
    optimizer.step()
    optimizer.zero_grad()
    return loss
