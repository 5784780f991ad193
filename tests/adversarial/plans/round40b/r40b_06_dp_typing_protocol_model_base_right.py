"""Idea: torchtitan's model base: `class ModelProtocol(typing.Protocol)` with an abstract
classmethod `from_model_args`, the model `class MLP(nn.Module, ModelProtocol)` built by it
(`_ProtocolMeta` is an `ABCMeta`: `_abc_impl`, `_is_protocol`, typing's `__init__` /
`__subclasshook__` replacements on the class). Plain DDP-style all-reduce: right.
Truth (torch4_truth.py FILE 2): 2.8e-17 / 3.5e-18, 2.8e-17 / 6.9e-18 (right).
Verdict at 1510d44: EQUIVALENT (10 goals, 32 s): right.
"""
MESH = {"dp": 2}
from abc import abstractmethod
from typing import Protocol

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class ModelProtocol(Protocol):
    @classmethod
    @abstractmethod
    def from_model_args(cls, args: dict) -> nn.Module:
        ...


class MLP(nn.Module, ModelProtocol):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    @classmethod
    def from_model_args(cls, args):
        return cls(args["hidden"], args["ffn"])

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP.from_model_args(s)


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
