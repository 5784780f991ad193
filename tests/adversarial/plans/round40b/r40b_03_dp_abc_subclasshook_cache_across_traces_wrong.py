"""Idea: an ABC's caches "only remember answers" (`step_state._abc_registry` leaves them out),
but a cached answer is what `isinstance` says the next time. `Sharded.__subclasshook__` says
yes when a process group is up: the real ranks scale by 0.5 (wrong from step 1), the
single-device run does not. If the capture traces the spec and the plan in one process with
one class object, the plan's `isinstance` reads the spec's negative cache.
Truth (torch4_truth.py FILE 2): step 1 w1 0.0039 / w2 0.0048, step 2 0.0057 / 0.0077.
Verdict at 1510d44: NOT EQUIVALENT (4 goals refuted, 23 s): sound (each trace evaluates the
hook afresh).
"""
MESH = {"dp": 2}
import abc

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Sharded(abc.ABC):
    @classmethod
    def __subclasshook__(cls, C):
        return dist.is_available() and dist.is_initialized()


class Cfg:
    width = 1


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, Sharded) else y


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
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
